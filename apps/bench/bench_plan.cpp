// zt-bench plan: the memory planner (zero/memory_plan.h) next to a short run. For the
// small tokenizer (vqtok_small) and a small GPT at each world size, prints the predicted per-rank
// bytes (model states by 16 B/parameter for f32 AdamW, 18 with a bf16 copy and an fp32 master; the
// gathered peak; replicated parameters and buffers) and what two training steps on thread ranks
// measured (rank 0's zero::MemoryReport). One JSON object per line.
#include <cstdio>
#include <functional>

#include "apps/bench/bench.h"
#include "apps/common/cli_checks.h"
#include "apps/vqgpt/model/gpt.h"
#include "apps/vqtok/model/vq_model.h"
#include "zero/memory_plan.h"
#include "zero/zero.h"

namespace {
using namespace zt;

struct Case {
  std::string name;
  std::function<std::shared_ptr<nn::Module>()> build;
  std::function<Tensor(zero::Engine&)> loss;
};

// `low`: the parameters' storage dtype; the tokenizer's input is cast to it (the apps
// cast at each part's edges instead, train_util.h).
std::vector<Case> cases(int64_t gpt_layers, int64_t gpt_embd, DType low) {
  config::ModelConfig tok;
  tok.codebook_size = 64;
  tok.ch = 32;
  tok.ch_mult = {1, 1, 1, 1};
  tok.num_res_blocks = 1;
  gpt::GptSpec spec;
  spec.vocab_size = 256;
  spec.block_size = 32;
  spec.n_layer = gpt_layers;
  spec.n_head = 4;
  spec.n_embd = gpt_embd;
  return {
      {"vqtok_small", [tok] { return std::make_shared<vq::VqModel>(tok); },
       [low](zero::Engine& e) {
         Generator g(3);
         std::vector<Tensor> out = e.forward({randn({1, 4, 3, 16, 16}, g).to(low)});
         return add(mean(mul(out[0], out[0])).to(DType::f32), out[2].to(DType::f32));
       }},
      {"gpt", [spec] { return std::make_shared<gpt::Gpt>(spec); },
       [spec](zero::Engine& e) {
         std::vector<double> v;
         for (int64_t i = 0; i < spec.block_size; ++i) v.push_back((7 * i) % spec.vocab_size);
         Tensor y = e(from_vector(v, {1, spec.block_size}, DType::i64));
         return mean(mul(y, y)).to(DType::f32);
       }},
  };
}

}  // namespace

ZT_BENCH(plan, "predicted vs measured per-rank bytes (model states, gathered peak)") {
  bench::Cli app("plan");
  std::vector<int> worlds = {1, 2, 4};
  std::string dtype = "f32";
  int64_t prefetch = 0, persistence = 0, layers = 4, embd = 128;
  app.add_option("--ranks", worlds, "numbers of thread ranks to plan and run at")
      ->check(zt::app::whole_number(1));
  app.add_option("--dtype", dtype, "parameter storage: f32 or bf16 (fp32 master)")
      ->check(CLI::IsMember({"f32", "bf16"}));
  app.add_option("--prefetch", prefetch, "stage3_prefetch_bucket_size (elements)")
      ->check(zt::app::whole_number(0));
  app.add_option("--persistence", persistence, "stage3_param_persistence_threshold")
      ->check(zt::app::whole_number(0));
  app.add_option("--gpt-layers", layers, "GPT blocks")->check(zt::app::whole_number(1));
  app.add_option("--gpt-embd", embd, "GPT width (a multiple of 4: its 4 heads)")
      ->check(zt::app::whole_number(1))
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            int64_t v = 0;  // read as the option reads it (a text it cannot read fails there)
            if (!CLI::detail::lexical_cast(text, v) || v % 4 == 0) return "";
            return "must be a multiple of 4, got " + text;
          },
          "MULTIPLE OF 4"));
  if (int rc = 0; !app.parse_args(args, &rc)) return rc;
  zero::Config cfg;
  cfg.stage3_prefetch_bucket_size = prefetch;
  cfg.stage3_param_persistence_threshold = persistence;
  cfg.stage3_max_reuse_distance = 0;
  if (dtype == "bf16") cfg.precision.bf16 = true;
  for (const Case& c : cases(layers, embd, cfg.precision.dtype()))
    for (int world : worlds)
      comm::run_threads(world, [&](comm::Communicator& comm) {
        manual_seed(1);
        std::shared_ptr<nn::Module> model;
        {
          zero::Init init(comm);
          model = c.build();
        }
        zero::Engine engine(model, comm, cfg, {});
        zero::MemoryPlan plan = zero::plan_memory(*model, world, cfg);
        zero::MemoryReport got = zero::measure_memory(engine, [&] { return c.loss(engine); });
        if (comm.rank() == 0)
          std::printf(
              "{\"bench\":\"plan\",\"model\":\"%s\",\"world\":%d,\"dtype\":\"%s\","
              "\"predicted\":%s,\"measured\":{\"model_state\":%ld,\"gathered_peak\":%ld}}\n",
              c.name.c_str(), world, dtype.c_str(), plan.json().c_str(),
              static_cast<long>(got.model_state()), static_cast<long>(got.gathered_param_peak));
      });
  return 0;
}
