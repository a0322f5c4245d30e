// A model partitioned over one rank count, handed to an engine over another (a model kept
// from an earlier run, or built under another group's zero::Init): each shard's layout is
// the first count's, so every gather would assemble the parameters wrongly (at one rank it
// takes the shard itself for the whole parameter, reading past its end). The engine
// refuses it at construction, naming the parameter and both counts.
#include "zero/lesson_util.h"

using namespace zt;

TEST(EngineRankCount, AModelPartitionedOverAnotherRankCountIsRefused) {
  std::shared_ptr<nn::Linear> kept;
  comm::run_threads(2, [&](comm::Communicator& comm) {
    auto lin = lesson::partitioned<nn::Linear>(comm, 6, 4);
    if (comm.rank() == 0) kept = lin;
  });
  comm::run_threads(1, [&](comm::Communicator& comm) {
    EXPECT_TRUE(test::throws_with([&] { zero::Engine e(kept, comm, {}, {}); },
                                  "parameter 'weight' is partitioned over 2 ranks, as rank 0; "
                                  "this engine's communicator has 1"));
  });
}
