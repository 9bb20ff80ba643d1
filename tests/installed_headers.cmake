# The public surface test: installs uma's build tree to a scratch prefix and checks that
#  - the installed headers are exactly cmake/uma_public_headers.cmake's list (plus uma.h), and no
#    installed path contains /detail/;
#  - every installed header compiles on its own, twice included, in a project that finds uma
#    with find_package: a public header that includes a header the install left out fails here.
#
#   cmake -DUMA_BUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... [-DGENERATOR=...]
#         [-DCXX_COMPILER=...] [-DBUILD_TYPE=...] -P tests/installed_headers.cmake
cmake_minimum_required(VERSION 3.25)

foreach(required UMA_BUILD_DIR SOURCE_DIR WORK_DIR)
  if(NOT ${required})
    message(FATAL_ERROR "installed_headers.cmake: -D${required}=... is required")
  endif()
endforeach()

include("${CMAKE_CURRENT_LIST_DIR}/packaging_steps.cmake")
include("${SOURCE_DIR}/cmake/uma_public_headers.cmake")

set(prefix "${WORK_DIR}/prefix")
set(project "${WORK_DIR}/project")
file(REMOVE_RECURSE "${WORK_DIR}")
run("cmake --install" "${CMAKE_COMMAND}" --install "${UMA_BUILD_DIR}" --prefix "${prefix}")

file(GLOB_RECURSE installed RELATIVE "${prefix}/include/uma" "${prefix}/include/uma/*")
set(expected ${UMA_PUBLIC_HEADERS} c/uma.h)
list(SORT installed)
list(SORT expected)
if(NOT installed STREQUAL expected)
  set(extra ${installed})
  list(REMOVE_ITEM extra ${expected})
  set(missing ${expected})
  list(REMOVE_ITEM missing ${installed})
  message(FATAL_ERROR "installed headers differ from cmake/uma_public_headers.cmake: "
                      "not listed: [${extra}]; not installed: [${missing}]")
endif()
file(GLOB_RECURSE everything RELATIVE "${prefix}" "${prefix}/*")
foreach(path ${everything})
  if(path MATCHES "/detail/")
    message(FATAL_ERROR "a detail/ file is installed: ${path}")
  endif()
endforeach()
list(LENGTH installed count)
message("installed headers: ${count}, none under detail/")

# One translation unit per header, each including it twice (the include guard) and nothing else.
file(MAKE_DIRECTORY "${project}")
set(sources "")
foreach(header ${installed})
  string(MAKE_C_IDENTIFIER "${header}" name)
  file(WRITE "${project}/${name}.cpp" "#include <uma/${header}>\n#include <uma/${header}>\n")
  list(APPEND sources "${name}.cpp")
endforeach()
list(JOIN sources " " sources)
file(WRITE "${project}/CMakeLists.txt" "cmake_minimum_required(VERSION 3.25)
project(uma_installed_headers LANGUAGES CXX)
find_package(uma 0.1 REQUIRED)
add_compile_options(-Wall -Wextra -Wshadow -Werror)
add_library(headers OBJECT ${sources})
target_link_libraries(headers PRIVATE uma::uma uma::c)
")
configure_project("the header project" "${project}" "${WORK_DIR}/build"
                  "-DCMAKE_PREFIX_PATH=${prefix}")
run("compile each installed header alone" "${CMAKE_COMMAND}" --build "${WORK_DIR}/build" -j 2)
message("OK: ${count} installed headers, each compiles on its own")
