// vqgpt: what a user is told matches what happened. What these tests pin down:
//  1. `vqgpt sample`'s legend names a row of held-out data only where the sheet has one:
//     sampled away from its data, the sheet holds the samples alone and the legend says so
//     (it used to describe the missing row);
//  2. with no tokenizer named anywhere, the advice is a command that works: `vqgpt
//     tokenizer` then needs --out (the advice used to omit it, and the command it gave
//     failed with "pass --out or set gpt.tokenizer_checkpoint").
#include <filesystem>
#include <string>

#include "apps/vqgpt/vqgpt_app.h"
#include "apps/vqgpt_test_util.h"
#include "common/test_util.h"
#include "nn/safetensors.h"

using namespace zt;
using namespace zt::vqgpt_test;

TEST(VqGptGuidance, TheSampleLegendNamesTheHeldOutRowOnlyWhereTheSheetHasOne) {
  Scratch s("legend");
  const std::string weights = s / "tokenizer.safetensors";
  config::AppConfig cfg = tiny_config(s / "run");
  nn::save_safetensors(weights, pretrained_tokenizer(cfg));
  cfg.train.steps = 1;
  cfg.train.checkpoint_every = 1;
  comm::run_threads(1, [&](comm::Communicator& comm) {
    vqgpt::TrainOptions to;
    to.quiet = true;
    to.tokenizer = weights;
    vqgpt::train(cfg, to, comm);

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
