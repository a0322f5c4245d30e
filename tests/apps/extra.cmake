# The recipe test reads the shipped configs/vqtok_tiny.yaml.
target_compile_definitions(${exe} PRIVATE ZT_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
