# Steps the packaging tests share (tests/install_consumer.cmake, tests/deb_packages.cmake):
# running a step, checking an installed tree for empty folders, and building and running
# examples/consumer against a prefix. Included by those scripts; reads their -D variables
# GENERATOR, CXX_COMPILER, BUILD_TYPE and SANITIZE.

# run(<step> <command...>): runs a step, stops with its output when it fails; the output is left
# in `step_output`.
function(run step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${step} failed (${rc}):\n${out}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

# check_no_empty_folder(<root>): an install leaves no empty folder behind (actors/c/ once was).
function(check_no_empty_folder root)
  file(GLOB_RECURSE dirs LIST_DIRECTORIES true "${root}/*")
  foreach(dir ${dirs})
    file(GLOB entries "${dir}/*")
    if(IS_DIRECTORY "${dir}" AND NOT entries)
      message(FATAL_ERROR "the install leaves an empty folder: ${dir}")
    endif()
  endforeach()
endfunction()

# configure_project(<what> <source> <build> <cmake args...>): configures a project that finds
# the installed uma with the args (the prefix to find it in) and this tree's generator, compiler,
# build type and sanitizers (a sanitized libuma.a needs the sanitizer runtimes in its users too).
function(configure_project what source build)
  set(args -S "${source}" -B "${build}" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF ${ARGN})
  if(GENERATOR)
    list(APPEND args -G "${GENERATOR}")
  endif()
  if(CXX_COMPILER)
    list(APPEND args "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}")
  endif()
  if(BUILD_TYPE)
    list(APPEND args "-DCMAKE_BUILD_TYPE=${BUILD_TYPE}")
  endif()
  if(SANITIZE)
    string(REPLACE ";" "," flags "${SANITIZE}")
    list(APPEND args "-DCMAKE_CXX_FLAGS=-fsanitize=${flags}"
         "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=${flags}")
  endif()
  run("configure ${what}" "${CMAKE_COMMAND}" ${args})
endfunction()

# build_consumer(<source> <build> <cmake args...>): configures examples/consumer as
# configure_project does, builds it and runs its programs, each of which must report OK.
function(build_consumer source build)
  configure_project("examples/consumer" "${source}" "${build}" ${ARGN})
  run("build examples/consumer" "${CMAKE_COMMAND}" --build "${build}")
  foreach(program uma_consumer_sys uma_consumer uma_consumer_allocator)
    run("run ${program}" "${build}/${program}")
    message("${step_output}")
    if(NOT step_output MATCHES "^OK: ")
      message(FATAL_ERROR "${program} did not report OK")
    endif()
  endforeach()
endfunction()
