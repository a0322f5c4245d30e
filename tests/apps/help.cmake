# ctest script (cmake -P): `APP --help` and `APP <subcommand> --help` for every subcommand
# its help lists exit 0 at once with a usage text and run nothing; a misspelled
# subcommand (two letters swapped) and an unknown option exit 2, the first suggesting the
# real subcommand; a --set without '=' or without a value exits 2 too, and a misspelled
# option gets the real one suggested.
# Arguments: -DAPP=/path/to/executable
set(limit 10)  # seconds; a benchmark or training run would take far longer

function(expect_help)
  execute_process(COMMAND ${APP} ${ARGN} --help RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err TIMEOUT ${limit})
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${APP} ${ARGN} --help: exit ${rc} (expected 0)\n${out}${err}")
  endif()
  if(NOT out MATCHES "Usage: ")
    message(FATAL_ERROR "${APP} ${ARGN} --help printed no usage on stdout:\n${out}${err}")
  endif()
  if(out MATCHES "\"bench\"" OR out MATCHES "world size")
    message(FATAL_ERROR "${APP} ${ARGN} --help ran something:\n${out}")
  endif()
  set(help_text "${out}" PARENT_SCOPE)
endfunction()

expect_help()
# The subcommands: the indented first words after "Subcommands:" up to a blank line.
string(FIND "${help_text}" "Subcommands:\n" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${APP} --help lists no subcommands:\n${help_text}")
endif()
string(SUBSTRING "${help_text}" ${at} -1 section)
string(REGEX REPLACE "\n\n.*$" "" section "${section}")
string(REGEX MATCHALL "\n  [a-z][a-z0-9-]*" subs "${section}")
list(TRANSFORM subs STRIP)
list(LENGTH subs n)
if(n EQUAL 0)
  message(FATAL_ERROR "${APP} --help lists no subcommands:\n${help_text}")
endif()
foreach(sub ${subs})
  expect_help(${sub})
endforeach()

list(GET subs 0 first)
string(SUBSTRING ${first} 0 1 a)
string(SUBSTRING ${first} 1 1 b)
string(SUBSTRING ${first} 2 -1 rest)
set(typo "${b}${a}${rest}")
execute_process(COMMAND ${APP} ${typo} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err TIMEOUT ${limit})
if(NOT rc EQUAL 2 OR NOT err MATCHES "did you mean '${first}'")
  message(FATAL_ERROR "${APP} ${typo}: expected exit 2 (a usage error) suggesting '${first}', "
                      "got exit ${rc}:\n${out}${err}")
endif()
# An option the subcommand does not have: a usage error too (2, not one of CLI11's codes).
execute_process(COMMAND ${APP} ${first} --no-such-option RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err TIMEOUT ${limit})
if(NOT rc EQUAL 2 OR NOT err MATCHES "Run with --help")
  message(FATAL_ERROR "${APP} ${first} --no-such-option: expected exit 2 and a pointer to --help, "
                      "got exit ${rc}:\n${out}${err}")
endif()
# A --set without '=' is a mistake on the command line as well, where the subcommand has --set.
execute_process(COMMAND ${APP} ${first} --help OUTPUT_VARIABLE first_help TIMEOUT ${limit})
if(first_help MATCHES "--set")
  execute_process(COMMAND ${APP} ${first} --set train.steps RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT ${limit})
  if(NOT rc EQUAL 2 OR NOT "${out}${err}" MATCHES "expected key.path=value")
    message(FATAL_ERROR "${APP} ${first} --set train.steps: expected exit 2 naming the form "
                        "key.path=value, got exit ${rc}:\n${out}${err}")
  endif()
  execute_process(COMMAND ${APP} ${first} --set train.steps= RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT ${limit})
  if(NOT rc EQUAL 2 OR NOT "${out}${err}" MATCHES "missing value after '='")
    message(FATAL_ERROR "${APP} ${first} --set train.steps=: expected exit 2 naming the missing "
                        "value, got exit ${rc}:\n${out}${err}")
  endif()
endif()
# A misspelled option (its last letter dropped) gets the real one suggested.
string(REGEX MATCHALL "--[a-z][a-z0-9-]+" long_options "${first_help}")
list(REMOVE_ITEM long_options --help)
list(GET long_options 0 option)
string(LENGTH ${option} len)
math(EXPR len "${len} - 1")
string(SUBSTRING ${option} 0 ${len} typo_option)
execute_process(COMMAND ${APP} ${first} ${typo_option} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err TIMEOUT ${limit})
if(NOT rc EQUAL 2 OR NOT "${out}${err}" MATCHES "did you mean '${option}'")
  message(FATAL_ERROR "${APP} ${first} ${typo_option}: expected exit 2 suggesting '${option}', "
                      "got exit ${rc}:\n${out}${err}")
endif()
message(STATUS "${APP}: --help of ${n} subcommands: ${subs}")
