# ctest script (cmake -P): configures and builds a project outside zt's build, with the
# generator, compiler, launcher and build type of zt's own build. Arguments:
#   -DSOURCE_DIR= -DBINARY_DIR= -DGENERATOR= -DMAKE_PROGRAM= -DCXX_COMPILER= -DLAUNCHER=
#   -DBUILD_TYPE= and either -DPREFIX= (find_package(zt) in PREFIX) or -DZT_SOURCE_DIR=
#   (add_subdirectory; with CONFIGURE_ONLY=ON only configures, checking that zt's tests
#   and apps stay out).
# Optional: -DCUDA_ROOT= (the toolkit a CUDA build of zt needs), -DSANITIZE= (ZT_SANITIZE).
file(REMOVE_RECURSE ${BINARY_DIR})
set(args -S ${SOURCE_DIR} -B ${BINARY_DIR} -G ${GENERATOR} -DCMAKE_BUILD_TYPE=${BUILD_TYPE}
         -DCMAKE_CXX_COMPILER=${CXX_COMPILER})
if(MAKE_PROGRAM)
  list(APPEND args -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM})
endif()
if(LAUNCHER)
  list(APPEND args -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()
if(PREFIX)
  list(APPEND args -DCMAKE_PREFIX_PATH=${PREFIX})
endif()
if(ZT_SOURCE_DIR)  # configure-only: CUDA detection would add time, not coverage
  list(APPEND args -DZT_SOURCE_DIR=${ZT_SOURCE_DIR} -DZT_CUDA=OFF)
endif()
if(CUDA_ROOT)
  list(APPEND args -DCUDAToolkit_ROOT=${CUDA_ROOT})
endif()
if(SANITIZE)
  list(APPEND args "-DCMAKE_CXX_FLAGS=-fsanitize=${SANITIZE}"
       "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=${SANITIZE}")
endif()

execute_process(COMMAND ${CMAKE_COMMAND} ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring ${SOURCE_DIR} failed:\n${out}")
endif()

if(CONFIGURE_ONLY)
  # zt below another project: its library folders are configured, its tests and apps
  # (each folder gets a build directory when added) are not.
  foreach(expected core nn zero data)
    if(NOT IS_DIRECTORY ${BINARY_DIR}/zt/${expected})
      message(FATAL_ERROR "zt as a subproject did not configure ${expected}/")
    endif()
  endforeach()
  # The models (apps/<app>/model) are libraries and configure; the apps do not.
  foreach(expected apps/models/emu3 apps/models/gpt)
    if(NOT IS_DIRECTORY ${BINARY_DIR}/zt/${expected})
      message(FATAL_ERROR "zt as a subproject did not configure ${expected}/")
    endif()
  endforeach()
  foreach(unexpected tests apps/CMakeFiles/vqtok.dir apps/CMakeFiles/zt_vqtok_app.dir)
    if(IS_DIRECTORY ${BINARY_DIR}/zt/${unexpected})
      message(FATAL_ERROR "zt as a subproject configures ${unexpected}; tests and apps must "
                          "be off unless asked for (ZT_TESTS, ZT_APPS)")
    endif()
  endforeach()
  return()
endif()

execute_process(COMMAND ${CMAKE_COMMAND} --build ${BINARY_DIR} RESULT_VARIABLE rc
                OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building ${SOURCE_DIR} against the installed zt failed:\n${out}")
endif()
