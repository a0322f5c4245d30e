// Token layout, GPT sizes, tokenization with the frozen tokenizer, unigram entropy and
// layout-constrained sampling. Sequences are small integer arrays: the layout code works
// on host memory directly.
#include "apps/vqgpt/gpt_tokens.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "core/ops.h"

namespace zt::gpt {

TokenLayout::TokenLayout(int64_t codebook_size, int64_t frames, int64_t rows, int64_t cols)
    : k_(codebook_size), t_(frames), h_(rows), w_(cols) {
  ZT_CHECK(k_ >= 1 && t_ >= 1 && h_ >= 1 && w_ >= 1, "TokenLayout: codebook ", k_, ", frames ", t_,
           ", rows ", h_, ", cols ", w_, " must all be positive");
}

TokenLayout TokenLayout::of(const config::AppConfig& cfg) {
  const int64_t s = cfg.model.spatial_factor();
  return TokenLayout(cfg.model.codebook_size, cfg.model.code_frames(cfg.data.frames),
                     cfg.data.height / s, cfg.data.width / s);
}

int64_t TokenLayout::fixed_token(int64_t pos) const {
  if (pos == 0) return bos();
  if (pos == length() - 1) return eos();
  return (pos - 1) % (w_ + 1) == w_ ? eol() : -1;
}

Tensor TokenLayout::sequence(const Tensor& codes) const {
  ZT_CHECK(codes.dtype() == DType::i64, "TokenLayout: codes must be i64, got ",
           dtype_name(codes.dtype()));
  const Shape want3{codes.size(0), h_, w_}, want4{codes.size(0), t_, h_, w_};
  ZT_CHECK((t_ == 1 && codes.sizes() == want3) || codes.sizes() == want4, "TokenLayout: codes ",
           shape_str(codes.sizes()), " do not match the layout (B, ", t_, ", ", h_, ", ", w_,
           "); check data.frames/height/width against the tokenizer");
  if (!codes.device().is_cpu()) return sequence_on_device(codes);
  const Tensor c = codes.contiguous();
  const int64_t b = codes.size(0), len = length(), per = t_ * h_ * w_;
  Tensor out = empty({b, len}, DType::i64);
  const int64_t* src = c.data<int64_t>();
  int64_t* dst = out.data<int64_t>();
  for (int64_t i = 0; i < b; ++i) {
    const int64_t* in = src + i * per;
    int64_t* o = dst + i * len;
    *o++ = bos();
    for (int64_t r = 0; r < t_ * h_; ++r) {
      for (int64_t x = 0; x < w_; ++x) {
        const int64_t id = in[r * w_ + x];
        ZT_CHECK(id >= 0 && id < k_, "TokenLayout: code ", id, " outside the codebook [0, ", k_,
                 ")");
        *o++ = id;
      }
      *o++ = eol();
    }
    *o = eos();
  }
  return out;
}

Tensor TokenLayout::sequence_on_device(const Tensor& codes) const {
  ZT_CHECK(codes.dtype() == DType::i64 && codes.numel() == codes.size(0) * t_ * h_ * w_,
           "TokenLayout: codes ", shape_str(codes.sizes()), " ", dtype_name(codes.dtype()),
           " do not match the layout (B, ", t_, ", ", h_, ", ", w_, ") i64");
  const Device dev = codes.device();
  const int64_t b = codes.size(0), rows = t_ * h_;
  Tensor with_eol = cat({codes.reshape({b, rows, w_}),
                         full({b, rows, 1}, static_cast<double>(eol()), DType::i64, dev)},
                        2);
  return cat({full({b, 1}, static_cast<double>(bos()), DType::i64, dev),
              with_eol.reshape({b, rows * (w_ + 1)}),
              full({b, 1}, static_cast<double>(eos()), DType::i64, dev)},
             1);
}

Tensor TokenLayout::codes(const Tensor& sequences) const {
  ZT_CHECK(sequences.dtype() == DType::i64 && sequences.dim() == 2 && sequences.size(1) == length(),
           "TokenLayout: sequences ", shape_str(sequences.sizes()), " ",
           dtype_name(sequences.dtype()), " must be i64 (B, ", length(), ")");
  const Tensor s = sequences.to(Device::cpu()).contiguous();
  const int64_t b = s.size(0), len = length();
  Tensor out = empty({b, t_, h_, w_}, DType::i64);
  const int64_t* src = s.data<int64_t>();
  int64_t* dst = out.data<int64_t>();
  for (int64_t i = 0; i < b; ++i)
    for (int64_t p = 0; p < len; ++p) {
      const int64_t id = src[i * len + p], fixed = fixed_token(p);
      if (fixed >= 0) {
        ZT_CHECK(id == fixed, "TokenLayout: sequence ", i, " has token ", id, " at position ", p,
                 " where the layout puts ", fixed, " (BOS ", bos(), ", EOL ", eol(), ", EOS ",
                 eos(), ")");
        continue;
      }
      ZT_CHECK(id >= 0 && id < k_, "TokenLayout: sequence ", i, " has token ", id,
               " at code position ", p, "; codes are 0..", k_ - 1);
      *dst++ = id;
    }
  return out;
}

GptSpec gpt_spec(const config::AppConfig& cfg) {
  ZT_CHECK(cfg.gpt.has_value(), "vqgpt: the config has no gpt section (", cfg.source, ")");
  const config::GptConfig& g = *cfg.gpt;
  const TokenLayout layout = TokenLayout::of(cfg);
  GptSpec s;
  s.n_layer = g.n_layer;
  s.n_head = g.n_head;
  s.n_embd = g.n_embd;
  s.dropout = g.dropout;
  s.tie_embeddings = g.tie_embeddings;
  s.fused_qkv = g.fused_qkv;
  const int64_t k = cfg.model.codebook_size;
  s.vocab_size = g.vocab_size;
  ZT_CHECK(s.vocab_size >= layout.min_vocab(), cfg.source, ": gpt.vocab_size (", g.vocab_size,
           ") must hold the codebook (", k, ") plus BOS, EOL and EOS: set it to ",
           layout.min_vocab(), " or more, or leave it out");
  const int64_t need = layout.length() - 1;  // inputs: every token but the last
  s.block_size = g.block_size;
  ZT_CHECK(s.block_size >= need, cfg.source, ": gpt.block_size (", g.block_size,
           ") must hold a clip's sequence without its last token: BOS + ", layout.frames(), " x ",
           layout.rows(), " rows x (", layout.cols(), " codes + EOL) = ", need,
           "; set gpt.block_size to ", need, " or leave it out");
  return s;
}

Tensor tokenize(vq::VqModel& tokenizer, const Tensor& clips, const TokenLayout& layout) {
  ZT_CHECK(!tokenizer.is_training(),
           "vqgpt: the tokenizer is in training mode; it must stay frozen in eval mode "
           "(BatchNorm would use and update batch statistics)");
  ZT_CHECK(clips.dim() == 5, "vqgpt: clips ", shape_str(clips.sizes()), " must be (B, T, 3, H, W)");
  autograd::NoGradGuard no_grad;
  Tensor codes = clips.size(1) == 1 ? tokenizer.encode_image(clips.select(1, 0)).codes
                                    : tokenizer.encode(clips).codes;
  return layout.sequence(codes);
}

double unigram_entropy(const std::vector<int64_t>& counts) {
  double total = 0.0;
  for (int64_t c : counts) total += static_cast<double>(c);
  if (total == 0.0) return 0.0;
  double h = 0.0;
  for (int64_t c : counts)
    if (c > 0) {
      const double p = static_cast<double>(c) / total;
      h -= p * std::log(p);
    }
  return h;
}

NextLogits cached_next_logits(Gpt& gpt, Device device) {
  auto cache = std::make_shared<KvCache>();
  return [&gpt, device, cache](const Tensor& prefix) {
    autograd::NoGradGuard ng;  // a graph would keep every earlier cache alive
    const int64_t t = prefix.size(1);
    ZT_CHECK(t > cache->length, "cached_next_logits: prefixes must grow (", t, " after ",
             cache->length, " tokens)");
    Tensor logits;
    if (cache->length == 0) {  // the prompt in one call
      logits = gpt.decode(prefix.to(device), *cache);
    } else {  // then one token a call: the last sampled one and any placed after it
      while (cache->length < t)
        logits = gpt.decode(prefix.narrow(1, cache->length, 1).contiguous().to(device), *cache);
    }
    return logits.select(1, logits.size(1) - 1);
  };
}

NextLogits full_next_logits(std::function<Tensor(const Tensor&)> model) {
  return [model = std::move(model)](const Tensor& prefix) {
    const Tensor logits = model(prefix);
    ZT_CHECK(
        logits.dim() == 3 && logits.size(0) == prefix.size(0) && logits.size(1) == prefix.size(1),
        "sample: the model returned ", shape_str(logits.sizes()), " for ids ",
        shape_str(prefix.sizes()), "; expected (B, T, V)");
    return logits.select(1, prefix.size(1) - 1);
  };
}

Tensor sample_sequences(const NextLogits& next, const TokenLayout& layout, int64_t n,
                        const SampleOptions& o) {
  ZT_CHECK(n >= 1, "sample: need at least one sequence, got ", n);
  ZT_CHECK(o.temperature > 0.0, "sample: temperature must be > 0, got ", o.temperature);
  const int64_t len = layout.length(), k = layout.codebook_size();
  const int64_t top_k = o.top_k > 0 ? std::min(o.top_k, k) : k;
  ZT_CHECK(o.first_row >= 0, "sample: first_row must be >= 0, got ", o.first_row);
  const Generator gen(o.seed);
  Tensor seq = zeros({n, len}, DType::i64);
  int64_t* ids = seq.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) ids[i * len] = layout.bos();
  std::vector<double> p(static_cast<size_t>(k)), sorted(static_cast<size_t>(k));
  for (int64_t pos = 1; pos < len; ++pos) {
    const int64_t fixed = layout.fixed_token(pos);
    if (fixed >= 0) {  // EOL / EOS: placed, not sampled
      for (int64_t i = 0; i < n; ++i) ids[i * len + pos] = fixed;
      continue;
    }
    // Logits of position pos, (n, V); only the code ids count.
    const Tensor logits = next(seq.narrow(1, 0, pos).contiguous());
    ZT_CHECK(logits.dim() == 2 && logits.size(0) == n && logits.size(1) >= k,
             "sample: next-token logits ", shape_str(logits.sizes()), " for ids (", n, ", ", pos,
             "); expected (", n, ", V >= ", k, ")");
    const Tensor last = logits.to(Device::cpu()).to(DType::f64).contiguous();
    const double* l = last.data<double>();
    const int64_t v = logits.size(1);
    for (int64_t i = 0; i < n; ++i) {
      const double* row = l + i * v;
      for (int64_t c = 0; c < k; ++c)
        ZT_CHECK(std::isfinite(row[c]), "sample: the logit of code ", c, " is ", row[c],
                 " at position ", pos, " of sequence ", i,
                 ": the model's weights or activations are not finite (a diverged "
                 "checkpoint?); nothing can be sampled from it");
      // Top-k keeps every code whose logit is at least the k-th largest (ties included,
      // as nanoGPT's and Hugging Face's samplers do), so no tied code is favoured.
      double threshold = -std::numeric_limits<double>::infinity();
      if (top_k < k) {
        std::copy(row, row + k, sorted.begin());
        std::nth_element(sorted.begin(), sorted.begin() + (top_k - 1), sorted.end(),
                         std::greater<>());
        threshold = sorted[static_cast<size_t>(top_k - 1)];
      }
      const double mx = *std::max_element(row, row + k);
      double total = 0.0;
      for (int64_t c = 0; c < k; ++c) {
        p[static_cast<size_t>(c)] =
            row[c] >= threshold ? std::exp((row[c] - mx) / o.temperature) : 0.0;
        total += p[static_cast<size_t>(c)];
      }
      // Inverse CDF over the kept codes in id order; the last kept code takes what
      // rounding leaves above the sum.
      const double target =
          gen.uniform64(static_cast<uint64_t>((o.first_row + i) * len + pos)) * total;
      double acc = 0.0;
      int64_t pick = -1;
      for (int64_t c = 0; c < k; ++c) {
        if (p[static_cast<size_t>(c)] == 0.0) continue;
        pick = c;
        acc += p[static_cast<size_t>(c)];
        if (acc > target) break;
      }
      ids[i * len + pos] = pick;
    }
  }
  return seq;
}

}  // namespace zt::gpt
