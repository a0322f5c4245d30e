// data.eval_samples: 0 leaves the eval split empty. Whatever reads that split says so,
// naming the key, before it reads any weights: `vqtok eval`, `vqtok encode --split eval`,
// and a training run that evaluates (train.eval_every > 0; its message names that key
// too). It used to score one clip in silence. A run that never evaluates does not read
// the split, and trains.
#include <gtest/gtest.h>

#include <string>

#include "apps/app_test_util.h"
#include "common/test_util.h"

using namespace zt;
using test::error_of;

namespace {

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// `fn` on one thread rank; the error it raises ("" when none).
std::string on_one_rank(const std::function<void(comm::Communicator&)>& fn) {
  return error_of([&] { comm::run_threads(1, fn); });
}

}  // namespace

TEST(EmptyEvalSplit, EvalAndEncodeOfTheEvalSplitAreRefused) {
  const std::string dir = test::process_temp_dir("zt_empty_eval") + "/commands";
  // train.eval_every plays no part in what eval or encode read.
  for (const char* every : {"train.eval_every=0", "train.eval_every=4"}) {
    const config::AppConfig cfg = apptest::tiny_vqtok_config(dir, {"data.eval_samples=0", every});
    vqtok::EvalOptions e;
    e.weights = dir + "/no_such_weights";  // the split is refused before these are read
    const std::string eval =
        on_one_rank([&](comm::Communicator& c) { vqtok::evaluate(cfg, e, c); });
    EXPECT_TRUE(has(eval, "the eval split is empty: data.eval_samples is 0")) << eval;
    EXPECT_FALSE(has(eval, "eval_every")) << eval;
    vqtok::EncodeOptions o;
    o.weights = e.weights;
    o.out = dir + "/ids.npy";
    const std::string encode =
        on_one_rank([&](comm::Communicator& c) { vqtok::encode(cfg, o, c); });
    EXPECT_TRUE(has(encode, "the eval split is empty")) << encode;
  }
}

TEST(EmptyEvalSplit, ATrainingRunThatEvaluatesIsRefusedAndOneThatDoesNotTrains) {
  const std::string dir = test::process_temp_dir("zt_empty_eval") + "/train";
  const config::AppConfig evaluates =
      apptest::tiny_vqtok_config(dir, {"data.eval_samples=0", "train.steps=1"});
  const std::string err = error_of([&] { apptest::train_vqtok(evaluates, false, 1); });
  EXPECT_TRUE(has(err, "the eval split is empty: data.eval_samples is 0 but train.eval_every is"))
      << err;
  EXPECT_TRUE(has(err, "train.eval_every: 0 to evaluate never")) << err;
  const config::AppConfig never = apptest::tiny_vqtok_config(
      dir, {"data.eval_samples=0", "train.steps=1", "train.eval_every=0"});
  EXPECT_EQ(apptest::train_vqtok(never, false, 1).steps, 1);
}
