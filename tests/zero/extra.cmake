# Lesson 8 under mpirun -np 2 (labels mpi and zero): tests/zero/mpi/*.cpp plus the lesson
# helpers. Named after its suite, so `ctest -R zero.Lesson08` runs it with the thread-rank
# cases.
file(GLOB ZT_ZERO_MPI_TESTS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/zero/mpi/*.cpp)
add_executable(zt_test_zero_mpi ${ZT_ZERO_MPI_TESTS} ${CMAKE_CURRENT_SOURCE_DIR}/zero/lesson_util.cpp
                                ${CMAKE_CURRENT_SOURCE_DIR}/zero/lesson08_loop.cpp
                                ${CMAKE_CURRENT_SOURCE_DIR}/common/test_util.cpp)
target_include_directories(zt_test_zero_mpi PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
target_compile_options(zt_test_zero_mpi PRIVATE ${ZT_WARNINGS})
target_link_libraries(zt_test_zero_mpi PRIVATE zt_zero GTest::gtest GTest::gtest_main)
add_dependencies(zt_test_zero zt_test_zero_mpi)

find_program(ZT_MPIRUN NAMES mpirun mpiexec HINTS ${MPIEXEC_EXECUTABLE})
if(ZT_MPIRUN)
  add_test(NAME zero.Lesson08EquivalenceMpi.np2
           COMMAND ${CMAKE_COMMAND} -DGTEST=ON -P ${ZT_RUN_AND_CHECK} -- ${ZT_MPIRUN}
                   --allow-run-as-root --oversubscribe -np 2 $<TARGET_FILE:zt_test_zero_mpi>)
  set_tests_properties(zero.Lesson08EquivalenceMpi.np2 PROPERTIES LABELS "mpi;zero" TIMEOUT 300 PROCESSORS 2
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1"
    SKIP_REGULAR_EXPRESSION "ALL SKIPPED:")
else()
  add_test(NAME zero.Lesson08EquivalenceMpi.np2 COMMAND ${CMAKE_COMMAND} -E echo
           "SKIPPED: mpirun not found; install OpenMPI to run lesson 8 under MPI")
  set_tests_properties(zero.Lesson08EquivalenceMpi.np2 PROPERTIES LABELS "mpi;zero" SKIP_REGULAR_EXPRESSION "SKIPPED")
endif()
