// The checks that ranks under mpirun were started alike (apps/common/run_checks.h): every
// rank's "key=value" lines are compared with rank 0's, numbers as numbers (integers
// exactly), and the error names the first key that differs, its value on rank 0 and on
// the rank that differs, a key one of them lacks included; and the first non-finite
// parameter or buffer of a model is named with its module.
#include <limits>

#include "apps/common/app_cli.h"
#include "apps/common/run_checks.h"
#include "common/test_util.h"
#include "core/ops.h"
#include "nn/module.h"
#include "zero/comm/thread_comm.h"

using namespace zt;
using test::error_of;

namespace {

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

// Integers past 2^53 (seeds) are compared exactly, not as the doubles they round to;
// other numbers as numbers, and text as text.
TEST(RunChecks, ConfigValuesCompareAsNumbersAndIntegersExactly) {
  EXPECT_TRUE(app::same_config_value("0.003", "3.0e-3"));
  EXPECT_TRUE(app::same_config_value("2", "2"));
  EXPECT_FALSE(app::same_config_value("9007199254740993", "9007199254740992"));
  EXPECT_FALSE(app::same_config_value("", "0"));
  EXPECT_FALSE(app::same_config_value("adamw", "adam"));
}

// Each rank is compared with rank 0, not rank 1 alone; an option only one rank was given
// is named too, "(absent)" where it is missing.
TEST(RunChecks, TheRankThatDiffersAndAnOptionOnlyOneRankHasAreNamed) {
  comm::run_threads(3, [](comm::Communicator& comm) {
    std::vector<app::OptionValue> options = {{"--batch", "4"}};
    if (comm.rank() == 2) options.push_back({"--limit", "3"});
    const std::string e = error_of([&] { app::check_same_options(options, comm, "vqtok encode"); });
    EXPECT_TRUE(has(e,
                    "vqtok encode: the ranks were started with different options: '--limit' is "
                    "(absent) on rank 0 but 3 on rank 2"))
        << e;
  });
  comm::run_threads(2, [](comm::Communicator& comm) {
    const std::vector<app::OptionValue> options = {{"--batch", comm.rank() == 0 ? "4" : "4.0"}};
    EXPECT_EQ(error_of([&] { app::check_same_options(options, comm, "t"); }), "")
        << "one number written two ways";
  });
  // An option one rank left at its default (an empty path) is said to be not given.
  comm::run_threads(2, [](comm::Communicator& comm) {
    const std::vector<app::OptionValue> options = {{"--weights", comm.rank() == 0 ? "w" : ""}};
    const std::string e = error_of([&] { app::check_same_options(options, comm, "vqtok eval"); });
    EXPECT_TRUE(has(e, "'--weights' is w on rank 0 but (not given) on rank 1")) << e;
  });
}

// Under mpirun each process parses its own command line: every option of the subcommand is
// compared as it was given (its value, else its shown default), all but those each process
// checks itself (--ranks against the world size) and those that only make the config, which
// is compared by what it resolves to.
TEST(RunChecks, EveryOptionOfACommandLineIsComparedButThoseThatOnlyMakeTheConfig) {
  CLI::App app{"t", "t"};
  app::show_defaults(app);
  app::CommonArgs c;
  CLI::App* sub = app.add_subcommand("eval", "");
  app::add_common_args(sub, c, "cfg.yaml");
  std::string split = "eval", out, weights;
  bool verify = false;
  sub->add_option("--split", split, "");
  sub->add_option("-o,--out", out, "");
  sub->add_option("--weights", weights, "");
  sub->add_flag("--verify", verify, "");
  app::tidy_defaults(app);
  const std::string cfg = std::string(ZT_SOURCE_DIR) + "/configs/vqtok_tiny.yaml";
  app.parse("eval --config " + cfg + " --ranks 2 --set train.lr=1 -o a.json --verify", false);
  ASSERT_EQ(c.command, sub);
  const std::vector<app::OptionValue> want = {
      {"--split", "eval"}, {"--out", "a.json"}, {"--weights", ""}, {"--verify", "true"}};
  EXPECT_EQ(app::given_options(*sub), want);
}

namespace {

// A module with a parameter and a buffer, in a child.
struct Child : nn::UnaryModule {
  Child() {
    register_parameter("weight", zeros({2}, DType::f32));
    register_buffer("running_var", zeros({3}, DType::f32));
  }
  Tensor forward(const Tensor& x) override { return x; }
};
struct Parent : nn::UnaryModule {
  Parent() { register_module("norm", std::make_shared<Child>()); }
  Tensor forward(const Tensor& x) override { return x; }
};

}  // namespace

// A non-finite buffer (a running statistic) is found as a parameter is, named with its
// module's path.
TEST(RunChecks, TheFirstNonFiniteParameterOrBufferIsNamedWithItsModule) {
  Parent m;
  EXPECT_EQ(app::first_nonfinite(m), "");
  Tensor var = m.named_buffers()[0].second;
  var.data<float>()[1] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(app::first_nonfinite(m), "buffer 'norm.running_var' (module norm, f32 [3])");
  Tensor w = m.named_parameters()[0].second;
  w.data<float>()[0] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(app::first_nonfinite(m), "parameter 'norm.weight' (module norm, f32 [2])");
}

// A DeepSpeed config is compared by its settings: each process of an mpirun job reads its
// own copy of the file (another machine's may differ), and one file may be named two ways.
TEST(RunChecks, DeepSpeedConfigsAreComparedByTheirSettings) {
  const std::string yaml =
      test::write_temp_file("zt_run_checks", "ds", "run.yaml", "train:\n  steps: 2\n");
  const std::string ds = test::write_temp_file("zt_run_checks", "ds", "ds.json",
                                               R"({"train_micro_batch_size_per_gpu": 2})");
  auto load = [&](const std::string& path) {
    return config::load_app_config(yaml, {"deepspeed_config=" + config::yaml_quoted(path)});
  };
  const config::AppConfig two = load(ds);
  const std::string dir = std::filesystem::path(ds).parent_path().string();
  const config::AppConfig same_file =
      load(dir + "/../" + std::filesystem::path(dir).filename().string() + "/ds.json");
  test::write_temp_file("zt_run_checks", "ds", "ds.json",
                        R"({"train_micro_batch_size_per_gpu": 4})");
  const config::AppConfig four = load(ds);
  comm::run_threads(2, [&](comm::Communicator& comm) {
    const std::string e = error_of(
        [&] { app::check_same_config(comm.rank() == 0 ? two : four, comm, "vqtok train"); });
    EXPECT_TRUE(has(e,
                    "vqtok train: the ranks were started with different configurations: "
                    "'deepspeed_config.train_micro_batch_size_per_gpu' is 2 on rank 0 but 4 on "
                    "rank 1"))
        << e;
  });
  comm::run_threads(2, [&](comm::Communicator& comm) {
    EXPECT_EQ(
        error_of([&] { app::check_same_config(comm.rank() == 0 ? two : same_file, comm, "t"); }),
        "")
        << "one file named two ways";
  });
}
