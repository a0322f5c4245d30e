// Checkpoint cleanup: not a lesson, the regression tests of what saves, prunes and
// resumes leave on disk. Temporaries of saves whose process died are removed at the next
// save (all but this process's under the run's lock); a save over a damaged checkpoint,
// and a resume past one, keep it aside; keep_last counts complete checkpoints only and
// deletes through hidden folders.
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "common/test_util.h"
#include "zero/checkpoint_util.h"

using namespace zt;
using lesson::entries;
using lesson::make_engine;
using lesson::save_steps;
using lesson::TempDir;
using lesson::train_step;
namespace fs = std::filesystem;

namespace {

// The pid of a process that has exited (and was reaped).
pid_t dead_pid() {
  pid_t p = fork();
  if (p == 0) _exit(0);
  waitpid(p, nullptr, 0);
  return p;
}

}  // namespace

TEST(CheckpointCleanup, StaleTemporariesAreRemovedWhenTheirProcessIsGone) {
  TempDir tmp;
  const std::string root = tmp / "ckpt";
  save_steps(root, 1);
  const std::string dead = std::to_string(dead_pid());
  const std::string live = std::to_string(getppid());
  // Exited but not reaped (as the killed ranks of an mpirun job stay until their adopter
  // reaps them): gone, although kill(pid, 0) still finds it.
  const pid_t zombie_pid = fork();
  if (zombie_pid == 0) _exit(0);
  while (true) {  // wait until it has exited, without reaping it
    siginfo_t info{};
    if (waitid(P_PID, static_cast<id_t>(zombie_pid), &info, WEXITED | WNOWAIT) == 0) break;
  }
  const std::string zombie = std::to_string(zombie_pid);
  auto make_dir = [&](const std::string& name) {
    fs::create_directories(fs::path(root) / name);
    std::ofstream(fs::path(root) / name / "rank_00000.safetensors") << "partial";
  };
  make_dir(".step_000002.tmp-" + dead + "-0badf00d");             // killed save: removed
  make_dir(".step_000003.tmp-" + live + "-0badf00d");             // a live process's: kept
  make_dir(".step_000004.tmp-p" + dead + "-hzzzzzzzz-0badf00d");  // another machine's: kept
  make_dir(".step_000005.tmp-" + zombie + "-0badf00d");           // an exited process's: removed
  // This process's pid but not its id: an earlier process's (a restarted container's app
  // runs under the same pid, often 1). Removed.
  make_dir(".step_000006.tmp-" + std::to_string(getpid()) + "-0badf00d");
  make_dir(".step_000007.del-" + dead + "-0badf00d");  // a prune killed mid-delete: removed
  std::ofstream(fs::path(root) / (".latest.tmp-" + dead + "-0badf00d")) << "step_0000";
  // Killed between moving step 1 aside and putting its replacement in place.
  fs::rename(fs::path(root) / "step_000001", fs::path(root) / (".step_000001.old-" + dead + "-1"));
  const auto removed = zero::remove_stale_temporaries(root);
  waitpid(zombie_pid, nullptr, 0);
  EXPECT_EQ(removed.size(), 6u);
  EXPECT_EQ(entries(root), (std::set<std::string>{
                               "latest", "step_000001", ".step_000003.tmp-" + live + "-0badf00d",
                               ".step_000004.tmp-p" + dead + "-hzzzzzzzz-0badf00d"}));
  EXPECT_NO_THROW(zero::verify_checkpoint(root + "/step_000001"));
  // Under the run's lock no other process writes here: a live process's and another
  // machine's temporaries are an earlier run's too.
  // A hidden folder whose name carries no id zt writes is nobody's temporary: kept.
  make_dir(".notes.tmp-mine");
  // Nor is a visible folder, whatever its name ends with: saves make only hidden ones.
  const std::string visible = "backup.tmp-" + dead + "-0badf00d";
  make_dir(visible);
  EXPECT_EQ(zero::remove_stale_temporaries(root, /*run_lock_held=*/true).size(), 2u);
  EXPECT_EQ(entries(root),
            (std::set<std::string>{"latest", "step_000001", ".notes.tmp-mine", visible}));
  // The next save removes a dead process's temporary by itself.
  make_dir(".step_000009.tmp-" + dead + "-0badf00d");
  save_steps(root, 1);
  EXPECT_FALSE(fs::exists(fs::path(root) / (".step_000009.tmp-" + dead + "-0badf00d")));
}

