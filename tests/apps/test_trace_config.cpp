// train.trace / train.trace_steps: the YAML keys reach the engine through
// app::make_engine, and a 2-rank run writes one timeline file holding both ranks,
// bounded to the requested steps, also when the run is shorter than them. (What the
// timeline shows is lesson 20's subject.)
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "apps/app_test_util.h"
#include "apps/common/train_util.h"
#include "apps/vqtok/vqtok_app.h"
#include "common/test_util.h"
#include "configs/config.h"
#include "nn/nn.h"

using namespace zt;

TEST(TraceConfig, TrainTraceWritesOneBoundedFileForAllRanks) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("zt_trace_config_" + std::to_string(::getpid()) + ".json"))
                               .string();
  config::Node root = config::parse_yaml(
      "train: {trace: " + path + ", trace_steps: 1}\nzero_optimization: {stage: 3}\n", "test");
  config::AppConfig cfg = config::parse_app_config(root);
  ASSERT_EQ(cfg.train.trace, path);
  ASSERT_EQ(cfg.train.trace_steps, 1);
  comm::run_threads(2, [&](comm::Communicator& comm) {
    manual_seed(1);
    auto model = std::make_shared<nn::Linear>(8, 8);
    auto engine = app::make_engine(model, cfg, comm, app::EngineUse::training);
    for (int s = 0; s < 3; ++s) {
      engine->backward(sum(engine->forward({ones({2, 8})})[0]));
      engine->step();
    }
  });
  std::ifstream f(path);
  ASSERT_TRUE(f.good()) << "no trace at " << path;
  nlohmann::json doc = nlohmann::json::parse(f);
  std::filesystem::remove(path);
  std::set<int> pids;
  int optimizer_spans = 0;
  for (const auto& e : doc["traceEvents"]) {
    pids.insert(e["pid"].get<int>());
    if (e["ph"] == "X" && e["cat"] == "optimizer") ++optimizer_spans;
  }
  EXPECT_EQ(pids, (std::set<int>{0, 1}));
  EXPECT_EQ(optimizer_spans, 2) << "one traced step on each of 2 ranks";
  EXPECT_TRUE(test::throws_with(
      [] { config::parse_app_config(config::parse_yaml("train: {trace_steps: 0}", "t")); },
      "trace_steps"));
}

TEST(TraceConfig, ARunShorterThanTheTracedStepsStillWritesOneFile) {
  const std::string dir = apptest::fresh_dir("zt_trace_short", "run");
  const std::string path = dir + "/trace.json";
  const config::AppConfig cfg = apptest::tiny_vqtok_config(
      dir, {"train.steps=1", "train.eval_every=0", "train.checkpoint_every=0",
            "train.trace=" + path, "train.trace_steps=3"});
  comm::run_threads(2, [&](comm::Communicator& comm) {
    vqtok::TrainOptions o;
    o.quiet = true;
    vqtok::train(cfg, o, comm);
  });
  std::ifstream f(path);
  ASSERT_TRUE(f.good()) << "no trace at " << path;
  std::set<int> pids;
  const nlohmann::json doc = nlohmann::json::parse(f);
  for (const auto& e : doc["traceEvents"]) pids.insert(e["pid"].get<int>());
  EXPECT_EQ(pids, (std::set<int>{0, 1}));
  EXPECT_FALSE(std::filesystem::exists(path + ".rank0.json"));
  std::filesystem::remove_all(dir);
}
