// Shared argument checks of the CPU and CUDA kernels (core/kernel_checks.h).
#include "core/kernel_checks.h"

#include "core/error.h"

namespace zt::detail {

DType check_optimizer_lists(const char* op, const std::vector<Tensor>& p,
                            std::initializer_list<const std::vector<Tensor>*> same,
                            const std::vector<Tensor>& low) {
  ZT_CHECK(low.empty() || low.size() == p.size(), op, ": ", low.size(),
           " low-precision outputs for ", p.size(), " parameters; pass none or one each");
  for (const auto* list : same)
    ZT_CHECK(list->size() == p.size(), op, ": ", list->size(), " tensors in a list for ", p.size(),
             " parameters");
  const DType dt = p[0].dtype();
  const Device dev = p[0].device();
  ZT_CHECK(dt == DType::f32 || dt == DType::f64, op, ": parameters must be f32 or f64, got ",
           dtype_name(dt));
  DType low_dt = dt;
  for (size_t i = 0; i < p.size(); ++i) {
    ZT_CHECK(p[i].device() == dev && p[i].is_contiguous() && p[i].dtype() == dt, op, ": parameter ",
             i, " is ", p[i].str(), " and parameter 0 is ", p[0].str(),
             "; pass contiguous tensors of one dtype on one device");
    for (const auto* list : same) {
      const Tensor& t = (*list)[i];
      ZT_CHECK(
          t.device() == dev && t.is_contiguous() && t.dtype() == dt && t.numel() == p[i].numel(),
          op, ": entry ", i, " mixes ", p[i].str(), " and ", t.str(),
          "; pass contiguous tensors of one dtype and numel on one device");
    }
    if (low.empty() || !low[i].defined()) continue;
    const Tensor& l = low[i];
    ZT_CHECK(l.device() == dev && l.is_contiguous() && l.numel() == p[i].numel() &&
                 is_16bit_float(l.dtype()) && (low_dt == dt || l.dtype() == low_dt),
             op, ": low-precision output ", i, " is ", l.str(),
             "; pass contiguous bf16/f16 tensors (one dtype) of ", p[i].numel(), " elements on ",
             dev.str());
    low_dt = l.dtype();
  }
  return low_dt;
}

void check_cross_entropy(const char* op, const Tensor& lse, const Tensor& logits,
                         const Tensor& target) {
  ZT_CHECK(logits.dim() == 2 && logits.is_contiguous() && lse.dtype() == DType::f64 &&
               lse.is_contiguous() && lse.numel() == logits.size(0) && target.is_contiguous() &&
               target.numel() == logits.size(0),
           op, ": expects logits (P, C), lse (P) f64 and target (P), all contiguous; got logits ",
           shape_str(logits.sizes()), ", lse ", shape_str(lse.sizes()), ", target ",
           shape_str(target.sizes()));
}

DType check_sgd_lists(const std::vector<Tensor>& p, const std::vector<Tensor>& g,
                      const std::vector<Tensor>& buf, const std::vector<Tensor>& low) {
  return buf.empty() ? check_optimizer_lists("sgd_update", p, {&g}, low)
                     : check_optimizer_lists("sgd_update", p, {&g, &buf}, low);
}

void check_multi_copy(const std::vector<Tensor>& dst, const std::vector<Tensor>& src,
                      bool accumulate) {
  ZT_CHECK(dst.size() == src.size(), "multi_copy: ", dst.size(), " destinations for ", src.size(),
           " sources");
  if (dst.empty()) return;
  ZT_CHECK(dst[0].defined(), "multi_copy: destination 0 is undefined");
  const Device device = dst[0].device();
  for (size_t i = 0; i < dst.size(); ++i) {
    const Tensor& d = dst[i];
    const Tensor& s = src[i];
    ZT_CHECK(d.defined() && s.defined() && d.device() == device && s.device() == device &&
                 d.is_contiguous() && s.is_contiguous() && d.numel() == s.numel() &&
                 d.dtype() == dst[0].dtype() && s.dtype() == src[0].dtype(),
             "multi_copy: pair ", i, " is ", d.str(), " <- ", s.str(), " and pair 0 is ",
             dst[0].str(), " <- ", src[0].str(), "; pass contiguous pairs of one numel on ",
             device.str(), ", every destination of one dtype and every source of one");
    // Refused here, before the kernel's parallel region touches any data.
    for (const Tensor* t : {&d, &s}) {
      if (t->has_storage()) continue;
      const Tensor& r = *t;
      ZT_FAIL("multi_copy: pair ", i, "'s ", t == &d ? "destination" : "source", " ('",
              r.name().empty() ? "<unnamed>" : r.name(), "', ", r.str(),
              ") has no storage: a partitioned parameter that is not gathered (NOT_AVAILABLE). ",
              r.impl()->unavailable_hint.empty() ? "Gather it first." : r.impl()->unavailable_hint);
    }
  }
  const DType dt = dst[0].dtype(), st = src[0].dtype();
  if (is_floating(dt) && is_floating(st)) return;
  ZT_CHECK(!accumulate, "multi_copy: adds ", dtype_name(st), " into ", dtype_name(dt),
           "; additions take floating dtypes");
  ZT_CHECK(dt == st, "multi_copy: copies ", dtype_name(st), " into ", dtype_name(dt),
           "; a non-floating dtype is copied only into itself");
}

std::vector<double> check_step_constants(const char* op, const Tensor& constants, int64_t count,
                                         Device device) {
  if (!constants.defined()) return {};
  ZT_CHECK(constants.dtype() == DType::f64 && constants.numel() == count &&
               constants.is_contiguous() && constants.device() == device,
           op, ": the step constants must be ", count, " contiguous f64 values on ", device.str(),
           ", got ", constants.str());
  if (!device.is_cpu()) return {};
  const double* k = constants.data<double>();
  return std::vector<double>(k, k + count);
}

void check_cross_entropy_stats(const char* op, const Tensor& stats) {
  ZT_CHECK(stats.dtype() == DType::f64 && stats.numel() == 3 && stats.is_contiguous(), op,
           ": expects stats (3) f64 contiguous, got ", dtype_name(stats.dtype()), " ",
           shape_str(stats.sizes()));
}

void check_cross_entropy_backward(const Tensor& dlogits, const Tensor& logits, const Tensor& grad) {
  ZT_CHECK(grad.dtype() == DType::f64 && grad.numel() == 1,
           "cross_entropy backward: expects a one-element f64 gradient, got ", grad.str());
  ZT_CHECK(dlogits.dtype() == logits.dtype() && dlogits.sizes() == logits.sizes() &&
               dlogits.is_contiguous(),
           "cross_entropy backward: expects a contiguous output of the logits' shape and dtype (",
           logits.str(), "), got ", dlogits.str());
  ZT_CHECK(dlogits.data_ptr() != logits.data_ptr(),
           "cross_entropy backward: the output must not be the logits themselves (the target's "
           "element is read after the row is written)");
}

}  // namespace zt::detail