// A save over a damaged checkpoint of its step (one a resume passed over) keeps the damaged
// folder under another name: its intact files may still be wanted.
TEST(CheckpointCleanup, ASaveOverADamagedCheckpointKeepsIt) {
  TempDir tmp;
  const std::string root = tmp / "ckpt";
  save_steps(root, 2);
  fs::resize_file(fs::path(root) / "step_000002/rank_00001.safetensors", 10);
  save_steps(root, 2);  // saves steps 1 and 2 again
  EXPECT_NO_THROW(zero::verify_checkpoint(root + "/step_000002"));
  int kept = 0;
  for (const std::string& name : entries(root))
    if (name.rfind("step_000002.incomplete-", 0) == 0) {
      ++kept;
      EXPECT_EQ(fs::file_size(fs::path(root) / name / "rank_00001.safetensors"), 10u);
      EXPECT_TRUE(fs::exists(fs::path(root) / name / "rank_00000.safetensors"));
    }
  EXPECT_EQ(kept, 1);
}

// A save whose checkpoint is in place but whose `latest` cannot be written (a disk that
// fills up just then) says that the checkpoint is complete, and a load of the root takes it.
TEST(CheckpointCleanup, ASaveThatCannotUpdateLatestSaysTheCheckpointIsComplete) {
  TempDir tmp;
  const std::string root = tmp / "ckpt";
  save_steps(root, 1);
  fs::remove(fs::path(root) / "latest");
  fs::create_directories(fs::path(root) / "latest" / "in_the_way");  // no rename replaces it
  std::string error;
  try {
    save_steps(root, 1);
  } catch (const std::exception& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("step_000001' is saved complete, but '" + root + "/latest' could not"),
            std::string::npos)
      << error;
  EXPECT_NO_THROW(zero::verify_checkpoint(root + "/step_000001"));
  EXPECT_EQ(zero::find_checkpoint(root), root + "/step_000001");
}

// keep_last counts complete checkpoints only and deletes nothing else. A resume passed
// over a damaged step 4 for step 2; the saves of steps 4, 6 and 8 that follow, keeping 2,
// set the damaged folder aside and keep it, and keep the two newest good checkpoints (the
// set-aside folder once counted, and sorted after step_000004, so good ones went first).
TEST(CheckpointCleanup, PruningCountsAndDeletesOnlyCompleteCheckpoints) {
  TempDir tmp;
  const std::string root = tmp / "ckpt";
  auto train_to = [&](zero::Engine& e, int last, int keep) {
    while (e.global_step() < last) {
      train_step(e, static_cast<int>(e.global_step()));
      if (e.global_step() % 2 != 0) continue;
      zero::save_checkpoint(e, root, zero::checkpoint_tag(e.global_step()), {}, keep);
    }
  };
  comm::run_threads(2, [&](comm::Communicator& comm) {
    auto e = make_engine(comm, lesson::make_mixed, 5);
    train_to(*e, 4, 0);
  });
  fs::resize_file(fs::path(root) / "step_000004/rank_00001.safetensors", 10);
  fs::create_directories(fs::path(root) / "step_000001");  // not a checkpoint: not ours
  std::ofstream(fs::path(root) / "step_000001/notes.txt") << "kept\n";
  const zero::ResumePoint rp = zero::find_resume_point(root);
  ASSERT_EQ(rp.step, 2);
  EXPECT_NE(rp.note.find("step_000004/rank_00001.safetensors"), std::string::npos) << rp.note;
  // After each save: the folders (the set-aside one's id left out), and the resume point
  // and its note (the set-aside folder is not a checkpoint to resume from or report).
  std::vector<std::set<std::string>> seen;
  std::vector<std::pair<int64_t, std::string>> resume;
  comm::run_threads(2, [&](comm::Communicator& comm) {
    auto e = make_engine(comm, lesson::make_mixed, 9);
    zero::load_checkpoint(*e, rp.dir);
    for (int last : {4, 6, 8}) {
      train_to(*e, last, 2);
      if (comm.rank() != 0) continue;  // rank 0 alone writes root between saves
      std::set<std::string> names;
      for (const std::string& n : entries(root))
        names.insert(n.rfind("step_000004.incomplete-", 0) == 0 ? "aside" : n);
      seen.push_back(names);
      const zero::ResumePoint now = zero::find_resume_point(root);
      resume.emplace_back(now.step, now.note);
    }
  });
  const std::set<std::string> always = {"latest", "step_000001", "aside"};
  auto with = [&](std::set<std::string> s) {
    s.insert(always.begin(), always.end());
    return s;
  };
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0], with({"step_000002", "step_000004"}));
  EXPECT_EQ(seen[1], with({"step_000004", "step_000006"}));
  EXPECT_EQ(seen[2], with({"step_000006", "step_000008"}));
  EXPECT_EQ(resume, (std::vector<std::pair<int64_t, std::string>>{{4, ""}, {6, ""}, {8, ""}}));
  for (const std::string& n : entries(root)) {
    if (n.rfind("step_000004.incomplete-", 0) != 0) continue;
    EXPECT_EQ(fs::file_size(fs::path(root) / n / "rank_00001.safetensors"), 10u);
  }
  EXPECT_NO_THROW(zero::verify_checkpoint(root + "/step_000006"));
}

