// `vqgpt tokenizer -o DIR` into a folder that holds checkpoints already: the refusal says
// whose they are, as their meta.json records the app that saved them. A tokenizer's (vqtok)
// may be used as one (gpt.tokenizer_checkpoint); another app's, such as a vqgpt run's, are
// not offered as a tokenizer, and the refusal names what --overwrite would delete.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "apps/app_test_util.h"
#include "apps/vqgpt/vqgpt_app.h"
#include "common/test_util.h"
#include "zero/comm/thread_comm.h"

using namespace zt;
namespace fs = std::filesystem;

namespace {

// A run's folder holding one checkpoint (step 2) that `app` saved, as its meta.json says.
fs::path run_of(const std::string& app) {
  const fs::path run = fs::path(test::process_temp_dir("zt_quick_tok_out")) / app;
  const fs::path step = run / "checkpoints" / "step_000002";
  fs::create_directories(step);
  std::ofstream(run / "checkpoints" / "latest") << "step_000002";
  std::ofstream(step / "meta.json") << R"({"step": 2, "user": {"app": ")" << app << R"("}})";
  std::ofstream(step / "rank_00000.safetensors") << "x";
  std::ofstream(run / "metrics.jsonl") << "{\"step\": 2}\n";
  return run;
}

// The error `vqgpt tokenizer --steps 1 -o run` raises (no --overwrite).
std::string tokenizer_into(const fs::path& run, bool quiet = true) {
  const config::AppConfig cfg =
      config::load_app_config(ZT_SOURCE_DIR "/configs/vqgpt_tiny.yaml", {}, config::App::vqgpt);
  return test::error_of([&] {
    comm::run_threads(1, [&](comm::Communicator& comm) {
      vqgpt::train_quick_tokenizer(cfg, 1, run.string(), comm, quiet, false);
    });
  });
}

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

TEST(QuickTokenizerOut, AFolderOfAnotherAppsCheckpointsIsNotOfferedAsATokenizer) {
  const fs::path gpt_run = run_of("vqgpt");
  const std::string err = tokenizer_into(gpt_run);
  EXPECT_TRUE(has(err,
                  "already holds vqgpt checkpoints (their meta.json says so), not a "
                  "tokenizer's"))
      << err;
  EXPECT_FALSE(has(err, "gpt.tokenizer_checkpoint")) << err;
  EXPECT_TRUE(
      has(err, "--overwrite would delete that vqgpt run's checkpoints and its metrics in '" +
                   gpt_run.string() + "'"))
      << err;
  EXPECT_TRUE(fs::exists(gpt_run / "checkpoints" / "step_000002" / "meta.json"));
  // Nothing announces a training that is then refused.
  ::testing::internal::CaptureStdout();
  EXPECT_FALSE(tokenizer_into(gpt_run, /*quiet=*/false).empty());
  const std::string said = ::testing::internal::GetCapturedStdout();
  EXPECT_FALSE(has(said, "training a quick vqtok tokenizer")) << said;
  // A tokenizer's own checkpoints may be used as one.
  const std::string tok = tokenizer_into(run_of("vqtok"));
  EXPECT_TRUE(has(tok, "already holds checkpoints of a tokenizer (vqtok's")) << tok;
  EXPECT_TRUE(has(tok, "point gpt.tokenizer_checkpoint at it")) << tok;
}
