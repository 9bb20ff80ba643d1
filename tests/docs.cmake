# Docs that cannot drift (tools/doc_blocks.py, docs/design.md "Docs that cannot drift"): every
# C++, C, Python and shell block of README.md and docs/*.md is run here or marked as not
# runnable with the reason. Label `docs`. The C++ blocks are generated into ONE translation unit
# (client.hpp costs ~20 s a unit on 2 cores), one CTest per block runs it by its id.
if(NOT Python3_Interpreter_FOUND OR NOT TARGET uma_cli)
  return()
endif()

set(uma_doc_root ${PROJECT_SOURCE_DIR})
set(uma_doc_tool ${PROJECT_SOURCE_DIR}/tools/doc_blocks.py)
file(GLOB uma_doc_files CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/*.md)
list(APPEND uma_doc_files ${PROJECT_SOURCE_DIR}/README.md)
# The block lists below are read at configure time: a changed doc reconfigures.
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${uma_doc_files} ${uma_doc_tool})

add_test(NAME uma_docs.markers COMMAND Python3::Interpreter ${uma_doc_tool} check ${uma_doc_root})
add_test(NAME uma_docs.tables COMMAND Python3::Interpreter ${PROJECT_SOURCE_DIR}/tools/doc_tables.py
                                   check ${uma_doc_root})
add_test(NAME uma_docs.markers_self_test COMMAND Python3::Interpreter ${uma_doc_tool} self-test)
set_tests_properties(uma_docs.markers uma_docs.markers_self_test uma_docs.tables PROPERTIES LABELS docs TIMEOUT 60)

set(uma_doc_cpp ${CMAKE_CURRENT_BINARY_DIR}/doc_blocks.cpp)
add_custom_command(OUTPUT ${uma_doc_cpp}
                   COMMAND Python3::Interpreter ${uma_doc_tool} cpp ${uma_doc_root} ${uma_doc_cpp}
                   DEPENDS ${uma_doc_files} ${uma_doc_tool}
                   COMMENT "Generating the docs' C++ blocks (tools/doc_blocks.py)")
add_executable(uma_doc_blocks ${uma_doc_cpp})
target_link_libraries(uma_doc_blocks PRIVATE uma::uma Boost::headers)

foreach(lang cpp sh python)
  execute_process(COMMAND ${Python3_EXECUTABLE} ${uma_doc_tool} list ${uma_doc_root} ${lang}
                  OUTPUT_VARIABLE uma_doc_ids OUTPUT_STRIP_TRAILING_WHITESPACE
                  COMMAND_ERROR_IS_FATAL ANY)
  string(REPLACE "\n" ";" uma_doc_ids "${uma_doc_ids}")
  foreach(id IN LISTS uma_doc_ids)
    # Each in a scratch folder of its own (blocks write files: op.key, snapshots); the blocks
    # marked `serve` against a uma serve of their own, its sockets in that folder.
    add_test(NAME uma_docs.${lang}.${id}
             COMMAND Python3::Interpreter ${uma_doc_tool} run ${uma_doc_root} ${id}
                     --uma $<TARGET_FILE:uma_cli> --cpp-runner $<TARGET_FILE:uma_doc_blocks>
                     --python-path ${PROJECT_SOURCE_DIR}/python
                     --python-path ${CMAKE_CURRENT_SOURCE_DIR}/python/fakes)
    set_tests_properties(uma_docs.${lang}.${id} PROPERTIES LABELS docs TIMEOUT 120)
    if(lang STREQUAL "python" AND DEFINED uma_python_env)
      # As the Python adapters' tests run (tests/CMakeLists.txt): UMA_LIBRARY, and under ASan
      # its runtime preloaded.
      set_property(TEST uma_docs.${lang}.${id} APPEND PROPERTY ENVIRONMENT "${uma_python_env}")
    elseif(TARGET uma_c)
      set_property(TEST uma_docs.${lang}.${id} APPEND PROPERTY ENVIRONMENT
                   "UMA_LIBRARY=$<TARGET_FILE:uma_c>")
    endif()
  endforeach()
endforeach()
