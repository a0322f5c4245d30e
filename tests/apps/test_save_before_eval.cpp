// A step that both evaluates and saves a checkpoint saves first: an evaluation that fails
// (here a held-out image whose header reads but whose data does not decode, which only
// the evaluation finds) stops the run with that step saved, and a --resume once the image
// is replaced goes on from it instead of from the step before.
#include <filesystem>
#include <fstream>

#include "apps/reliability_test_util.h"
#include "common/test_util.h"
#include "data/image.h"
#include "zero/checkpoint.h"

using namespace zt;
namespace fs = std::filesystem;
using namespace zt::reltest;
using test::error_of;

namespace {

// A 16x16 PNG of varied pixels (so that its compressed data is long enough to cut).
void save_image(const std::string& path, int seed) {
  std::vector<uint8_t> px(16 * 16 * 3);
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>((i * 37 + seed * 11) % 251);
  data::save_png(path, data::Image{16, 16, px});
}

}  // namespace

TEST(SaveBeforeEval, AnEvaluationThatFailsLosesNoSavedStep) {
  const std::string dir = fresh_dir("save_before_eval");
  const std::string train = dir + "/train", held_out = dir + "/eval";
  fs::create_directories(train);
  fs::create_directories(held_out);
  for (int i = 0; i < 8; ++i) save_image(train + "/" + std::to_string(i) + ".png", i);
  save_image(held_out + "/a.png", 20);
  const std::string bad = held_out + "/b.png";
  save_image(bad, 21);
  fs::resize_file(bad, fs::file_size(bad) / 2);  // the header reads, the data does not
  const std::vector<std::string> sets = {"data.kind=image_folder", "data.path=" + train,
                                         "data.eval_path=" + held_out, "train.eval_every=2",
                                         "train.batch=1"};
  const std::string err = error_of([&] { apptest::train_vqtok(tiny_config(dir, sets), false); });
  EXPECT_TRUE(has(err, "cannot read image '" + bad + "'")) << err;
  // The step the evaluation failed at was saved before it ran.
  EXPECT_EQ(zero::find_checkpoint(dir + "/checkpoints"), dir + "/checkpoints/step_000002");
  save_image(bad, 21);
  const vqtok::TrainResult r = apptest::train_vqtok(tiny_config(dir, sets), /*resume=*/true);
  EXPECT_EQ(r.start_step, 2);
  EXPECT_EQ(r.steps, 4);
  fs::remove_all(dir);
}
