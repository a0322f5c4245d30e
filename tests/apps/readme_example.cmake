# ctest script (cmake -P): the README's embedding example is apps/examples/embed/main.cpp,
# character for character. The README holds it in the ```cpp block right after the line
#   <!-- embed example: apps/examples/embed/main.cpp -->
# Arguments: -DSOURCE_DIR= ; with -DUPDATE=ON the README block is rewritten from the file.
set(marker "<!-- embed example: apps/examples/embed/main.cpp -->")
file(READ ${SOURCE_DIR}/README.md readme)
file(READ ${SOURCE_DIR}/apps/examples/embed/main.cpp code)
string(FIND "${readme}" "${marker}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "README.md lacks the line ${marker} before the embedding example")
endif()
string(SUBSTRING "${readme}" ${at} -1 rest)
string(FIND "${rest}" "```cpp\n" open)
if(open EQUAL -1)
  message(FATAL_ERROR "README.md: no ```cpp block after ${marker}")
endif()
math(EXPR body_at "${open} + 7")
string(SUBSTRING "${rest}" ${body_at} -1 body)
string(FIND "${body}" "```\n" close)
if(close EQUAL -1)
  message(FATAL_ERROR "README.md: the ```cpp block after ${marker} is not closed")
endif()
string(SUBSTRING "${body}" 0 ${close} block)

if(block STREQUAL code)
  return()
endif()
if(UPDATE)
  math(EXPR head_len "${at} + ${body_at}")
  string(SUBSTRING "${readme}" 0 ${head_len} head)
  string(SUBSTRING "${body}" ${close} -1 tail)
  file(WRITE ${SOURCE_DIR}/README.md "${head}${code}${tail}")
  message(STATUS "README.md: embedding example updated from apps/examples/embed/main.cpp")
  return()
endif()
message(FATAL_ERROR "README.md's embedding example differs from apps/examples/embed/main.cpp; "
                    "update it with: cmake -DSOURCE_DIR=. -DUPDATE=ON -P "
                    "tests/apps/readme_example.cmake")
