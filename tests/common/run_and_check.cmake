# Runs a test's command for ctest and checks its exit status as well as its output, which
# PASS_REGULAR_EXPRESSION alone cannot do (it ignores the exit status, so a crash after the
# expected line would pass; and SKIP_REGULAR_EXPRESSION skips whatever the status).
#
#   cmake [-DEXIT_CODE=<n>] [-DEXPECT=<regex>] [-DGTEST=ON] [-DNOT_WRITTEN=<paths>]
#         -P run_and_check.cmake -- <command>...
#
#   EXIT_CODE  the exit status the command must end with (default 0);
#   EXPECT     a regular expression its output (stdout and stderr together) must match;
#   GTEST      the command runs GoogleTest tests: when they passed with every test skipped
#              (no GPU, say), prints "ALL SKIPPED:" for the entry's SKIP_REGULAR_EXPRESSION.
#              A failed test fails the entry (exit status), however many others skipped.
#   NOT_WRITTEN  paths ('|' between them), removed before the command runs, that must not
#              exist after it: for a run that must stop before it writes anything.
#   INPUT      a file the command reads as its standard input.
if(NOT DEFINED EXIT_CODE)
  set(EXIT_CODE 0)
endif()

set(cmd)
set(after_dashes FALSE)
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE ${last})
  if(after_dashes)
    if("${CMAKE_ARGV${i}}" MATCHES ";")  # a list separator: would split the argument
      message(FATAL_ERROR "run_and_check.cmake: ';' in argument '${CMAKE_ARGV${i}}'")
    endif()
    list(APPEND cmd "${CMAKE_ARGV${i}}")
  elseif("${CMAKE_ARGV${i}}" STREQUAL "--")
    set(after_dashes TRUE)
  endif()
endforeach()
if(NOT cmd)
  message(FATAL_ERROR "run_and_check.cmake: no command after --")
endif()

string(REPLACE "|" ";" not_written "${NOT_WRITTEN}")
if(not_written)
  file(REMOVE_RECURSE ${not_written})
endif()
set(input)
if(DEFINED INPUT)
  set(input INPUT_FILE ${INPUT})
endif()
execute_process(COMMAND ${cmd} ${input} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
message("${out}")
if(NOT "${rc}" STREQUAL "${EXIT_CODE}")
  message(FATAL_ERROR "exit status ${rc}, expected ${EXIT_CODE}: ${cmd}")
endif()
if(DEFINED EXPECT AND NOT out MATCHES "${EXPECT}")
  message(FATAL_ERROR "the output does not match ${EXPECT}")
endif()
foreach(path IN LISTS not_written)
  if(EXISTS "${path}")
    message(FATAL_ERROR "'${path}' exists: the command should have stopped before writing it")
  endif()
endforeach()
if(GTEST)  # GoogleTest's summary, without colours (mpirun gives ranks a terminal)
  string(ASCII 27 esc)
  string(REGEX REPLACE "${esc}\\[[0-9;]*m" "" plain "${out}")
  if(plain MATCHES "\\[  PASSED  \\] 0 tests" AND plain MATCHES "\\[  SKIPPED \\] [1-9]")
    message("ALL SKIPPED: every test skipped (their reasons are above)")
  endif()
endif()
