// Lesson 8's training loop: the same training of the Mixed model once in one process on
// the whole batch (train_single) and once under ZeRO-3 with the batch split across ranks
// (train_zero_and_compare), for test_08_equivalence.cpp and its mpirun twin in mpi/.
// Side by side, the two loops differ only where ZeRO-3 says they should:
//  - each rank trains on its slice of every micro-batch, and its loss is NOT rescaled:
//    the reduce-scatter averages the ranks' gradients, which is the gradient of the whole
//    batch's mean loss;
//  - step() is called after every micro-batch; the engine counts them and updates at the
//    last of each gradient_accumulation_steps, scaling by 1/gas itself (the plain loop
//    divides each loss by gas);
//  - clipping is a config setting, applied to the global norm over every rank's shards;
//  - the result is compared on the full, gathered parameters.
#include "zero/lesson_util.h"

namespace zt::lesson {

ReplicatedFront::ReplicatedFront(comm::Communicator* comm) : nn::UnaryModule("ReplicatedFront") {
  if (comm) {
    zero::Replicated rep(*comm);
    front = register_module("front", std::make_shared<nn::LayerNorm>(nn::LayerNormOptions({6})));
  } else {
    front = register_module("front", std::make_shared<nn::LayerNorm>(nn::LayerNormOptions({6})));
  }
  mixed = register_module("mixed", std::make_shared<Mixed>());
}

Tensor ReplicatedFront::forward(const Tensor& x) {
  return (*mixed)((*front)(x));
}

namespace {
constexpr int64_t kGlobalBatch = 12;  // divisible by 1, 2, 3, 4
constexpr int kSteps = 5;

zero::OptimizerConfig optimizer(const EquivalenceSetup& s) {
  zero::OptimizerConfig o;
  o.type = s.optimizer;
  o.lr = 1e-2;
  o.weight_decay = 0.01;
  o.momentum = 0;  // sgd: the update is lr x (gradient + weight_decay x parameter)
  o.weight_decay_1d = s.decay_1d;
  if (s.param_groups)
    o.param_groups = {{.params = {"*conv2.*"}, .lr_scale = 0.5, .weight_decay = 0.0}};
  return o;
}

// The model, built where the caller's scopes say (comm: null for a plain one).
std::shared_ptr<nn::Module> make_model(const EquivalenceSetup& s, comm::Communicator* comm) {
  if (s.replicated_front) return std::make_shared<ReplicatedFront>(comm);
  return std::make_shared<Mixed>();
}

// Micro-batch `micro` of step `step`: the same data whoever trains on it. 16 is more than
// any gas used, so two (step, micro) pairs never share a seed.
std::pair<Tensor, Tensor> micro_batch(int step, int micro) {
  return batch(kGlobalBatch, step * 16 + micro);
}
}  // namespace

std::vector<std::pair<std::string, Tensor>> train_single(const EquivalenceSetup& s) {
  manual_seed(11);
  auto m = make_model(s, nullptr);
  auto opt = optim::make_optimizer(optimizer(s), m->named_parameters());
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

void train_zero_and_compare(comm::Communicator& comm, const EquivalenceSetup& s,
                            const std::vector<std::pair<std::string, Tensor>>& expect) {
  int N = comm.size();
  manual_seed(11);
  std::shared_ptr<nn::Module> m;
  {
    zero::Init init(comm);
    m = make_model(s, &comm);
  }
  zero::Config cfg;
  cfg.gradient_accumulation_steps = s.gas;
  cfg.gradient_clipping = s.clip;
  cfg.reduce_bucket_size = 300;           // several buckets per backward
  cfg.stage3_prefetch_bucket_size = 500;  // prefetch on
  cfg.stage3_max_reuse_distance = 0;
  cfg.stage3_param_persistence_threshold = 10;  // the small biases persist
  zero::Engine engine(m, comm, cfg, optimizer(s));
  // The optimizer sees flat shards; the engine decides weight decay by the full shapes.
  for (const auto& [name, p] : m->named_parameters()) {
    const bool grouped = s.param_groups && name.find("conv2.") != std::string::npos;
    EXPECT_EQ(engine.optimizer().settings(name).weight_decay,
              !grouped && (s.decay_1d || p.dim() >= 2) ? 0.01 : 0.0)
        << name;
    EXPECT_EQ(engine.optimizer().settings(name).lr_scale, grouped ? 0.5 : 1.0) << name;
  }
  for (int step = 0; step < kSteps; ++step) {
    for (int k = 0; k < s.gas; ++k) {
      auto [x, y] = micro_batch(step, k);  // the global micro-batch; this rank's rows of it
      engine.backward(mse_loss(engine(rank_slice(x, comm)), rank_slice(y, comm)));
      bool stepped = engine.step();
      EXPECT_EQ(stepped, k == s.gas - 1);
    }
  }
  if (s.clip > 0) {
    EXPECT_GT(engine.last_grad_norm(), s.clip) << "clipping was active";
  }
  // The settings above did what they say: prefetches were issued along the trace, and
  // each backward filled several buckets.
  EXPECT_GT(engine.stats().prefetches_issued, 0);
  EXPECT_GT(engine.stats().buckets_reduced, kSteps * s.gas);
  auto got = full_parameters(*m, comm);
  ASSERT_EQ(got.size(), expect.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_CLOSE(got[i].second, expect[i].second, 1e-5, 1e-6)
        << got[i].first << " on rank " << comm.rank() << " of " << N;
}

}  // namespace zt::lesson
