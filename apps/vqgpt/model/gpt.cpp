// The GPT decoder's layers. Position ids are the first T of 0 .. block_size - 1, made once
// per device; the causal mask lives in nn::MultiheadSelfAttention.
#include "apps/vqgpt/model/gpt.h"

#include <cmath>

#include "nn/init.h"

namespace zt::gpt {

int64_t GptSpec::count_parameters() const {
  const int64_t e = n_embd;
  const int64_t ln = 2 * e;
  const int64_t attn = 4 * e * e;  // no biases
  const int64_t mlp = (e * 4 * e + 4 * e) + (4 * e * e + e);
  return vocab_size * e + block_size * e + n_layer * (2 * ln + attn + mlp) + ln +
         (tie_embeddings ? 0 : vocab_size * e);
}

GptMlp::GptMlp(int64_t n_embd, double dropout) : UnaryModule("GptMlp") {
  // fc applies the tanh GELU itself (one fused op; same parameters as a plain Linear).
  fc = register_module(
      "fc", std::make_shared<nn::Linear>(nn::LinearOptions(n_embd, 4 * n_embd).gelu_tanh(true)));
  proj = register_module("proj", std::make_shared<nn::Linear>(4 * n_embd, n_embd));
  drop = register_module("drop", std::make_shared<nn::Dropout>(dropout));
}

Tensor GptMlp::forward(const Tensor& x) {
  return (*drop)((*proj)((*fc)(x)));
}

GptBlock::GptBlock(const GptSpec& s) : UnaryModule("GptBlock") {
  ln_1 = register_module("ln_1", std::make_shared<nn::LayerNorm>(nn::LayerNormOptions({s.n_embd})));
  attn = register_module("attn", std::make_shared<nn::MultiheadSelfAttention>(
                                     nn::MultiheadSelfAttentionOptions(s.n_embd, s.n_head)
                                         .causal(true)
                                         .bias(false)
                                         .fused_qkv(s.fused_qkv)));
  drop = register_module("drop", std::make_shared<nn::Dropout>(s.dropout));
  ln_2 = register_module("ln_2", std::make_shared<nn::LayerNorm>(nn::LayerNormOptions({s.n_embd})));
  mlp = register_module("mlp", std::make_shared<GptMlp>(s.n_embd, s.dropout));
}

Tensor GptBlock::forward(const Tensor& x) {
  return residuals(x, (*attn)((*ln_1)(x)));
}

std::vector<Tensor> GptBlock::forward(const std::vector<Tensor>& inputs) {
  if (inputs.size() == 1) return {forward(inputs[0])};
  ZT_CHECK(inputs.size() == 3, "GptBlock: takes {x} or {x, k_past, v_past}, got ", inputs.size(),
           " inputs");
  std::vector<Tensor> a = attn->call({(*ln_1)(inputs[0]), inputs[1], inputs[2]});
  return {residuals(inputs[0], a[0]), a[1], a[2]};
}

Tensor GptBlock::residuals(const Tensor& x, const Tensor& attended) {
  Tensor h = x + (*drop)(attended);
  return h + (*mlp)((*ln_2)(h));
}

Gpt::Gpt(const GptSpec& s) : UnaryModule("Gpt"), spec_(s) {
  ZT_CHECK(s.vocab_size > 0 && s.block_size > 0, "Gpt: vocab_size (", s.vocab_size,
           ") and block_size (", s.block_size, ") must be positive");
  ZT_CHECK(s.n_layer > 0 && s.n_head > 0 && s.n_embd % s.n_head == 0, "Gpt: n_embd (", s.n_embd,
           ") must be a multiple of n_head (", s.n_head, ") and n_layer (", s.n_layer,
           ") positive");
  wte = register_module("wte", std::make_shared<nn::Embedding>(s.vocab_size, s.n_embd));
  wpe = register_module("wpe", std::make_shared<nn::Embedding>(s.block_size, s.n_embd));
  drop = register_module("drop", std::make_shared<nn::Dropout>(s.dropout));
  blocks = register_module("blocks", std::make_shared<nn::ModuleList>());
  for (int64_t i = 0; i < s.n_layer; ++i) blocks->push_back(std::make_shared<GptBlock>(s));
  ln_f = register_module("ln_f", std::make_shared<nn::LayerNorm>(nn::LayerNormOptions({s.n_embd})));
  head = register_module(
      "head", std::make_shared<nn::Linear>(nn::LinearOptions(s.n_embd, s.vocab_size).bias(false)));
  if (s.tie_embeddings) {
    wte->weight = head->weight;
    wte->replace_tensor("weight", head->weight);
  }
}

std::string Gpt::extra_repr() const {
  return "vocab=" + std::to_string(spec_.vocab_size) +
         ", block_size=" + std::to_string(spec_.block_size) +
         ", n_layer=" + std::to_string(spec_.n_layer) + ", n_head=" + std::to_string(spec_.n_head) +
         ", n_embd=" + std::to_string(spec_.n_embd) + (spec_.tie_embeddings ? ", tied" : "");
}

Tensor Gpt::embed(const Tensor& ids, int64_t first) {
  ZT_CHECK(ids.dim() == 2, "Gpt: ids ", shape_str(ids.sizes()), " must be (B, T)");
  const int64_t t = ids.size(1);
  ZT_CHECK(t >= 1, "Gpt: ids ", shape_str(ids.sizes()), " hold no token (T = 0)");
  ZT_CHECK(first + t <= spec_.block_size, "Gpt: sequence length ", first + t,
           " exceeds block_size ", spec_.block_size,
           "; raise gpt.block_size (it must hold a clip's tokens, see the log)");
  if (!positions_.defined() || positions_.device() != ids.device())
    positions_ = arange(0, static_cast<double>(spec_.block_size), 1.0, DType::i64, ids.device());
  const Tensor pos = positions_.narrow(0, first, t);  // (T)
  return (*drop)((*wte)(ids) + (*wpe)(pos));          // (B, T, E) + (T, E)
}

Tensor Gpt::forward(const Tensor& ids) {
  Tensor x = embed(ids, 0);
  for (const auto& b : *blocks) x = (*b)(x);
  return (*head)((*ln_f)(x));  // (B, T, V)
}

Tensor Gpt::decode(const Tensor& ids, KvCache& cache) {
  Tensor x = embed(ids, cache.length);
  const auto n = static_cast<size_t>(spec_.n_layer);
  KvCache next{std::vector<Tensor>(n), std::vector<Tensor>(n), cache.length + ids.size(1)};
  size_t i = 0;
  for (const auto& b : *blocks) {
    const bool first = cache.k.empty();
    std::vector<Tensor> out =
        b->call({x, first ? Tensor() : cache.k[i], first ? Tensor() : cache.v[i]});
    x = out[0];
    next.k[i] = out[1];
    next.v[i] = out[2];
    ++i;
  }
  Tensor logits = (*head)((*ln_f)(x));  // (B, Tn, V)
  cache = std::move(next);              // only once every block took the tokens
  return logits;
}

void init_gpt2(const std::string& name, nn::Module& m, int64_t n_layer) {
  constexpr double kStd = 0.02;
  const auto ends_with = [&](const std::string& suffix) {
    return name.size() >= suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (auto* linear = dynamic_cast<nn::Linear*>(&m)) {
    const bool ends_residual = ends_with(".attn.out_proj") || ends_with(".mlp.proj");
    nn::init::normal_(linear->weight, 0.0,
                      ends_residual ? kStd / std::sqrt(2.0 * static_cast<double>(n_layer)) : kStd);
    if (linear->bias.defined()) nn::init::zeros_(linear->bias);
  } else if (auto* embedding = dynamic_cast<nn::Embedding*>(&m)) {
    nn::init::normal_(embedding->weight, 0.0, kStd);
  }
}

}  // namespace zt::gpt
