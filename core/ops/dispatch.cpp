// The checks shared by the op files (declared in core/ops/dispatch.h): operands on one
// device with one dtype, and the guards every in-place write passes (in grad mode, no write
// to a tensor autograd tracks or to a no-grad view of one, or from a source that requires
// grad; no write to an expand()ed view, or from a source that overlaps it in part).
#include "core/ops/dispatch.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "core/autograd.h"
#include "core/ops/elementwise.h"

namespace zt::detail {

void check_same(const char* op, std::initializer_list<Tensor> ts, bool same_dtype) {
  const Tensor* first = nullptr;
  for (const Tensor& t : ts) {
    if (!t.defined()) continue;
    if (!first) {
      first = &t;
      continue;
    }
    ZT_CHECK(t.device() == first->device(), op, ": expected all tensors on one device, got ",
             first->device().str(), " and ", t.device().str());
    ZT_CHECK(!same_dtype || t.dtype() == first->dtype(), op, ": dtype mismatch, ",
             dtype_name(first->dtype()), " and ", dtype_name(t.dtype()),
             " (convert with .to(dtype) first)");
  }
}

void check_floating(const char* op, const Tensor& t) {
  ZT_CHECK(is_floating(t.dtype()), op, ": expected a floating dtype, got ", dtype_name(t.dtype()),
           " (arithmetic is on floating tensors: convert with .to(DType::f32) first)");
}

namespace {

// The (stride, size) of each dim with more than one element, the smallest stride first.
std::vector<std::pair<int64_t, int64_t>> dims_by_stride(const Tensor& t) {
  std::vector<std::pair<int64_t, int64_t>> dims;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.sizes()[d] > 1) dims.emplace_back(t.strides()[d], t.sizes()[d]);
  std::sort(dims.begin(), dims.end());
  return dims;
}

// True when the elements are one contiguous block, in any order of the dims.
bool is_dense(const Tensor& t) {
  int64_t expected = 1;
  for (const auto& [stride, size] : dims_by_stride(t)) {
    if (stride != expected) return false;
    expected *= size;
  }
  return true;
}

// The (size, stride) of each dim with more than one element, in order: two tensors with
// the same offset and these are the same elements in the same order.
std::vector<std::pair<int64_t, int64_t>> layout_of(const Tensor& t) {
  std::vector<std::pair<int64_t, int64_t>> l;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.sizes()[d] > 1) l.emplace_back(t.sizes()[d], t.strides()[d]);
  return l;
}

// [first byte, past the last byte] of a tensor's elements in its storage (numel > 0).
std::pair<int64_t, int64_t> byte_range(const Tensor& t) {
  int64_t last = t.offset();
  for (int64_t d = 0; d < t.dim(); ++d) last += (t.sizes()[d] - 1) * t.strides()[d];
  const auto es = static_cast<int64_t>(dtype_size(t.dtype()));
  return {t.offset() * es, (last + 1) * es};
}

