// Token sequences for vqgpt, laid out as Emu3 lays out images: BOS, then for each row of
// codes the w code ids followed by an end-of-row token (EOL), frame after frame, then EOS.
// Ids: codes 0..K-1, BOS = K, EOL = K + 1, EOS = K + 2, so the vocabulary holds K + 3.
// Also here: resolving the GPT's sizes from the config, tokenizing clips with the frozen
// tokenizer, the unigram entropy of a token stream, and layout-constrained sampling.
//
// Shape legend: B batch, T' code frames, h/w code rows/columns, K codebook size,
// L = 2 + T' * h * (w + 1) tokens per clip.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "apps/vqgpt/model/gpt.h"
#include "apps/vqtok/model/vq_model.h"
#include "configs/app_config.h"

namespace zt::gpt {

/// Where each token of a clip's sequence comes from.
class TokenLayout {
 public:
  TokenLayout(int64_t codebook_size, int64_t frames, int64_t rows, int64_t cols);
  /// The layout of cfg's clips: T' = frames / temporal factor (1 for images), h, w.
  static TokenLayout of(const config::AppConfig& cfg);

  int64_t codebook_size() const { return k_; }
  int64_t bos() const { return k_; }
  int64_t eol() const { return k_ + 1; }
  int64_t eos() const { return k_ + 2; }
  /// K + 3: the smallest vocabulary that holds the layout.
  int64_t min_vocab() const { return k_ + 3; }
  /// Tokens per clip, L.
  int64_t length() const { return 2 + t_ * h_ * (w_ + 1); }
  int64_t frames() const { return t_; }
  int64_t rows() const { return h_; }
  int64_t cols() const { return w_; }
  /// The fixed token at position `pos` (BOS, EOL or EOS), or -1 where a code goes.
  int64_t fixed_token(int64_t pos) const;

  /// codes i64 (B, T', h, w) or (B, h, w) -> sequences i64 (B, L), on the codes' device.
  /// CPU codes are checked (each in [0, K)); codes elsewhere go through
  /// sequence_on_device.
  Tensor sequence(const Tensor& codes) const;
  /// The same sequences built by tensor ops on the codes' device (a GPU step reads
  /// nothing back, and a CUDA graph can hold it); the codes are not range-checked, as
  /// the tokenizer's nearest-code search cannot produce one outside [0, K).
  Tensor sequence_on_device(const Tensor& codes) const;
  /// sequences i64 (B, L) -> codes i64 (B, T', h, w); error naming the first position
  /// whose token breaks the layout (a code where EOL belongs, an id >= K, ...).
  Tensor codes(const Tensor& sequences) const;

 private:
  int64_t k_, t_, h_, w_;
};

/// The transformer's sizes for cfg: gpt.vocab_size (at least K + 3) and gpt.block_size (at
/// least L - 1 inputs). The config loader fills both in and checks them; a config built in
/// code with either too small is an error naming the key and the value needed.
GptSpec gpt_spec(const config::AppConfig& cfg);

/// clips (B, T, 3, H, W) (T = 1: images) -> sequences i64 (B, L), with the frozen tokenizer:
/// under NoGradGuard, error unless it is in eval mode with requires_grad off. Runs no
/// collective (the tokenizer must be a replica, not partitioned).
Tensor tokenize(vq::VqModel& tokenizer, const Tensor& clips, const TokenLayout& layout);

/// Entropy in nats of the distribution `counts` describes (0 for an empty histogram).
double unigram_entropy(const std::vector<int64_t>& counts);

/// Sampling settings.
struct SampleOptions {
  double temperature = 1.0;  ///< > 0
  /// Keep the codes whose logit is at least the k-th largest (ties with it included);
  /// 0: all.
  int64_t top_k = 0;
  uint64_t seed = 0;
  /// The index of the first sequence among all sampled: sequence i draws its numbers at
  /// its own place (first_row + i) in the seed's stream, so it is the same whatever is
  /// sampled beside it (how many, on how many ranks).
  int64_t first_row = 0;
};

/// The logits (B, V) of the position after prefix ids (B, T); a sampler calls it with
/// growing T, each prefix extending the last (by more than one token where the layout
/// places EOL or EOS without sampling).
using NextLogits = std::function<Tensor(const Tensor& prefix)>;
/// From `gpt` with a KV cache: each call runs only the tokens the cache lacks (the first
/// call the whole prefix), so a sequence of L tokens costs L token-steps, not L^2 / 2.
/// Inputs go to the Gpt's device.
NextLogits cached_next_logits(Gpt& gpt, Device device);
/// From a whole-sequence model, ids (B, T) -> logits (B, T, V): each call runs the whole
/// prefix again (no cache).
NextLogits full_next_logits(std::function<Tensor(const Tensor&)> model);

/// Samples `n` sequences (n, L), one position at a time: BOS, EOL and EOS are placed by
/// the layout (as Emu3's prefix-constrained decoding does) and code positions draw only
/// from ids 0..K-1 of `next`'s logits. Run without gradients.
Tensor sample_sequences(const NextLogits& next, const TokenLayout& layout, int64_t n,
                        const SampleOptions& options);

}  // namespace zt::gpt
