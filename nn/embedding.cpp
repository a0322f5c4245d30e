// Embedding lookup over core's embedding op (gradients scatter-add into weight rows).
#include "nn/embedding.h"

#include "nn/init.h"

namespace zt::nn {

Embedding::Embedding(const EmbeddingOptions& opts) : UnaryModule("Embedding"), options(opts) {
  ZT_CHECK(opts.num_embeddings() > 0 && opts.embedding_dim() > 0,
           "Embedding: sizes must be positive, got ", opts.num_embeddings(), " x ",
           opts.embedding_dim());
  Tensor w = empty({opts.num_embeddings(), opts.embedding_dim()});
  init::normal_(w, 0.0, 1.0);
  weight = register_parameter("weight", w);
}

void Embedding::reset_parameters() {
  autograd::NoGradGuard ng;
  init::normal_(weight, 0.0, 1.0);
}

std::string Embedding::extra_repr() const {
  return std::to_string(options.num_embeddings()) + ", " + std::to_string(options.embedding_dim());
}

Tensor Embedding::forward(const Tensor& ids) {
  ZT_CHECK(ids.dtype() == DType::i64 || ids.dtype() == DType::i32,
           "Embedding: ids must be i64 or i32, got ", dtype_name(ids.dtype()));
  return embedding(weight, ids);
}

}  // namespace zt::nn
