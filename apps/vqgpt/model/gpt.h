// Gpt: a GPT-2-style decoder over the token ids of the frozen tokenizer (vqgpt). Token and
// learned position embeddings, n_layer pre-norm blocks (x + attn(ln_1(x)), x + mlp(ln_2(x)),
// causal multi-head attention without biases, MLP E -> 4E -> E with GELU), a final
// LayerNorm and a linear output head without bias. The attention has no biases because a
// key bias has an exactly-zero gradient in theory (softmax ignores a per-query constant):
// Adam would turn its rounding noise into full-size, rank-count-dependent updates. Every submodule
// is entered through call(), so the ZeRO-3 engine gathers each block's parameters just in time.
//
// Shape legend: B batch, T sequence length (<= block_size), E n_embd, V vocab_size.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "nn/attention.h"
#include "nn/container.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/norm.h"

namespace zt::gpt {

/// The transformer's sizes (resolved from config::GptConfig by gpt_spec() in
/// apps/vqgpt/gpt_tokens.h).
struct GptSpec {
  int64_t vocab_size = 0;  ///< V: codebook + special tokens (and any padding)
  int64_t block_size = 0;  ///< longest input sequence (position embeddings)
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t n_embd = 128;  ///< a multiple of n_head
  double dropout = 0.0;
  /// One (V, E) matrix for the token table and the output head, as GPT-2 (wte.weight;
  /// head.weight is the same tensor).
  bool tie_embeddings = false;
  /// One q/k/v projection per block, attn.qkv_proj (E -> 3E, GPT-2's c_attn), instead of
  /// attn.q_proj, k_proj and v_proj: one GEMM for three, and no sum of three input
  /// gradients (nn::MultiheadSelfAttentionOptions::fused_qkv).
  bool fused_qkv = false;

  /// Parameter elements of the model, counted without building it.
  int64_t count_parameters() const;
};

/// MLP of a block: fc (E -> 4E), GELU (tanh approximation, as GPT-2), proj (4E -> E).
class GptMlp : public nn::UnaryModule {
 public:
  GptMlp(int64_t n_embd, double dropout);
  std::shared_ptr<nn::Linear> fc, proj;
  std::shared_ptr<nn::Dropout> drop;

 protected:
  Tensor forward(const Tensor& x) override;  // (B, T, E) -> (B, T, E)
};

/// One pre-norm block: x + attn(ln_1(x)), then x + mlp(ln_2(x)). With a KV cache:
/// call({x, k_past, v_past}) -> {y, k, v} (nn::MultiheadSelfAttention's incremental form).
class GptBlock : public nn::UnaryModule {
 public:
  explicit GptBlock(const GptSpec& spec);
  std::shared_ptr<nn::LayerNorm> ln_1, ln_2;
  std::shared_ptr<nn::MultiheadSelfAttention> attn;  // causal
  std::shared_ptr<GptMlp> mlp;
  std::shared_ptr<nn::Dropout> drop;  // on the attention branch

 protected:
  Tensor forward(const Tensor& x) override;  // (B, T, E) -> (B, T, E)
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override;

 private:
  /// x + drop(attended), then + mlp(ln_2(.)): the block after its attention.
  Tensor residuals(const Tensor& x, const Tensor& attended);
};

/// The keys and values of every block for the tokens decoded so far (Gpt::decode).
struct KvCache {
  std::vector<Tensor> k, v;  // per block, (B, H, length, Dh); empty before the first call
  int64_t length = 0;        // tokens held
};

/// ids i64 (B, T) -> logits (B, T, V). Key names: wte.weight, wpe.weight, blocks.{i}.*,
/// ln_f.*, head.weight (with tie_embeddings the same tensor as wte.weight, which
/// named_parameters() lists alone). A new Gpt holds each layer's PyTorch default
/// initialization; init_gpt2() gives it GPT-2's.
class Gpt : public nn::UnaryModule {
 public:
  explicit Gpt(const GptSpec& spec);
  const GptSpec& spec() const { return spec_; }
  std::string extra_repr() const override;
  /// Incremental decoding: ids (B, Tn) are the tokens after the cache's `length` ->
  /// logits (B, Tn, V), the same rows a forward over the whole sequence gives; the cache
  /// then holds them too. The first call may pass many tokens (the prompt), later ones one
  /// each. Every submodule is entered through call(), as in forward(). A call that fails
  /// leaves the cache as it was.
  Tensor decode(const Tensor& ids, KvCache& cache);

  std::shared_ptr<nn::Embedding> wte;  // (V, E)
  std::shared_ptr<nn::Embedding> wpe;  // (block_size, E)
  std::shared_ptr<nn::Dropout> drop;
  std::shared_ptr<nn::ModuleList> blocks;
  std::shared_ptr<nn::LayerNorm> ln_f;
  std::shared_ptr<nn::Linear> head;  // (V, E), no bias

 protected:
  Tensor forward(const Tensor& ids) override;

 private:
  /// Token plus position embeddings of ids (B, T) at positions first .. first + T - 1.
  Tensor embed(const Tensor& ids, int64_t first);
  GptSpec spec_;
  // Position ids 0 .. block_size - 1 on the device of the last call, made once there: a
  // GPU forward then copies nothing from the host (a CUDA graph could not hold the copy).
  Tensor positions_;
};

/// GPT-2's initialization of the module at `name` in a Gpt (its path as named_modules()
/// gives it), drawn from the default generator: Linear and Embedding weights N(0, 0.02),
/// except the projections that end a residual branch (blocks.{i}.attn.out_proj and
/// blocks.{i}.mlp.proj), N(0, 0.02 / sqrt(2 n_layer)), so that the residual stream's
/// variance does not grow with depth; Linear biases 0; LayerNorms keep their 1 and 0.
/// It writes the module's own tensors only, so it can run one module at a time:
/// zero::apply_gathered(model, comm, ...) for a partitioned Gpt, or a loop over
/// named_modules() for a whole one.
void init_gpt2(const std::string& name, nn::Module& m, int64_t n_layer);

}  // namespace zt::gpt
