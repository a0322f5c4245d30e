// Embedding: a lookup table of V vectors of size E. Legend: V vocabulary, E embedding dim.
#pragma once

#include <optional>

#include "nn/module.h"
#include "nn/options.h"

namespace zt::nn {

/// Options for Embedding: EmbeddingOptions(V, E).
struct EmbeddingOptions {
  EmbeddingOptions(int64_t num_embeddings, int64_t embedding_dim)
      : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {}
  ZT_ARG(int64_t, num_embeddings);
  ZT_ARG(int64_t, embedding_dim);
  /// A row in [-V, V) (negative counts from the end) that ids may name but that is not
  /// learned: it starts at zero and gets no gradient (a padding token's).
  ZT_ARG(std::optional<int64_t>, padding_idx) = std::nullopt;
};

/// ids i64 or i32 (...) -> (..., E). weight (V, E) initialized N(0, 1) as PyTorch, the
/// padding_idx row 0.
class Embedding : public UnaryModule {
 public:
  explicit Embedding(const EmbeddingOptions& options);
  Embedding(int64_t num_embeddings, int64_t embedding_dim)
      : Embedding(EmbeddingOptions(num_embeddings, embedding_dim)) {}
  /// Re-draws weight N(0, 1) in place, the padding_idx row 0.
  void reset_parameters();
  std::string extra_repr() const override;

  EmbeddingOptions options;  // padding_idx, when given, in [0, V)
  Tensor weight;             // (V, E)

 protected:
  Tensor forward(const Tensor& ids) override;
};

}  // namespace zt::nn
