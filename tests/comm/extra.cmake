# mpirun variants of the communicator tests (labels mpi and comm): tests/comm/mpi/*.cpp
# build one executable that ctest runs under mpirun with 2 and 3 processes. Without mpirun
# the tests are registered anyway and report themselves skipped.
file(GLOB ZT_COMM_MPI_TESTS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/comm/mpi/*.cpp)
add_executable(zt_test_comm_mpi ${ZT_COMM_MPI_TESTS} ${CMAKE_CURRENT_SOURCE_DIR}/common/test_util.cpp)
target_include_directories(zt_test_comm_mpi PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
target_compile_options(zt_test_comm_mpi PRIVATE ${ZT_WARNINGS})
target_link_libraries(zt_test_comm_mpi PRIVATE zt_comm GTest::gtest GTest::gtest_main)
add_dependencies(zt_test_comm zt_test_comm_mpi)  # building the comm tests builds both

find_program(ZT_MPIRUN NAMES mpirun mpiexec HINTS ${MPIEXEC_EXECUTABLE})
foreach(np 2 3)
  set(name comm.mpi.np${np})
  if(ZT_MPIRUN)
    add_test(NAME ${name}
             COMMAND ${ZT_MPIRUN} --allow-run-as-root --oversubscribe -np ${np}
                     $<TARGET_FILE:zt_test_comm_mpi>)
    set_tests_properties(${name} PROPERTIES LABELS "mpi;comm" TIMEOUT 180 PROCESSORS ${np}
      ENVIRONMENT "${ZT_MPI_TEST_ENV}")
  else()
    add_test(NAME ${name} COMMAND ${CMAKE_COMMAND} -E echo
             "SKIPPED: mpirun not found; install OpenMPI to run the MPI communicator tests")
    set_tests_properties(${name} PROPERTIES LABELS "mpi;comm" SKIP_REGULAR_EXPRESSION "SKIPPED")
  endif()
endforeach()

# MpiComm where MPI provides only MPI_THREAD_SERIALIZED (tests/comm/mpi_serialized): the file
# takes MPI's place for MPI_Init_thread and some calls, so it is an executable of its own.
add_executable(zt_test_comm_mpi_serialized
               ${CMAKE_CURRENT_SOURCE_DIR}/comm/mpi_serialized/test_mpi_serialized.cpp)
target_include_directories(zt_test_comm_mpi_serialized PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
target_compile_options(zt_test_comm_mpi_serialized PRIVATE ${ZT_WARNINGS})
target_link_libraries(zt_test_comm_mpi_serialized PRIVATE zt_comm GTest::gtest GTest::gtest_main)
add_dependencies(zt_test_comm zt_test_comm_mpi_serialized)
if(ZT_MPIRUN)
  add_test(NAME comm.mpi.serialized
           COMMAND ${ZT_MPIRUN} --allow-run-as-root --oversubscribe -np 2
                   $<TARGET_FILE:zt_test_comm_mpi_serialized>)
  set_tests_properties(comm.mpi.serialized PROPERTIES LABELS "mpi;comm" TIMEOUT 120 PROCESSORS 2
    ENVIRONMENT "${ZT_MPI_TEST_ENV}")
endif()

# Jobs that must end, not hang, when one rank fails (tests/comm/mpi_exit/<name>.cpp, run
# under mpirun -np 2): the test passes when the job exits 1 and its output matches `expect`.
# `timeout_ms` is the communicator's deadline ($ZT_COMM_TIMEOUT_MS).
function(zt_mpi_exit_test name expect timeout_ms)
  add_executable(zt_test_comm_${name} ${CMAKE_CURRENT_SOURCE_DIR}/comm/mpi_exit/${name}.cpp)
  target_compile_options(zt_test_comm_${name} PRIVATE ${ZT_WARNINGS})
  target_link_libraries(zt_test_comm_${name} PRIVATE zt_comm)
  add_dependencies(zt_test_comm zt_test_comm_${name})
  if(ZT_MPIRUN)
    add_test(NAME comm.mpi.${name}
             COMMAND ${CMAKE_COMMAND} -DEXIT_CODE=1 "-DEXPECT=${expect}" -P ${ZT_RUN_AND_CHECK}
                     -- ${ZT_MPIRUN} --allow-run-as-root --oversubscribe -np 2
                     $<TARGET_FILE:zt_test_comm_${name}>)
    set_tests_properties(comm.mpi.${name} PROPERTIES LABELS "mpi;comm" TIMEOUT 60 PROCESSORS 2
      ENVIRONMENT "${ZT_MPI_TEST_ENV};ZT_COMM_TIMEOUT_MS=${timeout_ms}")
  endif()
endfunction()

# A rank that returns while the others call a collective ends the job at once, naming it
# (each rank's launch() ends with a checked barrier), where the others waited for the
# communicator's timeout (10 minutes here, past the test's limit).
zt_mpi_exit_test(early_return
  "rank 1 called barrier .the end of the rank's function: it returned." 600000)

# A rank that fails between two communicators (it waits in MPI_Finalize): the others' next
# communicator is made under the deadline, whose end ends the job naming it, where
# MPI_Comm_dup waited for ever.
zt_mpi_exit_test(late_communicator
  "rank 0 aborts the MPI job: it failed at start-up: .*MPI_Comm_idup.* timed out after 3000 ms"
  3000)

# NcclComm (CUDA builds only): one process, and two; labels mpi, cuda and comm. Without a
# GPU every test skips: an entry reports itself skipped only when all of them did and the
# binary passed (zt_mpirun_gtest), so a failing test fails it.
if(ZT_CUDA)
  file(GLOB ZT_COMM_NCCL_TESTS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/comm/nccl/*.cpp)
  add_executable(zt_test_comm_nccl ${ZT_COMM_NCCL_TESTS}
                                   ${CMAKE_CURRENT_SOURCE_DIR}/common/test_util.cpp)
  target_include_directories(zt_test_comm_nccl PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_compile_options(zt_test_comm_nccl PRIVATE ${ZT_WARNINGS})
  target_link_libraries(zt_test_comm_nccl PRIVATE zt_zero zt_emu3 GTest::gtest GTest::gtest_main)
  add_dependencies(zt_test_comm zt_test_comm_nccl)
  zt_mpirun_gtest(comm.nccl.np1 1 zt_test_comm_nccl LABELS mpi cuda comm TIMEOUT 180)
  # Two ranks: NCCL's collectives themselves (the tests skip, saying why, without two GPUs).
  zt_mpirun_gtest(comm.nccl.np2 2 zt_test_comm_nccl LABELS mpi cuda comm TIMEOUT 180)
endif()

# The launcher's job size against MPI's (test_launcher_env.cpp): each case initializes MPI
# as a one-process world, so it carries the label mpi and the environment mpirun's tests get.
zt_test_properties(zt_test_comm "^comm\\.LauncherEnv\\." LABELS comm mpi
  ENVIRONMENT "OMP_WAIT_POLICY=passive;${ZT_MPI_TEST_ENV}")
