# The layer rules that include roots alone cannot enforce (docs/design.md, "Layers"):
#   - sys/ and memory/ include no CAF header (only messages/ and actors/ may);
#   - only sys/cuda_* includes CUDA or CUPTI headers;
#   - uma's own headers are included as <uma/LAYER/...>, never by a quoted path.
# Upward includes (memory/ including messages/, ...) already fail to compile: each layer's target
# sees only its own include root and those below it. Run before every build of the library:
#
#   cmake -DSOURCE_DIR=<uma's source tree> -P cmake/check_layers.cmake
cmake_minimum_required(VERSION 3.25)
if(NOT SOURCE_DIR)
  message(FATAL_ERROR "check_layers.cmake: -DSOURCE_DIR=... is required")
endif()

set(violations "")
foreach(layer sys memory messages actors)
  file(GLOB_RECURSE files RELATIVE "${SOURCE_DIR}" "${SOURCE_DIR}/${layer}/*.hpp"
       "${SOURCE_DIR}/${layer}/*.cpp" "${SOURCE_DIR}/${layer}/*.h")
  foreach(file IN LISTS files)
    file(STRINGS "${SOURCE_DIR}/${file}" includes REGEX "^[ \t]*#[ \t]*include")
    foreach(line IN LISTS includes)
      if(layer MATCHES "^(sys|memory)$" AND line MATCHES "[<\"]caf/")
        string(APPEND violations "\n  ${file}: ${line}  (no CAF in ${layer}/)")
      endif()
      if(NOT file MATCHES "^sys/cuda_" AND line MATCHES "[<\"](cuda|cupti|cuda_runtime|driver_types)[_./a-z]*")
        string(APPEND violations "\n  ${file}: ${line}  (CUDA headers only in sys/cuda_*)")
      endif()
      if(line MATCHES "\"(sys|memory|messages|actors)/")
        string(APPEND violations "\n  ${file}: ${line}  (include uma's headers as <uma/...>)")
      endif()
    endforeach()
  endforeach()
endforeach()
if(violations)
  message(FATAL_ERROR "uma: layer rules broken:${violations}")
endif()
