# Install rules: the public libraries (zt::<folder>, zt::zt), their headers (each folder
# installs its own with zt_install_headers), the apps, the example configs, and a
# relocatable CMake package so that another project can
#   find_package(zt 0.1 REQUIRED)
#   target_link_libraries(my_app PRIVATE zt::zt)
# The package finds zt's dependencies itself (cmake/zt-config.cmake.in).
include(CMakePackageConfigHelpers)
set(ZT_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/zt)

install(TARGETS ${ZT_PUBLIC_LIBRARIES} zt
        EXPORT zt-targets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT zt-targets NAMESPACE zt:: DESTINATION ${ZT_INSTALL_CMAKEDIR})

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/zt-config.cmake.in
                              ${PROJECT_BINARY_DIR}/zt-config.cmake
                              INSTALL_DESTINATION ${ZT_INSTALL_CMAKEDIR})
# 0.x: a minor version may change the API, so 0.1 accepts 0.1.* only.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/zt-config-version.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/zt-config.cmake ${PROJECT_BINARY_DIR}/zt-config-version.cmake
              ${PROJECT_SOURCE_DIR}/cmake/zt-cuda-libs.cmake
        DESTINATION ${ZT_INSTALL_CMAKEDIR})

foreach(app vqtok vqgpt zt-bench)
  if(TARGET ${app})
    install(TARGETS ${app} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endforeach()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/configs/ DESTINATION ${CMAKE_INSTALL_DATADIR}/zt/configs
        FILES_MATCHING PATTERN "*.yaml" PATTERN "*.json")
