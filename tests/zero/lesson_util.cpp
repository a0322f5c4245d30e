// Lesson helpers.
#include "zero/lesson_util.h"

#include <algorithm>

namespace zt::lesson {

Mixed::Mixed() : nn::UnaryModule("Mixed") {
  conv3 = register_module(
      "conv3", std::make_shared<nn::Conv3d>(nn::Conv3dOptions(3, 4, {1, 3, 3}).padding({0, 1, 1})));
  conv2 = register_module(
      "conv2", std::make_shared<nn::Conv2d>(nn::Conv2dOptions(4, 6, 3).stride(2).padding(1)));
  gn = register_module("gn", std::make_shared<nn::GroupNorm>(nn::GroupNormOptions(2, 6)));
  embed = register_module("embed", std::make_shared<nn::Linear>(6, 8));
  ln = register_module("ln", std::make_shared<nn::LayerNorm>(nn::LayerNormOptions({8})));
  attn = register_module("attn", std::make_shared<nn::MultiheadSelfAttention>(
                                     nn::MultiheadSelfAttentionOptions(8, 2).bias(false)));
  head = register_module("head", std::make_shared<nn::Linear>(8, 5));
}

Tensor Mixed::forward(const Tensor& x) {
  int64_t B = x.size(0), T = x.size(2);
  Tensor h = (*conv3)(x);                                                    // (B, 4, T, 6, 6)
  h = h.permute({0, 2, 1, 3, 4}).reshape({B * T, 4, 6, 6});                  // frames as batch
  h = silu((*gn)((*conv2)(h)));                                              // (B*T, 6, 3, 3)
  h = h.reshape({B, T, 6, 9}).permute({0, 1, 3, 2}).reshape({B, T * 9, 6});  // tokens
  h = (*attn)((*ln)((*embed)(h)));                                           // (B, 18, 8)
  return (*head)(mean(h, {1}));                                              // (B, 5)
}

TanhStack::TanhStack(int64_t depth, int64_t width) : nn::UnaryModule("TanhStack") {
  for (int64_t i = 0; i < depth; ++i)
    layers.push_back(
        register_module("l" + std::to_string(i), std::make_shared<nn::Linear>(width, width)));
}

Tensor TanhStack::forward(const Tensor& x) {
  Tensor h = x;
  for (auto& l : layers) h = tanh((*l)(h));
  return h;
}

std::pair<Tensor, Tensor> batch(int64_t B, int seed) {
  Generator g(1000 + static_cast<uint64_t>(seed));
  Tensor x = randn({B, 3, 2, 6, 6}, g);
  Tensor y = randn({B, 5}, g);
  return {x, y};
}

Tensor rank_slice(const Tensor& t, const comm::Communicator& comm) {
  const int64_t local = t.size(0) / comm.size();
  return t.narrow(0, comm.rank() * local, local);
}

::testing::AssertionResult shard_is_slice(const Tensor& shard, const zero::Partition& part,
                                          int rank, const Tensor& full, double rtol, double atol) {
  const int64_t valid = part.shard_valid(rank);
  if (valid == 0) return ::testing::AssertionSuccess();
  return test::all_close(shard.narrow(0, 0, valid),
                         full.reshape({-1}).narrow(0, part.shard_offset(rank), valid), rtol, atol);
}

zero::OptimizerConfig adamw() {
  zero::OptimizerConfig o;
  o.lr = 1e-2;
  o.weight_decay = 0.01;
  return o;
}

size_t index_of(const std::vector<std::string>& events, const std::string& e, size_t from) {
  if (from >= events.size()) return std::string::npos;
  auto it = std::find(events.begin() + static_cast<int64_t>(from), events.end(), e);
  return it == events.end() ? std::string::npos : static_cast<size_t>(it - events.begin());
}

int count_of(const std::vector<std::string>& events, const std::string& e) {
  return static_cast<int>(std::count(events.begin(), events.end(), e));
}

std::vector<std::string> modules_of(const std::vector<std::string>& events,
                                    const std::string& kind) {
  std::vector<std::string> out;
  for (const std::string& e : events)
    if (e.rfind(kind, 0) == 0) out.push_back(e.substr(kind.size()));
  return out;
}

std::vector<std::pair<std::string, Tensor>> full_parameters(nn::Module& m,
                                                            comm::Communicator& comm) {
  std::vector<std::pair<std::string, Tensor>> out;
  zero::GatheredParameters g(m, comm);
  for (auto& [name, p] : m.named_parameters()) out.emplace_back(name, p.detach().clone());
  return out;
}

zero::Config eager_release_config() {
  zero::Config c;
  c.stage3_param_persistence_threshold = 0;
  c.stage3_max_reuse_distance = 0;
  c.stage3_prefetch_bucket_size = 0;
  return c;
}

zero::Config prefetch_config() {
  zero::Config c = eager_release_config();
  c.stage3_prefetch_bucket_size = 1'000'000;
  return c;
}

}  // namespace zt::lesson

namespace zt::lesson {

TokenizerLike::TokenizerLike() : nn::UnaryModule("TokenizerLike") {
  conv = register_module(
      "conv", std::make_shared<nn::Conv3d>(nn::Conv3dOptions(3, 8, 3).padding({1, 1, 1})));
  bn = register_module("bn", std::make_shared<nn::BatchNorm3d>(nn::BatchNormOptions(8)));
  gn = register_module("gn", std::make_shared<nn::GroupNorm>(nn::GroupNormOptions(4, 8)));
}

Tensor TokenizerLike::forward(const Tensor& x) {
  return silu((*gn)((*bn)((*conv)(x))));
}

void load_pretrained_stats(TokenizerLike& t) {
  autograd::NoGradGuard ng;
  t.bn->running_mean.copy_(add(mul(arange(0, 8), 0.1), -0.3));
  t.bn->running_var.copy_(mul(arange(1, 9), 0.25));
  t.bn->num_batches_tracked.fill_(1000);
}

std::vector<std::string> hashes_across_ranks(const Tensor& t, comm::Communicator& comm) {
  return comm.all_gather_bytes(std::to_string(zero::tensor_hash(t)));
}

std::vector<std::vector<double>> gather_doubles(const std::vector<double>& local,
                                                comm::Communicator& comm) {
  const std::vector<std::string> bytes = comm.all_gather_bytes(
      std::string(reinterpret_cast<const char*>(local.data()), local.size() * sizeof(double)));
  std::vector<std::vector<double>> out;
  for (const std::string& b : bytes) {
    const double* v = reinterpret_cast<const double*>(b.data());
    out.emplace_back(v, v + b.size() / sizeof(double));
  }
  return out;
}

KernelCalls kernel_calls(KernelProfile& profile) {
  KernelCalls c;
  for (const KernelProfile::Entry& e : profile.totals()) c[e.kernel] = e.calls;
  return c;
}

}  // namespace zt::lesson
