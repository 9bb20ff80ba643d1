# Runs a command and checks its exit status and, optionally, what it wrote to stderr: for CLI
# tests that specify an exit code rather than just "failed".
#
#   cmake "-DCOMMAND=prog|arg|arg" -DEXPECT_EXIT=2 "-DEXPECT_STDERR=regex" -P expect_exit.cmake
# (`|` separates the arguments: a `;` would be split by add_test.)
cmake_minimum_required(VERSION 3.25)

string(REPLACE "|" ";" command "${COMMAND}")
execute_process(COMMAND ${command} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc STREQUAL EXPECT_EXIT)
  message(FATAL_ERROR "'${command}' exited ${rc}, expected ${EXPECT_EXIT}\n"
                      "stdout:\n${out}\nstderr:\n${err}")
endif()
if(DEFINED EXPECT_STDERR AND NOT err MATCHES "${EXPECT_STDERR}")
  message(FATAL_ERROR "stderr of '${command}' lacks '${EXPECT_STDERR}':\n${err}")
endif()
message("exit ${rc} as expected; stderr:\n${err}")
