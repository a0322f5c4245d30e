// Index ops: index_select / embedding (gradient: scatter-add of rows) and gather
// (gradient: scatter-add along dim), one_hot. They check arguments and record autograd;
// the kernels (core/cpu/index.cpp, core/cuda/index.cu) give the same results bit for bit.
#include "core/ops/index.h"

#include "core/autograd.h"
#include "core/ops.h"
#include "core/ops/dispatch.h"

namespace zt {

namespace {

// The index as a contiguous tensor on x's device (copied there if needed). On the CPU
// it is checked here to lie in [0, n) (`what` names one index value in the error); CUDA
// kernels check each index themselves and report a bad one at the host's next wait on
// the GPU (core/cuda/device_error.h), so an index op there costs no synchronization.
Tensor device_index(const char* op, const Tensor& x, const Tensor& index, int64_t n,
                    const char* what) {
  ZT_CHECK(index.dtype() == DType::i64 || index.dtype() == DType::i32, op,
           ": indices must be i64 or i32, got ", dtype_name(index.dtype()));
  Tensor ic = index.detach().to(x.device()).contiguous();
  if (ic.numel() == 0) return ic;
  ZT_CHECK(n > 0, op, ": ", ic.numel(), " ", what, "(s) into an empty range [0, 0)");
  if (!ic.device().is_cpu()) return ic;
  std::array<int64_t, 2> r = ZT_DISPATCH(ic.device(), index_range, ic);
  const int64_t bad = r[0] < 0 ? r[0] : r[1];
  ZT_CHECK(r[0] >= 0 && r[1] < n, op, ": ", what, " ", bad, " out of range [0, ", n, ")");
  return ic;
}

}  // namespace

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  ZT_CHECK(index.dim() == 1, "index_select: index must be 1-D, got ", shape_str(index.sizes()));
  dim = wrap_dim(dim, x.dim(), "index_select");
  const int64_t n = x.size(dim);
  Tensor ic = device_index("index_select", x, index, n, "index");
  Tensor xc = x.detach().contiguous();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= x.size(d);
  for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= x.size(d);
  Shape os = x.sizes();
  os[dim] = ic.numel();
  Tensor out = Tensor::empty(os, x.dtype(), x.device());
  ZT_DISPATCH(x.device(), index_rows, out, xc, ic, outer, n, inner);
  if (autograd::needs_grad({x})) {
    Shape xs = x.sizes();
    autograd::record("index_select", {x}, {out},
                     [xs, ic, outer, n, inner](const std::vector<Tensor>& g) {
                       // Summed in f32 for 16-bit rows, rounded once: a row picked 4096
                       // times would stop growing at 256 in bf16 (a frequent token's
                       // embedding).
                       const Tensor gw = detail::widened(g[0]).contiguous();
                       Tensor gx = zeros(xs, gw.dtype(), gw.device());
                       ZT_DISPATCH(gx.device(), index_rows_add, gx, gw, ic, outer, n, inner);
                       return std::vector<Tensor>{gx.to(g[0].dtype())};
                     },
                     {ic});
  }
  return out;
}

Tensor embedding(const Tensor& weight, const Tensor& ids) {
  ZT_CHECK(weight.dim() == 2, "embedding: weight must be (V, E), got ", shape_str(weight.sizes()));
  Shape os = ids.sizes();
  os.push_back(weight.size(1));
  return index_select(weight, 0, ids.reshape({-1})).reshape(os);
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  dim = wrap_dim(dim, x.dim(), "gather");
  ZT_CHECK(index.dim() == x.dim(), "gather: index has ", index.dim(), " dims, input has ", x.dim());
  for (int64_t d = 0; d < x.dim(); ++d)
    ZT_CHECK(d == dim || index.size(d) <= x.size(d), "gather: index shape ",
             shape_str(index.sizes()), " too large for input ", shape_str(x.sizes()));
  Tensor ic = device_index("gather", x, index, x.size(dim), "index");
  Tensor xc = x.detach().contiguous();
  Tensor offsets = Tensor::empty(ic.sizes(), DType::i64, x.device());
  ZT_DISPATCH(x.device(), gather_offsets, offsets, ic, xc.sizes(), dim);
  Tensor out = Tensor::empty(ic.sizes(), x.dtype(), x.device());
  ZT_DISPATCH(x.device(), take, out, xc, offsets);
  if (autograd::needs_grad({x})) {
    Shape xs = x.sizes();
    autograd::record("gather", {x}, {out}, [xs, offsets](const std::vector<Tensor>& g) {
      const Tensor gw = detail::widened(g[0]).contiguous();  // summed in f32, as above
      Tensor gx = zeros(xs, gw.dtype(), gw.device());
      ZT_DISPATCH(gx.device(), put_add, gx, gw, offsets);
      return std::vector<Tensor>{gx.to(g[0].dtype())};
    });
  }
  return out;
}

Tensor one_hot(const Tensor& ids, int64_t classes) {
  ZT_CHECK(classes >= 0, "one_hot: the number of classes must be given and >= 0, got ", classes);
  Tensor ic = device_index("one_hot", ids, ids, classes, "id");
  Shape os = ids.sizes();
  os.push_back(classes);
  Tensor out = zeros(os, DType::f32, ids.device());
  ZT_DISPATCH(ids.device(), one_hot, out, ic, classes);
  return out;
}

Tensor bincount(const Tensor& ids, int64_t classes, const Tensor& weight) {
  ZT_CHECK(classes >= 0, "bincount: the number of classes must be >= 0, got ", classes);
  Tensor counts = zeros({classes}, DType::f64, ids.device());
  const Tensor ic = device_index("bincount", counts, ids, classes, "id").reshape({-1});
  if (ic.numel() == 0) return counts;
  Tensor add;
  if (weight.defined()) {
    ZT_CHECK(weight.numel() == 1 && is_floating(weight.dtype()),
             "bincount: the weight must be one floating element, got ", dtype_name(weight.dtype()),
             " ", shape_str(weight.sizes()));
    ZT_CHECK(weight.device() == ids.device(), "bincount: the weight is on ", weight.device().str(),
             ", the ids on ", ids.device().str());
    add = weight.detach().to(DType::f64).reshape({1}).expand({ic.numel()}).contiguous();
  } else {
    add = ones({ic.numel()}, DType::f64, ids.device());
  }
  ZT_DISPATCH(counts.device(), index_rows_add, counts, add, ic, 1, classes, 1,
              IndexAddOp::kBincount);
  return counts;
}

}  // namespace zt
