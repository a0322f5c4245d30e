// The launcher's environment against the MPI that zt was built with. A launcher announces
// the job's size to each process (Open MPI's mpirun in OMPI_COMM_WORLD_SIZE; MPICH's and
// Intel's mpiexec and Slurm's srun in PMI_SIZE). Started by the launcher of another MPI, a
// process initializes zt's MPI as a world of one: N such processes were N copies of a
// one-rank run, each training alone and writing the same files. That is an error naming the
// variable and both sizes, raised where the process starts.
//
// Each case runs in a child process of its own (a death test in the "threadsafe" style
// re-runs this test alone in a fresh process): MPI is initialized once per process.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <exception>

#include "zero/comm/launch.h"

namespace {
// In the child: launch() one rank with `var`=`value` set; exit 3 printing the error it
// raised, or 0 after the rank ran.
[[noreturn]] void launch_with(const char* var, const char* value) {
  ::setenv(var, value, 1);
  try {
    zt::comm::launch(1, [](zt::comm::Communicator& c) {
      std::fprintf(stderr, "ran as rank %d of %d\n", c.rank(), c.size());
    });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "caught: %s\n", e.what());
    std::exit(3);
  }
  std::exit(0);
}
}  // namespace

TEST(LauncherEnv, AJobSizeThatMpiDoesNotSeeIsAnError) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(launch_with("PMI_SIZE", "2"), ::testing::ExitedWithCode(3),
              "caught: .*PMI_SIZE=2.*MPI_COMM_WORLD has 1 process.*another MPI");
  EXPECT_EXIT(launch_with("OMPI_COMM_WORLD_SIZE", "3"), ::testing::ExitedWithCode(3),
              "caught: .*OMPI_COMM_WORLD_SIZE=3.*MPI_COMM_WORLD has 1 process");
}

TEST(LauncherEnv, AJobOfOneProcessRuns) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(launch_with("OMPI_COMM_WORLD_SIZE", "1"), ::testing::ExitedWithCode(0),
              "ran as rank 0 of 1");
}
