# Lessons 8 and 15 under mpirun -np 2 (labels mpi and zero): tests/zero/mpi/*.cpp plus the
# lesson helpers, one entry per suite. Named after its suite, so `ctest -R zero.Lesson08`
# runs it with the thread-rank cases.
file(GLOB ZT_ZERO_MPI_TESTS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/zero/mpi/*.cpp)
add_executable(zt_test_zero_mpi ${ZT_ZERO_MPI_TESTS} ${CMAKE_CURRENT_SOURCE_DIR}/zero/lesson_util.cpp
                                ${CMAKE_CURRENT_SOURCE_DIR}/zero/lesson08_loop.cpp
                                ${CMAKE_CURRENT_SOURCE_DIR}/zero/checkpoint_util.cpp
                                ${CMAKE_CURRENT_SOURCE_DIR}/common/test_util.cpp)
target_include_directories(zt_test_zero_mpi PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
target_compile_options(zt_test_zero_mpi PRIVATE ${ZT_WARNINGS})
target_link_libraries(zt_test_zero_mpi PRIVATE zt_zero GTest::gtest GTest::gtest_main)
add_dependencies(zt_test_zero zt_test_zero_mpi)

zt_mpirun_gtest(zero.Lesson08EquivalenceMpi.np2 2 zt_test_zero_mpi LABELS mpi zero TIMEOUT 300
                FILTER "Lesson08EquivalenceMpi.*")
zt_mpirun_gtest(zero.Lesson15CheckpointMpi.np2 2 zt_test_zero_mpi LABELS mpi zero TIMEOUT 120
                FILTER "Lesson15CheckpointMpi.*")
