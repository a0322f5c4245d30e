# tests/apps: the fault-injection test runs the vqtok binary.
target_compile_definitions(${exe} PRIVATE ZT_VQTOK_BIN="$<TARGET_FILE:vqtok>")
add_dependencies(${exe} vqtok)
