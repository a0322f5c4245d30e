// Lesson 7 — equivalence.
// Invariant: ZeRO-3 changes where state lives, not what is computed. Training the Mixed
// model (Linear, Conv2d, Conv3d, GroupNorm, LayerNorm, attention) for 5 AdamW steps on
// N = 1..4 thread ranks — the global batch split across ranks — gives the parameters of
// plain single-process training on the whole batch, to 1e-5 relative in f32; also with
// gradient accumulation and with gradient clipping active.
#include "zero/lesson_util.h"

using namespace zt;

namespace {
constexpr int64_t kGlobalBatch = 12;  // divisible by 1, 2, 3, 4
constexpr int kSteps = 5;

struct Setup {
  int gas = 1;        // gradient accumulation steps
  double clip = 0.0;  // gradient clipping
};

zero::OptimizerConfig adamw() {
  zero::OptimizerConfig o;
  o.lr = 1e-2;
  o.weight_decay = 0.01;
  return o;
}

// Micro-batch `micro` of step `step`: the same data whoever trains on it.
std::pair<Tensor, Tensor> micro_batch(int step, int micro) {
  return lesson::batch(kGlobalBatch, step * 16 + micro);
}

std::vector<std::pair<std::string, Tensor>> train_single(const Setup& s) {
  manual_seed(11);
  auto m = std::make_shared<lesson::Mixed>();
  auto opt = zero::make_optimizer(adamw(), m->named_parameters());
  for (int step = 0; step < kSteps; ++step) {
    m->zero_grad();
    for (int k = 0; k < s.gas; ++k) {
      auto [x, y] = micro_batch(step, k);
      mul(mse_loss((*m)(x), y), 1.0 / s.gas).backward();
    }
    if (s.clip > 0) optim::clip_grad_norm(m->parameters(), s.clip);
    opt->step();
  }
  std::vector<std::pair<std::string, Tensor>> out;
  for (auto& [n, p] : m->named_parameters()) out.emplace_back(n, p.detach().clone());
  return out;
}

void check_equivalence(int N, const Setup& s) {
  auto expect = train_single(s);
  comm::run_threads(N, [&](comm::Communicator& comm) {
    manual_seed(11);
    std::shared_ptr<lesson::Mixed> m;
    {
      zero::Init init(comm);
      m = std::make_shared<lesson::Mixed>();
    }
    zero::Config cfg;
    cfg.gradient_accumulation_steps = s.gas;
    cfg.gradient_clipping = s.clip;
    cfg.reduce_bucket_size = 300;           // several buckets per backward
    cfg.stage3_prefetch_bucket_size = 500;  // prefetch on
    cfg.stage3_max_reuse_distance = 0;
    cfg.stage3_param_persistence_threshold = 10;  // the small biases persist
    zero::Engine engine(m, comm, cfg, adamw());
    int64_t local = kGlobalBatch / N;
    for (int step = 0; step < kSteps; ++step) {
      for (int k = 0; k < s.gas; ++k) {
        auto [x, y] = micro_batch(step, k);
        Tensor xs = x.narrow(0, comm.rank() * local, local);
        Tensor ys = y.narrow(0, comm.rank() * local, local);
        engine.backward(mse_loss(engine(xs), ys));
        bool stepped = engine.step();
        EXPECT_EQ(stepped, k == s.gas - 1);
      }
    }
    if (s.clip > 0) {
      EXPECT_GT(engine.last_grad_norm(), s.clip) << "clipping was active";
    }
    auto got = lesson::full_parameters(*m, comm);
    ASSERT_EQ(got.size(), expect.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_CLOSE(got[i].second, expect[i].second, 1e-5, 1e-6)
          << got[i].first << " on rank " << comm.rank() << " of " << N;
  });
}
}  // namespace

TEST(Lesson07Equivalence, PlainAdamW) {
  for (int N : {1, 2, 3, 4}) check_equivalence(N, {});
}

TEST(Lesson07Equivalence, WithGradientAccumulation) {
  check_equivalence(3, {.gas = 2});
}

TEST(Lesson07Equivalence, WithClipping) {
  check_equivalence(4, {.clip = 0.05});
}
