# A header's weight: preprocesses SOURCE with the build's own compile command for it (from
# compile_commands.json, so the include flags, the standard and the build type's flags are those
# of the build), adding `-E -H`, and fails when the output has more than MAX_LINES lines (`c++ -E
# | wc -l`: line markers included, as issue 38 counted) or more than MAX_UMA_HEADERS of uma's
# headers were opened (each file -H names once under a /uma/<layer>/ path).
#
#   cmake -DCOMPILE_COMMANDS=.../compile_commands.json -DSOURCE=... -DMAX_LINES=N
#         -DMAX_UMA_HEADERS=N -P tests/header_weight.cmake
cmake_minimum_required(VERSION 3.25)

foreach(required COMPILE_COMMANDS SOURCE MAX_LINES MAX_UMA_HEADERS)
  if(NOT DEFINED ${required})
    message(FATAL_ERROR "header_weight.cmake: -D${required}=... is required")
  endif()
endforeach()

file(READ "${COMPILE_COMMANDS}" commands)
string(JSON count LENGTH "${commands}")
math(EXPR last "${count} - 1")
set(command "")
foreach(i RANGE ${last})
  string(JSON file GET "${commands}" ${i} file)
  if(file STREQUAL SOURCE)
    string(JSON command GET "${commands}" ${i} command)
    string(JSON directory GET "${commands}" ${i} directory)
    break()
  endif()
endforeach()
if(command STREQUAL "")
  message(FATAL_ERROR "${SOURCE} is not in ${COMPILE_COMMANDS}")
endif()

# The compile command, minus its output and -c, plus -E -H.
separate_arguments(args UNIX_COMMAND "${command}")
set(preprocess "")
set(skip_next FALSE)
foreach(arg IN LISTS args)
  if(skip_next)
    set(skip_next FALSE)
  elseif(arg STREQUAL "-o")
    set(skip_next TRUE)
  elseif(NOT arg STREQUAL "-c")
    list(APPEND preprocess "${arg}")
  endif()
endforeach()
execute_process(COMMAND ${preprocess} -E -H WORKING_DIRECTORY "${directory}"
                OUTPUT_VARIABLE output ERROR_VARIABLE tree RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "preprocessing ${SOURCE} failed (${status}):\n${tree}")
endif()

# Lines: the newlines of the output.
string(LENGTH "${output}" with)
string(REPLACE "\n" "" output "${output}")
string(LENGTH "${output}" without)
math(EXPR lines "${with} - ${without}")

# Headers: -H writes one line per header opened, dots for its depth, then its path.
string(REPLACE "\n" ";" tree "${tree}")
set(uma_headers "")
set(caf_headers "")
foreach(line IN LISTS tree)
  if(line MATCHES "^\\.+ (.*/uma/(actors|memory|messages|sys)/.*)$")
    list(APPEND uma_headers "${CMAKE_MATCH_1}")
  elseif(line MATCHES "^\\.+ (.*/caf/.*)$")
    list(APPEND caf_headers "${CMAKE_MATCH_1}")
  endif()
endforeach()
list(REMOVE_DUPLICATES uma_headers)
list(REMOVE_DUPLICATES caf_headers)
list(LENGTH uma_headers uma_count)
list(LENGTH caf_headers caf_count)

get_filename_component(name "${SOURCE}" NAME)
message("${name}: ${lines} preprocessed lines (at most ${MAX_LINES}), ${uma_count} uma headers "
        "(at most ${MAX_UMA_HEADERS}), ${caf_count} CAF headers")
if(lines GREATER MAX_LINES OR uma_count GREATER MAX_UMA_HEADERS)
  list(JOIN uma_headers "\n  " listed)
  message(FATAL_ERROR "${name} is over its bounds; uma headers:\n  ${listed}")
endif()
