// comm::agree_before_launch under mpirun: a failure before launch (a config that does not
// load) on any process makes every process throw comm::AgreedError, which rank 0 prints
// naming the rank that failed; with none, every process goes on.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "zero/comm/launch.h"
#include "zero/comm/mpi_comm.h"

using namespace zt;
using namespace zt::comm;

namespace {
// agree_before_launch(failure): the AgreedError's message on this rank, or "went on".
std::string agreed_error(const std::exception_ptr& failure) {
  try {
    agree_before_launch(failure);
  } catch (const AgreedError& e) {
    return e.what();
  }
  return "went on";
}
}  // namespace

TEST(AgreeBeforeLaunch, ProcessesThatAllStartedGoOn) {
  EXPECT_EQ(agreed_error(nullptr), "went on");
}

TEST(AgreeBeforeLaunch, AFailureOnOneRankStopsEveryRankNamingIt) {
  const int rank = MpiComm().rank();
  const std::exception_ptr failure =
      rank == 1 ? std::make_exception_ptr(std::runtime_error("bad lr")) : nullptr;
  EXPECT_EQ(agreed_error(failure), "rank 1: bad lr");
}

// An exception whose what() is empty is a failure too: it read as a start that succeeded,
// and that process went on with what failed to load (a config left at its defaults).
TEST(AgreeBeforeLaunch, AFailureWithAnEmptyMessageIsAFailure) {
  const int rank = MpiComm().rank();
  const std::exception_ptr failure =
      rank == 1 ? std::make_exception_ptr(std::runtime_error("")) : nullptr;
  EXPECT_EQ(agreed_error(failure), "rank 1: an error without a message");
}
