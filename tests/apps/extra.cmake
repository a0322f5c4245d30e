# tests/apps: the fault-injection test runs the vqtok binary (and mpirun when found).
target_compile_definitions(${exe} PRIVATE ZT_VQTOK_BIN="$<TARGET_FILE:vqtok>")
add_dependencies(${exe} vqtok)
find_program(ZT_MPIRUN NAMES mpirun mpiexec HINTS ${MPIEXEC_EXECUTABLE})
if(ZT_MPIRUN)
  target_compile_definitions(${exe} PRIVATE ZT_MPIRUN="${ZT_MPIRUN}")
endif()

# Ranks given different --set options under mpirun stop at start-up naming the key (and
# write nothing), instead of training silently or failing inside a collective.
if(ZT_MPIRUN)
  set(_cfg --config ${PROJECT_SOURCE_DIR}/configs/vqtok_tiny.yaml
           --set output_dir=${CMAKE_BINARY_DIR}/tests/apps_mpi_mismatch)
  add_test(NAME apps.mpi.config_mismatch
           COMMAND ${ZT_MPIRUN} --allow-run-as-root --oversubscribe
                   -np 1 $<TARGET_FILE:vqtok> train ${_cfg} --set train.lr=1e-3 :
                   -np 1 $<TARGET_FILE:vqtok> train ${_cfg} --set train.lr=2e-3)
  set_tests_properties(apps.mpi.config_mismatch PROPERTIES LABELS "mpi;apps" TIMEOUT 60
    PROCESSORS 2
    PASS_REGULAR_EXPRESSION "'train.lr' is 1e-3 on rank 0 but 2e-3 on rank 1"
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
endif()
