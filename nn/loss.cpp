// Loss modules over core's loss ops: option checks, weight buffers, printed options, and
// shape checks that name the module and both shapes.
#include "nn/loss.h"

#include <sstream>

namespace zt::nn {

namespace {
void check_same_shape(const std::string& module, const Tensor& x, const Tensor& y) {
  ZT_CHECK(x.sizes() == y.sizes(), module, ": input ", shape_str(x.sizes()), " and target ",
           shape_str(y.sizes()), " must have the same shape");
}

std::string reduction_str(Reduction r) {
  return std::string("reduction=") + reduction_name(r);
}

// The tensor registered as buffer `name` on m when t is defined (so that it follows the
// module's to() and is saved as PyTorch saves it); undefined otherwise.
Tensor weight_buffer(Module& m, const char* name, const Tensor& t) {
  return t.defined() ? m.register_buffer(name, t) : t;
}
}  // namespace

std::vector<Tensor> LossModule::forward(const std::vector<Tensor>& inputs) {
  ZT_CHECK(inputs.size() == 2, type_name(), " takes (input, target), got ", inputs.size(),
           " inputs");
  return {forward(inputs[0], inputs[1])};
}

std::string MSELoss::extra_repr() const {
  return reduction_str(reduction_);
}

Tensor MSELoss::forward(const Tensor& x, const Tensor& y) {
  check_same_shape(type_name(), x, y);
  return mse_loss(x, y, reduction_);
}

std::string L1Loss::extra_repr() const {
  return reduction_str(reduction_);
}

Tensor L1Loss::forward(const Tensor& x, const Tensor& y) {
  check_same_shape(type_name(), x, y);
  return l1_loss(x, y, reduction_);
}

SmoothL1Loss::SmoothL1Loss(const SmoothL1LossOptions& o) : LossModule("SmoothL1Loss"), options(o) {
  ZT_CHECK(o.beta() >= 0, "SmoothL1Loss: beta must be non-negative, got ", o.beta());
}

std::string SmoothL1Loss::extra_repr() const {
  std::ostringstream os;
  os << reduction_str(options.reduction()) << ", beta=" << options.beta();
  return os.str();
}

Tensor SmoothL1Loss::forward(const Tensor& x, const Tensor& y) {
  check_same_shape(type_name(), x, y);
  return smooth_l1_loss(x, y, options.reduction(), options.beta());
}

HuberLoss::HuberLoss(const HuberLossOptions& o) : LossModule("HuberLoss"), options(o) {
  ZT_CHECK(o.delta() > 0, "HuberLoss: delta must be positive, got ", o.delta());
}

std::string HuberLoss::extra_repr() const {
  std::ostringstream os;
  os << reduction_str(options.reduction()) << ", delta=" << options.delta();
  return os.str();
}

Tensor HuberLoss::forward(const Tensor& x, const Tensor& y) {
  check_same_shape(type_name(), x, y);
  return huber_loss(x, y, options.reduction(), options.delta());
}

CrossEntropyLoss::CrossEntropyLoss(CrossEntropyOptions o)
    : LossModule("CrossEntropyLoss"), options_(o) {
  options_.weight = weight_buffer(*this, "weight", o.weight);
}

std::string CrossEntropyLoss::extra_repr() const {
  std::string s = "ignore_index=" + std::to_string(options_.ignore_index);
  if (options_.label_smoothing != 0)
    s += ", label_smoothing=" + std::to_string(options_.label_smoothing);
  if (options_.reduction != Reduction::kMean) s += ", " + reduction_str(options_.reduction);
  if (options_.weight.defined()) s += ", weight=" + options_.weight.str();
  return s;
}

Tensor CrossEntropyLoss::forward(const Tensor& logits, const Tensor& target) {
  ZT_CHECK(target.dtype() == DType::i64 || target.dtype() == DType::i32,
           "CrossEntropyLoss: target must hold class indices (i64 or i32), got ",
           dtype_name(target.dtype()));
  bool ok =
      logits.dim() >= 2 && target.dim() == logits.dim() - 1 && target.size(0) == logits.size(0);
  for (int64_t d = 2; ok && d < logits.dim(); ++d) ok = target.size(d - 1) == logits.size(d);
  ZT_CHECK(ok, "CrossEntropyLoss: logits ", shape_str(logits.sizes()), " (N, C, *) and target ",
           shape_str(target.sizes()), " (N, *) do not match");
  return cross_entropy(logits, target, options_);
}

NLLLoss::NLLLoss(const NLLLossOptions& o) : LossModule("NLLLoss"), options(o) {
  ZT_CHECK(o.reduction != Reduction::kBatchMean, "NLLLoss: reduction batchmean is KLDivLoss's");
  options.weight = weight_buffer(*this, "weight", o.weight);
}

std::string NLLLoss::extra_repr() const {
  return "ignore_index=" + std::to_string(options.ignore_index) + ", " +
         reduction_str(options.reduction);
}

Tensor NLLLoss::forward(const Tensor& logp, const Tensor& target) {
  return nll_loss(logp, target, options);
}

BCELoss::BCELoss(const BCELossOptions& o) : LossModule("BCELoss"), options(o) {
  ZT_CHECK(o.reduction != Reduction::kBatchMean, "BCELoss: reduction batchmean is KLDivLoss's");
  options.weight = weight_buffer(*this, "weight", o.weight);
}

std::string BCELoss::extra_repr() const {
  return reduction_str(options.reduction);
}

Tensor BCELoss::forward(const Tensor& p, const Tensor& target) {
  check_same_shape(type_name(), p, target);
  return binary_cross_entropy(p, target, options);
}

BCEWithLogitsLoss::BCEWithLogitsLoss(const BCEWithLogitsLossOptions& o)
    : LossModule("BCEWithLogitsLoss"), options(o) {
  ZT_CHECK(o.reduction != Reduction::kBatchMean,
           "BCEWithLogitsLoss: reduction batchmean is KLDivLoss's");
  options.weight = weight_buffer(*this, "weight", o.weight);
  options.pos_weight = weight_buffer(*this, "pos_weight", o.pos_weight);
}

std::string BCEWithLogitsLoss::extra_repr() const {
  return reduction_str(options.reduction);
}

Tensor BCEWithLogitsLoss::forward(const Tensor& logits, const Tensor& target) {
  check_same_shape(type_name(), logits, target);
  return binary_cross_entropy_with_logits(logits, target, options);
}

std::string KLDivLoss::extra_repr() const {
  return reduction_str(options.reduction) + (options.log_target ? ", log_target=true" : "");
}

Tensor KLDivLoss::forward(const Tensor& logp, const Tensor& target) {
  check_same_shape(type_name(), logp, target);
  return kl_div(logp, target, options);
}

}  // namespace zt::nn
