// vqgpt eval: a checkpoint's held-out loss is the training loop's evaluation of it, the
// same bits, with the step it was saved at.
#include <gtest/gtest.h>

#include "apps/vqgpt_test_util.h"
#include "nn/safetensors.h"

using namespace zt;
using namespace zt::vqgpt_test;

TEST(VqGptEval, ACheckpointScoresAsTheTrainingLoopsEvaluation) {
  Scratch s("eval");
  config::AppConfig cfg = tiny_config(s / "run");
  const std::string weights = s / "tokenizer.safetensors";
  nn::save_safetensors(weights, pretrained_tokenizer(cfg));
  cfg.train.steps = 2;
  cfg.train.eval_every = 2;
  cfg.train.eval_batches = 1;
  cfg.train.checkpoint_every = 2;
  vqgpt::TrainResult trained;
  vqgpt::EvalResult scored;
  comm::run_threads(1, [&](comm::Communicator& comm) {
    vqgpt::TrainOptions o;
    o.quiet = true;
    o.tokenizer = weights;
    trained = vqgpt::train(cfg, o, comm);
    scored = vqgpt::evaluate_checkpoint(cfg, "", comm);
  });
  ASSERT_GT(trained.eval_loss, 0.0);
  EXPECT_EQ(scored.step, 2);
  EXPECT_EQ(scored.loss, trained.eval_loss);
  EXPECT_EQ(scored.json().dump(),
            nlohmann::json({{"kind", "eval"}, {"step", 2}, {"loss", trained.eval_loss}}).dump());
}
