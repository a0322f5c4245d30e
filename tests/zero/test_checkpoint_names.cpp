// Checkpoint names: which folder names a resume ranks by step (only checkpoint_tag's
// spelling), which tags a save or `latest` may name (no hidden set-aside folder), and what
// makes a root one an earlier run saved into (a `latest`, or a visible folder; not the lock
// or a save's temporaries).
#include <filesystem>
#include <fstream>

#include "common/test_util.h"
#include "zero/checkpoint.h"
#include "zero/checkpoint_dir.h"
#include "zero/checkpoint_util.h"

using namespace zt;
using lesson::TempDir;
namespace fs = std::filesystem;

// A folder counts as step N only when named exactly checkpoint_tag(N): "step_4" or a
// seven-digit spelling is another folder, which no resume takes and no prune deletes.
TEST(CheckpointNames, OnlyCheckpointTagsSpellingNamesAStep) {
  using zero::ckpt::tag_step;
  EXPECT_EQ(tag_step(zero::checkpoint_tag(4)), 4);
  EXPECT_EQ(tag_step(zero::checkpoint_tag(0)), 0);
  EXPECT_EQ(tag_step(zero::checkpoint_tag(1234567)), 1234567);
  for (const std::string name : {"step_4", "step_0000004", "step_", "step_00000x", "best",
                                 "step_000004.incomplete-p1-h0-1", ".step_000004.del-p1"})
    EXPECT_EQ(tag_step(name), std::nullopt) << name;
}

// A tag is a plain visible name: hidden names are what saves, prunes and resumes set aside
// (".step_000004.old-<id>"), which neither a save nor `latest` may name.
TEST(CheckpointNames, ATagIsAPlainVisibleName) {
  using zero::ckpt::valid_tag;
  EXPECT_TRUE(valid_tag("step_000004"));
  EXPECT_TRUE(valid_tag("best"));
  for (const std::string tag : {"", ".step_000004.old-p1-h0-1", ".hidden", "latest", "a/b", "a\\b"})
    EXPECT_FALSE(valid_tag(tag)) << tag;
}

// A root holds an earlier run's checkpoints when it has a `latest` (its step folders
// removed, say) or a visible folder; a run's lock and the hidden temporaries of its saves
// alone are not checkpoints.
TEST(CheckpointNames, ARootHoldsCheckpointsWhenItHasLatestOrAVisibleFolder) {
  TempDir t;
  const fs::path root = fs::path(t.path) / "checkpoints";
  EXPECT_FALSE(zero::holds_checkpoints(root.string())) << "not there";
  fs::create_directories(root / ".step_000002.tmp-p1-h0-1");
  std::ofstream(root / ".lock") << "";
  std::ofstream(root / ".latest.tmp-p1-h0-1") << "step_000002\n";
  EXPECT_FALSE(zero::holds_checkpoints(root.string()));
  std::ofstream(root / zero::ckpt::kLatestFile) << "step_000002\n";
  EXPECT_TRUE(zero::holds_checkpoints(root.string())) << "only `latest` is left";
  fs::remove(root / zero::ckpt::kLatestFile);
  fs::create_directories(root / "step_000002");
  EXPECT_TRUE(zero::holds_checkpoints(root.string()));
}
