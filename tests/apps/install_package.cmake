# ctest script (cmake -P): installs the build tree into a fresh prefix the way a user
# would (cmake --install BUILD --prefix P), then checks the install:
#  - every header includes only installed headers (no kernel or other private header);
#  - the private folders (core/cpu, core/cuda, zero/comm/cuda) are absent;
#  - the package files name no path of the source or build tree;
#  - the prefix still works after a move (the example is built against the moved one).
# Arguments: -DBUILD_DIR= -DSOURCE_DIR= -DPREFIX=
set(staging ${PREFIX}.staging)
file(REMOVE_RECURSE ${PREFIX} ${staging})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${staging}
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install ${BUILD_DIR} failed (${rc}): build everything first "
                      "(cmake --build ${BUILD_DIR})")
endif()

set(inc ${staging}/include/zt)
foreach(required nn/nn.h zero/zero.h core/tensor.h optim/optim.h data/loader.h
                 lib/cmake/zt/zt-config.cmake lib/cmake/zt/zt-config-version.cmake)
  if(NOT EXISTS ${inc}/${required} AND NOT EXISTS ${staging}/${required})
    message(FATAL_ERROR "the install lacks ${required}")
  endif()
endforeach()
foreach(private core/cpu core/cuda zero/comm/cuda)
  if(EXISTS ${inc}/${private})
    message(FATAL_ERROR "private folder ${private} was installed; it must stay internal")
  endif()
endforeach()

file(GLOB_RECURSE headers RELATIVE ${inc} ${inc}/*.h)
list(LENGTH headers n)
set(broken "")
foreach(h ${headers})
  file(STRINGS ${inc}/${h} lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
  get_filename_component(dir ${h} DIRECTORY)
  foreach(line ${lines})
    string(REGEX REPLACE "^[^\"]*\"([^\"]+)\".*$" "\\1" target "${line}")
    if(NOT EXISTS ${inc}/${target} AND NOT EXISTS ${inc}/${dir}/${target})
      string(APPEND broken "\n  ${h} includes \"${target}\", which is not installed")
    endif()
  endforeach()
endforeach()
if(broken)
  message(FATAL_ERROR "installed headers that cannot compile:${broken}\nInstall the "
                      "included header (zt_install_headers) or stop including it from a public one")
endif()

file(GLOB package_files ${staging}/lib/cmake/zt/*.cmake)
foreach(f ${package_files})
  file(READ ${f} text)
  foreach(tree ${SOURCE_DIR} ${BUILD_DIR})
    string(FIND "${text}" "${tree}" at)
    if(NOT at EQUAL -1)
      message(FATAL_ERROR "${f} names ${tree}: the package is not relocatable")
    endif()
  endforeach()
endforeach()

file(RENAME ${staging} ${PREFIX})
message(STATUS "installed ${n} headers into ${PREFIX} (moved from ${staging})")
