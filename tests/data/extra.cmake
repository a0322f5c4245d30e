# tests/data: the shipped configs are read from the source tree; stb's encoder writes the
# BMP and TGA files the image tests read (zt_data compiles it).
target_compile_definitions(${exe} PRIVATE ZT_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
target_include_directories(${exe} SYSTEM PRIVATE ${STB_INCLUDE_DIR})
# configs/ sits above zero/ and data/: their libraries must not link it (their sources
# also compile with ZT_BELOW_CONFIGS, which turns any configs/ include into an error).
foreach(lib zt_comm zt_zero zt_data)
  if(TARGET ${lib})
    get_target_property(_zt_deps ${lib} LINK_LIBRARIES)
    if("zt_config" IN_LIST _zt_deps)
      message(FATAL_ERROR "${lib} links zt_config, but configs/ fills zero's and data's "
                          "structs, not the other way round")
    endif()
  endif()
endforeach()

# data.tensorboard.reader: the golden event file of test_tensorboard.cpp read back by
# TensorBoard's own EventAccumulator. Needs a Python with tensorboard
# (-DZT_TENSORBOARD_PYTHON=...); reported as skipped where there is none.
find_program(ZT_TENSORBOARD_PYTHON NAMES python3 python)
if(ZT_TENSORBOARD_PYTHON)
  add_test(NAME data.tensorboard.reader
           COMMAND ${ZT_TENSORBOARD_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/data/tensorboard_reader.py
                   ${CMAKE_CURRENT_SOURCE_DIR}/data/test_tensorboard.cpp)
  set_tests_properties(data.tensorboard.reader PROPERTIES LABELS data SKIP_RETURN_CODE 77
                                                          TIMEOUT 120)
endif()
