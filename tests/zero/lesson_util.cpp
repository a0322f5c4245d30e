// Lesson helpers.
#include "zero/lesson_util.h"

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

KernelCalls kernel_calls(KernelProfile& profile) {
  KernelCalls c;
  for (const KernelProfile::Entry& e : profile.totals()) c[e.kernel] = e.calls;
  return c;
}

}  // namespace zt::lesson
