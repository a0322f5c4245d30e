// Lesson 8 under mpirun: the same equivalence with one process per rank (MpiComm).
// Invariant: the backend changes nothing — ZeRO-3 over MPI trains the Mixed model to the
// parameters of single-process training.
#include "zero/lesson_util.h"

using namespace zt;

TEST(Lesson08EquivalenceMpi, PlainAndAccumulated) {
  if (!comm::under_mpirun()) GTEST_SKIP() << "not started by mpirun";
  for (lesson::EquivalenceSetup s :
       {lesson::EquivalenceSetup{}, lesson::EquivalenceSetup{2, 0.05}}) {
    auto expect = lesson::train_single(s);
    comm::launch(
        1, [&](comm::Communicator& comm) { lesson::train_zero_and_compare(comm, s, expect); });
  }
}