// A run resumed from an earlier checkpoint than its latest prunes only up to the step it
// saves: the later checkpoints, the earlier run's, are neither counted nor deleted.
TEST(CheckpointCleanup, ASaveAfterAResumeFromAnEarlierStepKeepsTheLaterCheckpoints) {
  TempDir tmp;
  const std::string root = tmp / "ckpt";
  save_steps(root, 4);
  comm::run_threads(2, [&](comm::Communicator& comm) {
    auto e = make_engine(comm, lesson::make_mixed, 5);
    zero::load_checkpoint(*e, root + "/step_000002");
    train_step(*e, 2);
    zero::save_checkpoint(*e, root, zero::checkpoint_tag(e->global_step()), {}, 2);
  });
  EXPECT_EQ(entries(root),
            (std::set<std::string>{"latest", "step_000002", "step_000003", "step_000004"}));
}

// keep_last is a count of checkpoints, not narrowed to an int: 2^32 + 1 keeps them all (as
// an int it would be 1, and every save would delete the others).
TEST(CheckpointCleanup, KeepLastPastAnIntKeepsEveryCheckpoint) {
  TempDir tmp;
  const std::string root = tmp / "ckpt";
  comm::run_threads(1, [&](comm::Communicator& comm) {
    const int64_t keep = (int64_t{1} << 32) + comm.size();
    auto e = make_engine(comm, lesson::make_mixed, 5);
    for (int step = 0; step < 3; ++step) {
      train_step(*e, step);
      zero::save_checkpoint(*e, root, zero::checkpoint_tag(e->global_step()), {}, keep);
    }
  });
  EXPECT_EQ(entries(root),
            (std::set<std::string>{"latest", "step_000001", "step_000002", "step_000003"}));
}

// A damaged checkpoint can be whole: a flipped byte keeps every file's size, so a prune
// (which reads no digests) would count it among those it keeps. A resume that passes it
// over sets it aside; the next save's prune then keeps the checkpoint the run resumed from,
// and deletes through a hidden folder that it leaves no trace of.
TEST(CheckpointCleanup, AResumeSetsTheCheckpointsItPassedOverAside) {
  TempDir tmp;
  const std::string root = tmp / "ckpt";
  comm::run_threads(2, [&](comm::Communicator& comm) {
    auto e = make_engine(comm, lesson::make_mixed, 5);
    while (e->global_step() < 8) {
      train_step(*e, static_cast<int>(e->global_step()));
      if (e->global_step() % 2 == 0)
        zero::save_checkpoint(*e, root, zero::checkpoint_tag(e->global_step()));
    }
  });
  const fs::path damaged = fs::path(root) / "step_000008/rank_00000.safetensors";
  {
    std::fstream f(damaged, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-4, std::ios::end);
    const char byte = static_cast<char>(f.get() ^ 0x55);
    f.seekp(-4, std::ios::end);
    f.put(byte);
  }
  const zero::ResumePoint rp = zero::find_resume_point(root);
  ASSERT_EQ(rp.step, 6);
  EXPECT_EQ(rp.passed_over, std::vector<std::string>{(fs::path(root) / "step_000008").string()});
  const std::vector<std::string> aside = zero::set_aside_passed_over(rp, "test");
  EXPECT_EQ(aside,
            std::vector<std::string>{(fs::path(root) / "step_000008.incomplete-test").string()});
  comm::run_threads(2, [&](comm::Communicator& comm) {
    auto e = make_engine(comm, lesson::make_mixed, 9);
    zero::load_checkpoint(*e, rp.dir);
    train_step(*e, 6);
    zero::save_checkpoint(*e, root, zero::checkpoint_tag(e->global_step()), {}, /*keep_last=*/2);
  });
  EXPECT_EQ(entries(root), (std::set<std::string>{"latest", "step_000006", "step_000007",
                                                  "step_000008.incomplete-test"}));
  EXPECT_NO_THROW(zero::verify_checkpoint(root + "/step_000006"));
  EXPECT_EQ(zero::find_resume_point(root).step, 7);
}
