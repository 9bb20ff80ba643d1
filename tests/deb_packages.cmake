# The Debian package test: makes uma's .deb files from a built tree with CPack, unpacks them with
# `dpkg -x` into a fresh root, builds and runs examples/consumer against that root only, runs the
# root's `uma`, and imports the root's Python packages (tests/installed_python_check.py). Reuses
# the built tree: CPack's pre-install step builds what is out of date, which after the build is
# nothing (a make that finds every target up to date: seconds).
#
#   cmake -DUMA_BUILD_DIR=... -DCONSUMER_SOURCE_DIR=... -DWORK_DIR=... -DVERSION=...
#         -DC_ABI_VERSION=... -DLIBDIR=... -DPYTHON_DIR=... -DPYTHON=... -DPYTHON_CHECK=...
#         [-DGENERATOR=...]
#         [-DCXX_COMPILER=...]
#         [-DBUILD_TYPE=...] -P tests/deb_packages.cmake
cmake_minimum_required(VERSION 3.25)

foreach(required UMA_BUILD_DIR CONSUMER_SOURCE_DIR WORK_DIR VERSION C_ABI_VERSION LIBDIR
         PYTHON_DIR PYTHON PYTHON_CHECK)
  if(NOT ${required})
    message(FATAL_ERROR "deb_packages.cmake: -D${required}=... is required")
  endif()
endforeach()

include("${CMAKE_CURRENT_LIST_DIR}/packaging_steps.cmake")

set(debs "${WORK_DIR}/debs")
set(root "${WORK_DIR}/root")
set(runtime "${WORK_DIR}/runtime")  # python3-uma and what it depends on of uma's: libuma-c
set(build "${WORK_DIR}/consumer")
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}" "${root}" "${runtime}")
# The packages' prefix is /usr; LIBDIR and PYTHON_DIR (UMA_PYTHON_INSTALL_DIR) are the tree's.
set(libdir "${root}/usr/${LIBDIR}")
if(IS_ABSOLUTE "${PYTHON_DIR}")
  set(python_dir "${root}${PYTHON_DIR}")
else()
  set(python_dir "${root}/usr/${PYTHON_DIR}")
endif()

get_filename_component(cmake_bin "${CMAKE_COMMAND}" DIRECTORY)
run("cpack" "${cmake_bin}/cpack" --config "${UMA_BUILD_DIR}/CPackConfig.cmake" -G DEB -B "${debs}")
run("dpkg --print-architecture" dpkg --print-architecture)
string(STRIP "${step_output}" arch)

# The four packages, each with its name, the project's version and what ties them together.
foreach(package libuma-dev:${arch} libuma-c:${arch} uma-tools:${arch} python3-uma:all)
  string(REPLACE ":" ";" package "${package}")
  list(GET package 0 name)
  list(GET package 1 package_arch)
  set(deb "${debs}/${name}_${VERSION}_${package_arch}.deb")
  if(NOT EXISTS "${deb}")
    file(GLOB made "${debs}/*.deb")
    message(FATAL_ERROR "cpack made no ${deb}; it made: ${made}")
  endif()
  run("dpkg-deb -f ${name}" dpkg-deb -f "${deb}" Package Version Depends)
  if(NOT step_output MATCHES "Package: ${name}\nVersion: ${VERSION}\n")
    message(FATAL_ERROR "${deb}: wrong control fields:\n${step_output}")
  endif()
  if(name MATCHES "^(libuma-dev|python3-uma)$"
     AND NOT step_output MATCHES "Depends: [^\n]*libuma-c \\(= ${VERSION}\\)")
    message(FATAL_ERROR "${name} does not depend on libuma-c ${VERSION}:\n${step_output}")
  endif()
  run("dpkg -x ${name}" dpkg -x "${deb}" "${root}")
  if(name MATCHES "^(libuma-c|python3-uma)$")
    run("dpkg -x ${name} (runtime)" dpkg -x "${deb}" "${runtime}")
  endif()
endforeach()

# libuma-c holds the library under its SONAME (libuma_c.so.C_ABI_VERSION, a link to
# libuma_c.so.VERSION); the link a linker asks for, libuma_c.so, is libuma-dev's.
run("dpkg-deb -c libuma-c" dpkg-deb -c "${debs}/libuma-c_${VERSION}_${arch}.deb")
string(REPLACE "." "\\." version_re "${VERSION}")
if(NOT step_output MATCHES "/libuma_c\\.so\\.${C_ABI_VERSION} -> libuma_c\\.so\\.${version_re}\n"
   OR NOT step_output MATCHES "/libuma_c\\.so\\.${version_re}\n"
   OR step_output MATCHES "/libuma_c\\.so -> ")
  message(FATAL_ERROR "libuma-c should hold libuma_c.so.${VERSION} and the link "
                      "libuma_c.so.${C_ABI_VERSION}, not libuma_c.so:\n${step_output}")
endif()
run("dpkg-deb -c libuma-dev" dpkg-deb -c "${debs}/libuma-dev_${VERSION}_${arch}.deb")
if(NOT step_output MATCHES "/libuma_c\\.so -> libuma_c\\.so\\.${C_ABI_VERSION}\n")
  message(FATAL_ERROR "libuma-dev should hold the link libuma_c.so:\n${step_output}")
endif()

