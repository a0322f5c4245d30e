// vqgpt: what a user is told matches what happened. What these tests pin down:
//  1. `vqgpt sample`'s legend names a row of held-out data only where the sheet has one:
//     sampled away from its data, the sheet holds the samples alone and the legend says so
//     (it used to describe the missing row);
//  2. with no tokenizer named anywhere, the advice is a command that works: `vqgpt
//     tokenizer` then needs --out (the advice used to omit it, and the command it gave
//     failed with "pass --out or set gpt.tokenizer_checkpoint");
//  3. the sheet's row of data under the samples is called held-out only where it is: an
//     image folder without data.eval_path gives clips of the training data, and the legend
//     says so (it called them held-out).
#include <filesystem>
#include <string>

#include "apps/vqgpt/vqgpt_app.h"
#include "apps/vqgpt_test_util.h"
#include "common/test_util.h"
#include "data/image.h"
#include "nn/safetensors.h"

using namespace zt;
using namespace zt::vqgpt_test;

namespace {
// The tiny config trained one step in `s` with a saved tokenizer, for `vqgpt sample` to
// read its checkpoint.
config::AppConfig trained_run(const Scratch& s, comm::Communicator& comm) {
  const std::string weights = s / "tokenizer.safetensors";
  config::AppConfig cfg = tiny_config(s / "run");
  nn::save_safetensors(weights, pretrained_tokenizer(cfg));
  cfg.train.steps = 1;
  cfg.train.checkpoint_every = 1;
  vqgpt::TrainOptions to;
  to.quiet = true;
  to.tokenizer = weights;
  vqgpt::train(cfg, to, comm);
  return cfg;
}
}  // namespace

TEST(VqGptGuidance, TheSampleLegendNamesTheHeldOutRowOnlyWhereTheSheetHasOne) {
  Scratch s("legend");
  comm::run_threads(1, [&](comm::Communicator& comm) {
    const config::AppConfig cfg = trained_run(s, comm);
    vqgpt::SampleOptions so;
    so.num = 2;
    so.quiet = true;
    so.out = s / "with.png";
    const std::string with = vqgpt::sample(cfg, so, comm).legend;
    EXPECT_NE(with.find("below them, held-out data clips encoded and decoded"), std::string::npos)
        << with;

    config::AppConfig away = cfg;  // its data is not on this machine
    away.data.kind = data::DataKind::image_folder;
    away.data.path = s / "no-such-data";
    so.out = s / "away.png";
    const std::string without = vqgpt::sample(away, so, comm).legend;
    EXPECT_EQ(without.find("below them, held-out data"), std::string::npos) << without;
    EXPECT_NE(without.find("no held-out data below them"), std::string::npos) << without;
    EXPECT_NE(without.find("grid: one sampled clip per row (2 rows)"), std::string::npos)
        << without;

    so.out = "";  // no sheet, no legend
    EXPECT_EQ(vqgpt::sample(cfg, so, comm).legend, "");
  });
  EXPECT_TRUE(std::filesystem::exists(s / "with.png"));
  EXPECT_TRUE(std::filesystem::exists(s / "away.png"));
}

TEST(VqGptGuidance, WithNoTokenizerNamedTheAdviceGivesTheQuickTokenizerAnOut) {
  Scratch s("unnamed");
  config::AppConfig cfg = tiny_config(s / "run");
  cfg.gpt->tokenizer_checkpoint = "";  // neither the config nor --tokenizer names one
  std::string e;
  comm::run_threads(1, [&](comm::Communicator& comm) {
    e = test::error_of([&] { vqgpt::load_tokenizer(cfg, "", comm); });
  });
  EXPECT_NE(e.find("no tokenizer given (gpt.tokenizer_checkpoint is not set)"), std::string::npos)
      << e;
  EXPECT_NE(e.find("vqgpt tokenizer --config <this config> --out DIR"), std::string::npos) << e;
  EXPECT_NE(e.find("set gpt.tokenizer_checkpoint to that checkpoints folder, or pass it as "
                   "--tokenizer"),
            std::string::npos)
      << e;
  EXPECT_EQ(e.find("a quick one into gpt.tokenizer_checkpoint"), std::string::npos) << e;
}

TEST(VqGptGuidance, TheSampleLegendCallsTrainingDataTrainingData) {
  Scratch s("trained_on");
  for (const char* folder : {"train", "held"}) {
    std::filesystem::create_directories(s / folder);
    for (int i = 0; i < 2; ++i)
      data::save_png(s / folder + "/" + std::to_string(i) + ".png",
                     {8, 8, std::vector<uint8_t>(8 * 8 * 3, static_cast<uint8_t>(90 * i))});
  }
  comm::run_threads(1, [&](comm::Communicator& comm) {
    vqgpt::SampleOptions so;
    so.num = 2;
    so.quiet = true;
    config::AppConfig folder =
        trained_run(s, comm);  // eval items drawn from data.path, the training data
    folder.data.kind = data::DataKind::image_folder;
    folder.data.path = s / "train";
    so.out = s / "trained_on.png";
    const std::string trained_on = vqgpt::sample(folder, so, comm).legend;
    EXPECT_EQ(trained_on.find("held-out"), std::string::npos) << trained_on;
    EXPECT_NE(trained_on.find("below them, training data clips (data.eval_path is not set) "
                              "encoded and decoded"),
              std::string::npos)
        << trained_on;

    folder.data.eval_path = s / "held";
    so.out = s / "held_out.png";
    const std::string held = vqgpt::sample(folder, so, comm).legend;
    EXPECT_NE(held.find("below them, held-out data clips encoded and decoded"), std::string::npos)
        << held;
  });
}