void check_write_of(const char* op, const Tensor& dst, std::initializer_list<Tensor> srcs) {
  ZT_CHECK(dst.defined(), op,
           ": the tensor written to is undefined (a gradient not computed yet: .grad() before "
           "backward, or of a parameter the loss does not use?)");
  ZT_CHECK(!dst.requires_grad() || !autograd::grad_mode_enabled(), op, ": an in-place write to ",
           dst.str(), dst.name().empty() ? "" : " '" + dst.name() + "'",
           ", which requires grad, while grad mode is on; autograd does not record in-place "
           "writes. Update parameters under a NoGradGuard (as optimizers do); in a model, use "
           "the out-of-place op (add, mul, where, ...)");
  ZT_CHECK(!dst.impl()->no_grad_view || !autograd::grad_mode_enabled(), op,
           ": an in-place write to ", dst.str(), dst.name().empty() ? "" : " '" + dst.name() + "'",
           ", a view made under a NoGradGuard of a tensor that requires grad, while grad mode is "
           "on (a view created in no-grad mode modified in place with grad mode enabled); "
           "autograd would not see the tensor change. Write under a NoGradGuard too, or to a "
           "view made in grad mode, or to a detach()ed view if the change is meant");
  autograd::check_view_history(dst, op, "the tensor written to");
  for (int64_t d = 0; d < dst.dim(); ++d)
    ZT_CHECK(dst.sizes()[d] <= 1 || dst.strides()[d] != 0, op, ": the tensor written to, ",
             dst.str(), ", has several elements in one memory location (dim ", d,
             " has stride 0: an expand()ed view); write to a clone() or to the tensor it "
             "expands");
  for (const Tensor& src : srcs) {
    ZT_CHECK(!src.defined() || !src.requires_grad() || !autograd::grad_mode_enabled(), op,
             ": the source ", src.str(), src.name().empty() ? "" : " '" + src.name() + "'",
             " requires grad, while grad mode is on; autograd does not record in-place writes, "
             "so its gradient would be lost. Build the result out of place (cat, stack, where, "
             "add, ...), or write src.detach() if no gradient should flow to it");
    autograd::check_view_history(src, op, "the source");
    // Overlap, as PyTorch judges it: two dense tensors (each a permutation of one
    // contiguous block) in one storage must be the same elements in the same layout or
    // apart; elementwise kernels read and write in an order that a partial overlap (x and
    // x.t(), x[1:] and x[:-1]) would make the result depend on. Strided tensors with gaps
    // pass (x[::2] and x[1::2] share a range but no element): unaliased_source copies
    // such a source first.
    if (src.defined() && dst.has_storage() && src.has_storage() && dst.storage() == src.storage() &&
        dst.numel() > 0 && src.numel() > 0 && is_dense(dst) && is_dense(src)) {
      const auto [d0, d1] = byte_range(dst);
      const auto [s0, s1] = byte_range(src);
      const bool same = d0 == s0 && dst.dtype() == src.dtype() && layout_of(dst) == layout_of(src);
      ZT_CHECK(same || d1 <= s0 || s1 <= d0, op, ": the source ", src.str(),
               " and the tensor written to, ", dst.str(),
               ", overlap in part in one storage (the write would change elements still to be "
               "read); copy from a clone() of the source");
    }
  }
}

}  // namespace

void check_write(const char* op, const Tensor& dst, const Tensor& src) {
  check_write_of(op, dst, {src});
}

void begin_write(const char* op, const Tensor& dst, std::initializer_list<Tensor> srcs) {
  check_write_of(op, dst, srcs);
  count_writes({dst});
}

void begin_write(const char* op, const Tensor& dst, const Tensor& src) {
  begin_write(op, dst, {src});
}

bool shares_memory(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined() || !a.has_storage() || !b.has_storage() ||
      a.storage() != b.storage() || a.numel() == 0 || b.numel() == 0)
    return false;
  const auto [a0, a1] = byte_range(a);
  const auto [b0, b1] = byte_range(b);
  return a0 < b1 && b0 < a1;
}

Tensor broadcast_source(const char* op, const Tensor& dst, const Tensor& src) {
  if (src.sizes() == dst.sizes()) return src;
  ZT_CHECK(broadcast_shapes(dst.sizes(), src.sizes(), op) == dst.sizes(), op, ": the source ",
           shape_str(src.sizes()), " does not broadcast to the destination's shape ",
           shape_str(dst.sizes()));
  return src.expand(dst.sizes());
}

Tensor unaliased_source(const Tensor& dst, const Tensor& src) {
  if (!shares_memory(dst, src)) return src;
  if (dst.offset() == src.offset() && dst.dtype() == src.dtype() &&
      layout_of(dst) == layout_of(src))
    return src;
  // Whether they share an element at all is not worked out: the copy is what a
  // kernel that reads each source element before any write would have seen.
  return src.detach().clone();
}

bool elements_apart(const Tensor& t) {
  // With the dims ordered by stride, each stride must step past all the smaller ones reach.
  int64_t reach = 1;
  for (const auto& [stride, size] : dims_by_stride(t)) {
    if (stride < reach) return false;
    reach += stride * (size - 1);
  }
  return true;
}

void count_writes(const std::vector<Tensor>& ts) {
  for (const Tensor& t : ts)
    if (t.defined() && t.has_storage()) t.storage()->bump_version();
}

}  // namespace zt::detail
