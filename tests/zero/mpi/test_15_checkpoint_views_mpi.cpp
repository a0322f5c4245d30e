// Lesson 15 under mpirun: one checkpoint path, a view of it per process.
// Invariant: rank 0 names the folder a load reads, but each process opens it from its own
// working directory and filesystem. Ranks that find different checkpoints at that path (a
// relative path under other working folders, a copy of the checkpoints on each machine)
// stop with one error naming the rank, before anything is loaded, instead of each loading
// its own shards into one model; ranks that find the same checkpoint load it.
#include <unistd.h>

#include <filesystem>
#include <optional>

#include "zero/checkpoint_util.h"

using namespace zt;
namespace fs = std::filesystem;

namespace {

// Runs f with the process's working directory at `dir`, then goes back.
void in_directory(const fs::path& dir, const std::function<void()>& f) {
  const fs::path before = fs::current_path();
  fs::current_path(dir);
  try {
    f();
  } catch (...) {
    fs::current_path(before);
    throw;
  }
  fs::current_path(before);
}

}  // namespace

TEST(Lesson15CheckpointMpi, RanksThatSeeDifferentCheckpointsStop) {
  ASSERT_TRUE(comm::under_mpirun()) << "run this test with mpirun (ctest does)";
  comm::launch(1, [&](comm::Communicator& comm) {
    ASSERT_EQ(comm.size(), 2);
    std::optional<lesson::TempDir> tmp;  // rank 0's, shared by path
    if (comm.rank() == 0) tmp.emplace();
    const fs::path root = comm.all_gather_bytes(comm.rank() == 0 ? tmp->path : "")[0];
    // Two saves of one run, steps 1 and 2, both at this world size.
    auto e = lesson::make_engine(comm, lesson::make_net, 5);
    lesson::train_step(*e, 0);
    zero::save_checkpoint(*e, root.string(), "a");
    lesson::train_step(*e, 1);
    zero::save_checkpoint(*e, root.string(), "b");

    // Each rank's working folder holds `ck`, a link to a checkpoint: both to "a", or rank
    // 0's to "a" and rank 1's to "b".
    auto view = [&](const std::string& name, const std::string& target) {
      const fs::path dir = root / (name + std::to_string(comm.rank()));
      fs::create_directories(dir);
      fs::create_directory_symlink(root / target, dir / "ck");
      comm.barrier();
      return dir;
    };
    const fs::path same = view("same", "a");
    const fs::path other = view("other", comm.rank() == 0 ? "a" : "b");

    auto fresh = lesson::make_engine(comm, lesson::make_net, 9);
    const lesson::Named before = lesson::full_state(*fresh);
    in_directory(other, [&] {
      lesson::expect_agreed(
          comm, [&] { zero::load_checkpoint(*fresh, "ck"); },
          "load_checkpoint('ck') failed: rank 1 read another checkpoint at 'ck' than rank 0");
    });
    lesson::expect_same(lesson::full_state(*fresh), before, 0, 0);  // nothing loaded

    in_directory(same, [&] { zero::load_checkpoint(*fresh, "ck"); });
    auto at_a = lesson::make_engine(comm, lesson::make_net, 9);
    zero::load_checkpoint(*at_a, (root / "a").string());
    lesson::expect_same(lesson::full_state(*fresh), lesson::full_state(*at_a), 0, 0);
    comm.barrier();  // rank 0 removes the folder once every rank is done with it
  });
}
