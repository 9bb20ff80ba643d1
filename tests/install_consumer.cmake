# The packaging test: installs uma's build tree to a scratch prefix, configures and builds
# examples/consumer against it with find_package(uma), and runs it. Needs no network: uma comes
# from the build tree, CAF, Threads and CUDA from the system.
#
#   cmake -DUMA_BUILD_DIR=... -DCONSUMER_SOURCE_DIR=... -DWORK_DIR=... [-DGENERATOR=...]
#         [-DCXX_COMPILER=...] [-DBUILD_TYPE=...] [-DSANITIZE=address,undefined]
#         -P tests/install_consumer.cmake
cmake_minimum_required(VERSION 3.25)

foreach(required UMA_BUILD_DIR CONSUMER_SOURCE_DIR WORK_DIR)
  if(NOT ${required})
    message(FATAL_ERROR "install_consumer.cmake: -D${required}=... is required")
  endif()
endforeach()

# run(<step> <command...>): runs a step, stops with its output when it fails; the output is left
# in `step_output`.
function(run step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${step} failed (${rc}):\n${out}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

set(prefix "${WORK_DIR}/prefix")
set(build "${WORK_DIR}/build")
file(REMOVE_RECURSE "${WORK_DIR}")

run("cmake --install" "${CMAKE_COMMAND}" --install "${UMA_BUILD_DIR}" --prefix "${prefix}")

# What a consumer relies on: the package files, FindCAF next to them, headers in their folders.
file(GLOB_RECURSE config_files "${prefix}/*/umaConfig.cmake")
list(LENGTH config_files found)
if(NOT found EQUAL 1)
  message(FATAL_ERROR "expected one umaConfig.cmake under ${prefix}, found: ${config_files}")
endif()
get_filename_component(config_dir "${config_files}" DIRECTORY)
foreach(file umaConfigVersion.cmake umaTargets.cmake FindCAF.cmake)
  if(NOT EXISTS "${config_dir}/${file}")
    message(FATAL_ERROR "${file} is not installed next to umaConfig.cmake (${config_dir})")
  endif()
endforeach()
foreach(header sys/backend.hpp sys/log.hpp memory/managed_ref.hpp messages/interface.hpp
               actors/client.hpp)
  if(NOT EXISTS "${prefix}/include/uma/${header}")
    message(FATAL_ERROR "header ${header} is not installed under ${prefix}/include/uma")
  endif()
endforeach()

set(configure_args -S "${CONSUMER_SOURCE_DIR}" -B "${build}" "-DCMAKE_PREFIX_PATH=${prefix}"
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
if(GENERATOR)
  list(APPEND configure_args -G "${GENERATOR}")
endif()
if(CXX_COMPILER)
  list(APPEND configure_args "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}")
endif()
if(BUILD_TYPE)
  list(APPEND configure_args "-DCMAKE_BUILD_TYPE=${BUILD_TYPE}")
endif()
if(SANITIZE)
  # A sanitized libuma.a needs the sanitizer runtimes in the consumer too.
  string(REPLACE ";" "," SANITIZE "${SANITIZE}")
  list(APPEND configure_args "-DCMAKE_CXX_FLAGS=-fsanitize=${SANITIZE}"
       "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=${SANITIZE}")
endif()
run("configure examples/consumer" "${CMAKE_COMMAND}" ${configure_args})
run("build examples/consumer" "${CMAKE_COMMAND}" --build "${build}")
run("run uma_consumer_sys" "${build}/uma_consumer_sys")
message("${step_output}")
if(NOT step_output MATCHES "^OK: uma::sys without CAF")
  message(FATAL_ERROR "uma_consumer_sys did not report OK")
endif()
run("run uma_consumer" "${build}/uma_consumer")
message("${step_output}")
if(NOT step_output MATCHES "^OK: ")
  message(FATAL_ERROR "uma_consumer did not report OK")
endif()
run("run uma_consumer_allocator" "${build}/uma_consumer_allocator")
message("${step_output}")
if(NOT step_output MATCHES "^OK: uma::allocator ")
  message(FATAL_ERROR "uma_consumer_allocator did not report OK")
endif()
# A program that links only uma::allocator needs neither CAF's io nor its OpenSSL module (nor
# OpenSSL itself): the libraries it asks the loader for are read from its dynamic section.
# Both consumers link with --no-as-needed, so the dynamic section lists what the link interface
# brings; the umbrella's must list CAF's io (else this check could not see it).
find_program(READELF readelf REQUIRED)
run("readelf uma_consumer" "${READELF}" -d "${build}/uma_consumer")
if(NOT step_output MATCHES "Shared library: \\[libcaf_io")
  message(FATAL_ERROR "uma_consumer (uma::uma) does not need libcaf_io: ${step_output}")
endif()
run("readelf uma_consumer_allocator" "${READELF}" -d "${build}/uma_consumer_allocator")
string(REGEX MATCHALL "Shared library: \\[[^]]+\\]" needed "${step_output}")
if(NOT needed MATCHES "libcaf_core")
  message(FATAL_ERROR "readelf found no libcaf_core in uma_consumer_allocator: ${step_output}")
endif()
foreach(forbidden libcaf_io libcaf_openssl libssl libcrypto)
  if(needed MATCHES "${forbidden}")
    message(FATAL_ERROR "uma_consumer_allocator (uma::allocator only) needs ${forbidden}: ${needed}")
  endif()
endforeach()
message("OK: uma::allocator alone needs no CAF io or OpenSSL (${needed})")
