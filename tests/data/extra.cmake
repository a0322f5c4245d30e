# tests/data: the shipped configs are read from the source tree.
target_compile_definitions(${exe} PRIVATE ZT_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
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
