# The packaging test: installs uma's build tree to a scratch prefix, configures and builds
# examples/consumer against it with find_package(uma), and runs it. Needs no network: uma comes
# from the build tree, CAF, Threads and CUDA from the system.
#
#   cmake -DUMA_BUILD_DIR=... -DCONSUMER_SOURCE_DIR=... -DWORK_DIR=... -DPYTHON_DIR=...
#         [-DGENERATOR=...] [-DCXX_COMPILER=...] [-DBUILD_TYPE=...]
#         [-DSANITIZE=address,undefined]
#         -P tests/install_consumer.cmake
cmake_minimum_required(VERSION 3.25)

foreach(required UMA_BUILD_DIR CONSUMER_SOURCE_DIR WORK_DIR PYTHON_DIR)
  if(NOT ${required})
    message(FATAL_ERROR "install_consumer.cmake: -D${required}=... is required")
  endif()
endforeach()

include("${CMAKE_CURRENT_LIST_DIR}/packaging_steps.cmake")

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

check_no_empty_folder("${prefix}")
# The Python packages, and uma_c's note of where libuma_c.so went (cmake/uma_python_install.cmake).
# PYTHON_DIR is UMA_PYTHON_INSTALL_DIR, relative to the prefix or absolute.
if(NOT IS_ABSOLUTE "${PYTHON_DIR}")
  set(PYTHON_DIR "${prefix}/${PYTHON_DIR}")
endif()
foreach(file uma_c/__init__.py uma_c/_installed.py uma_torch/__init__.py uma_cupy/__init__.py)
  if(NOT EXISTS "${PYTHON_DIR}/${file}")
    message(FATAL_ERROR "${file} is not installed under ${PYTHON_DIR}")
  endif()
endforeach()

build_consumer("${CONSUMER_SOURCE_DIR}" "${build}" "-DCMAKE_PREFIX_PATH=${prefix}")
# A program that links only uma::allocator needs neither the remote wire (gRPC, protobuf) nor
# OpenSSL, nor CAF's io or OpenSSL module (no uma library uses them since the wire moved to
# gRPC): the libraries it asks the loader for are read from its dynamic section. Both consumers
# link with --no-as-needed, so the dynamic section lists what the link interface brings; the
# umbrella's must list gRPC (uma::remote's wire; else this check could not see it).
find_program(READELF readelf REQUIRED)
run("readelf uma_consumer" "${READELF}" -d "${build}/uma_consumer")
if(NOT step_output MATCHES "Shared library: \\[libgrpc\\+\\+")
  message(FATAL_ERROR "uma_consumer (uma::uma) does not need libgrpc++: ${step_output}")
endif()
run("readelf uma_consumer_allocator" "${READELF}" -d "${build}/uma_consumer_allocator")
string(REGEX MATCHALL "Shared library: \\[[^]]+\\]" needed "${step_output}")
if(NOT needed MATCHES "libcaf_core")
  message(FATAL_ERROR "readelf found no libcaf_core in uma_consumer_allocator: ${step_output}")
endif()
foreach(forbidden libcaf_io libcaf_openssl libgrpc libprotobuf libssl libcrypto)
  if(needed MATCHES "${forbidden}")
    message(FATAL_ERROR "uma_consumer_allocator (uma::allocator only) needs ${forbidden}: ${needed}")
  endif()
endforeach()
message("OK: uma::allocator alone needs no CAF io, gRPC or OpenSSL (${needed})")
