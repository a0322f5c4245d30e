// Lesson 8 under mpirun: the same equivalence with one process per rank (MpiComm).
// Invariant: the backend changes nothing — ZeRO-3 over MPI trains the Mixed model to the
// parameters of single-process training: plain AdamW, AdamW with gradient accumulation
// and clipping, and SGD with accumulation (which shows a wrong gradient scale).
#include "zero/lesson_util.h"

using namespace zt;

TEST(Lesson08EquivalenceMpi, PlainAndAccumulatedWithClipping) {
  // Registered under mpirun only: a plain start here is a launcher that lost its way.
  ASSERT_TRUE(comm::under_mpirun()) << "run this test with mpirun (ctest does)";
  for (const lesson::EquivalenceSetup& s :
       {lesson::EquivalenceSetup{}, lesson::EquivalenceSetup{.gas = 2, .clip = 0.05},
        lesson::EquivalenceSetup{.gas = 2, .optimizer = "sgd"}}) {
    auto expect = lesson::train_single(s);
    // 1: one rank per process; the world comes from mpirun.
    comm::launch(
        1, [&](comm::Communicator& comm) { lesson::train_zero_and_compare(comm, s, expect); });
  }
}
