// Embedding: a lookup table of V vectors of size E. Legend: V vocabulary, E embedding dim.
#pragma once

#include "nn/module.h"
#include "nn/options.h"

namespace zt::nn {

/// Options for Embedding: EmbeddingOptions(V, E).
struct EmbeddingOptions {
  EmbeddingOptions(int64_t num_embeddings, int64_t embedding_dim)
      : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {}
  ZT_ARG(int64_t, num_embeddings);
  ZT_ARG(int64_t, embedding_dim);
};

/// ids i64 (...) -> (..., E). weight (V, E) initialized N(0, 1) as PyTorch.
class Embedding : public UnaryModule {
 public:
  explicit Embedding(const EmbeddingOptions& options);
  Embedding(int64_t num_embeddings, int64_t embedding_dim)
      : Embedding(EmbeddingOptions(num_embeddings, embedding_dim)) {}
  /// Re-draws weight N(0, 1) in place.
  void reset_parameters();
  std::string extra_repr() const override;

  EmbeddingOptions options;
  Tensor weight;  // (V, E)

 protected:
  Tensor forward(const Tensor& ids) override;
};

}  // namespace zt::nn
