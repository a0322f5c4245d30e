// Embedding lookup over core's embedding op (gradients scatter-add into weight rows). A
// padding row's lookups are cut from the graph with where(), so its gradient is 0.
#include "nn/embedding.h"

#include "nn/init.h"

namespace zt::nn {

namespace {
// The weight's padding row set to 0, in place and unrecorded.
void zero_padding_row(const Tensor& weight, const std::optional<int64_t>& padding_idx) {
  if (!padding_idx) return;
  autograd::NoGradGuard ng;
  weight.narrow(0, *padding_idx, 1).fill_(0.0);
}
}  // namespace

Embedding::Embedding(const EmbeddingOptions& opts) : UnaryModule("Embedding"), options(opts) {
  const int64_t V = opts.num_embeddings();
  ZT_CHECK(V > 0 && opts.embedding_dim() > 0, "Embedding: sizes must be positive, got ", V, " x ",
           opts.embedding_dim());
  if (opts.padding_idx()) {
    const int64_t p = *opts.padding_idx();
    ZT_CHECK(p >= -V && p < V, "Embedding: padding_idx ", p, " must be in [", -V, ", ", V, ") for ",
             V, " embeddings");
    options.padding_idx(p < 0 ? p + V : p);
  }
  Tensor w = empty({V, opts.embedding_dim()});
  init::normal_(w, 0.0, 1.0);
  zero_padding_row(w, options.padding_idx());
  weight = register_parameter("weight", w);
}

void Embedding::reset_parameters() {
  autograd::NoGradGuard ng;
  init::normal_(weight, 0.0, 1.0);
  zero_padding_row(weight, options.padding_idx());
}

std::string Embedding::extra_repr() const {
  std::string s =
      std::to_string(options.num_embeddings()) + ", " + std::to_string(options.embedding_dim());
  if (options.padding_idx()) s += ", padding_idx=" + std::to_string(*options.padding_idx());
  return s;
}

Tensor Embedding::forward(const Tensor& ids) {
  ZT_CHECK(ids.dtype() == DType::i64 || ids.dtype() == DType::i32,
           "Embedding: ids must be i64 or i32, got ", dtype_name(ids.dtype()));
  const Tensor out = embedding(weight, ids);  // (..., E)
  if (!options.padding_idx() || !autograd::needs_grad({out})) return out;
  // The same values, but positions looking up the padding row pass no gradient back.
  const Tensor idx = ids.to(out.device());
  const Tensor pad =
      full({}, static_cast<double>(*options.padding_idx()), idx.dtype(), idx.device());
  return where(ne(idx, pad).unsqueeze(-1), out, out.detach());
}

}  // namespace zt::nn
