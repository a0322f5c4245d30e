# tests/apps: the shipped configs are read from the source tree.
target_compile_definitions(${exe} PRIVATE ZT_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