# Every library the packaged programs load directly comes from a package their Depends names
# (uma-tools once still named CAF's io and openssl modules after the wire moved to gRPC).
foreach(pair "uma-tools|${root}/usr/bin/uma" "libuma-c|${libdir}/libuma_c.so.${C_ABI_VERSION}")
  string(REPLACE "|" ";" pair "${pair}")
  list(GET pair 0 name)
  list(GET pair 1 binary)
  run("dpkg-deb -f ${name} Depends" dpkg-deb -f "${debs}/${name}_${VERSION}_${arch}.deb" Depends)
  string(REGEX REPLACE "[ \n]" "" depends ",${step_output},")
  run("ldd ${binary}" ldd "${binary}")
  set(loads "${step_output}")
  run("readelf -d ${binary}" readelf -d "${binary}")
  string(REGEX MATCHALL "Shared library: \\[[^]]+\\]" needed "${step_output}")
  foreach(entry ${needed})
    string(REGEX REPLACE "Shared library: \\[([^]]+)\\]" "\\1" lib "${entry}")
    if(lib MATCHES "^(ld-linux|libuma)")
      continue()
    endif()
    # The file the loader takes (ldd), and the package dpkg says owns it.
    string(REGEX REPLACE "([][+.*()^$?|\\])" "\\\\\\1" lib_re "${lib}")
    string(REGEX MATCH "${lib_re} => ([^ \n]+)" found "${loads}")
    if(NOT CMAKE_MATCH_1)
      message(FATAL_ERROR "${name}: ldd does not resolve ${lib} of ${binary}:\n${loads}")
    endif()
    # dpkg knows a file by the path its package shipped: /lib/... or /usr/lib/... (usrmerge).
    set(loaded "${CMAKE_MATCH_1}")
    file(REAL_PATH "${loaded}" path)
    string(REGEX REPLACE "^/usr/lib/" "/lib/" short "${path}")
    set(package "")
    foreach(candidate "${loaded}" "${path}" "${short}")
      execute_process(COMMAND dpkg -S "${candidate}" RESULT_VARIABLE rc OUTPUT_VARIABLE owner
                      ERROR_QUIET)
      if(rc EQUAL 0)
        string(REGEX MATCH "^[^:]+" package "${owner}")
        break()
      endif()
    endforeach()
    if(NOT package)
      message(FATAL_ERROR "${name}: no package holds ${lib} (${loaded}, ${path})")
    endif()
    string(FIND "${depends}" ",${package}(" with_version)
    string(FIND "${depends}" ",${package}," bare)
    if(with_version EQUAL -1 AND bare EQUAL -1)
      message(FATAL_ERROR "${name}: ${binary} loads ${lib} from ${package}, which its Depends "
                          "does not name: ${depends}")
    endif()
  endforeach()
endforeach()

# What the packages put where (docs/packaging.md), and no empty folder.
foreach(file ${libdir}/cmake/uma/umaConfig.cmake ${root}/usr/include/uma/actors/client.hpp
             ${root}/usr/include/uma/c/uma.h ${libdir}/libuma_c.so
             ${libdir}/libuma_c.so.${C_ABI_VERSION} ${root}/usr/bin/uma
             ${python_dir}/uma_c/_installed.py)
  if(NOT EXISTS "${file}")
    file(GLOB_RECURSE unpacked RELATIVE "${root}" "${root}/*")
    message(FATAL_ERROR "the packages hold no ${file}; they hold: ${unpacked}")
  endif()
endforeach()
check_no_empty_folder("${root}")

run("the root's uma info" "${root}/usr/bin/uma" info --backend host)
if(NOT step_output MATCHES "^uma ${VERSION}")
  message(FATAL_ERROR "the root's uma is not version ${VERSION}:\n${step_output}")
endif()

# examples/consumer against the root only: no package registry, no /usr/local (where an earlier
# `cmake --install` may have put a uma); CAF, Boost and CUDA come from the system, as the
# packages' dependencies would bring them.
build_consumer("${CONSUMER_SOURCE_DIR}" "${build}" "-DCMAKE_PREFIX_PATH=${root}/usr"
               -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF -DCMAKE_IGNORE_PREFIX_PATH=/usr/local)
file(STRINGS "${build}/CMakeCache.txt" uma_dir REGEX "^uma_DIR:")
if(NOT uma_dir STREQUAL "uma_DIR:PATH=${libdir}/cmake/uma")
  message(FATAL_ERROR "examples/consumer found uma elsewhere than the root: ${uma_dir}")
endif()

# The Python packages from the root alone: no UMA_LIBRARY, no LD_LIBRARY_PATH, no user site, run
# outside the checkout.
run("import the root's Python packages" "${CMAKE_COMMAND}" -E chdir "${WORK_DIR}"
    "${CMAKE_COMMAND}" -E env --unset=UMA_LIBRARY
    --unset=LD_LIBRARY_PATH "PYTHONPATH=${python_dir}" PYTHONNOUSERSITE=1
    PYTHONDONTWRITEBYTECODE=1 "${PYTHON}" "${PYTHON_CHECK}" "${python_dir}" "${libdir}/libuma_c.so")
message("${step_output}")
# And from python3-uma with only libuma-c beside it (its Depends): no libuma_c.so link there, so
# uma_c must load the library by its SONAME.
string(REPLACE "${root}" "${runtime}" runtime_python_dir "${python_dir}")
string(REPLACE "${root}" "${runtime}" runtime_libdir "${libdir}")
run("import python3-uma beside libuma-c alone" "${CMAKE_COMMAND}" -E chdir "${WORK_DIR}"
    "${CMAKE_COMMAND}" -E env --unset=UMA_LIBRARY
    --unset=LD_LIBRARY_PATH "PYTHONPATH=${runtime_python_dir}" PYTHONNOUSERSITE=1
    PYTHONDONTWRITEBYTECODE=1 "${PYTHON}" "${PYTHON_CHECK}" "${runtime_python_dir}"
    "${runtime_libdir}/libuma_c.so.${C_ABI_VERSION}")
message("${step_output}")
message("OK: the .deb files unpacked into ${root} build the consumer and import in Python")
