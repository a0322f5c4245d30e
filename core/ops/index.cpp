// Index ops: index_select / embedding (gradient: scatter-add of rows) and gather
// (gradient: scatter-add along dim), one_hot. The CPU loops live here; CUDA tensors go
// to the kernels of core/cuda/index.cu, which give the same results bit for bit.
#include "core/ops/index.h"

#include "core/autograd.h"
#include "core/ops.h"
#include "core/ops/dispatch.h"

namespace zt {

namespace {
int64_t index_at(const Tensor& idx, int64_t i) {
  return idx.dtype() == DType::i64 ? idx.data<int64_t>()[i]
                                   : static_cast<int64_t>(idx.data<int32_t>()[i]);
}

void check_index(const Tensor& index, const char* op) {
  ZT_CHECK(index.dtype() == DType::i64 || index.dtype() == DType::i32, op,
           ": indices must be i64 or i32, got ", dtype_name(index.dtype()));
  ZT_CHECK(index.device().is_cpu(), op, ": only CPU tensors are supported here");
}

// out (outer, n_idx, inner) = x (outer, n, inner)[:, idx, :]; or the scatter-add inverse.
template <bool kScatter>
void rows_kernel(const Tensor& dst, const Tensor& src, const Tensor& idx, int64_t outer,
                 int64_t n_src, int64_t n_dst, int64_t inner) {
  dispatch_floating(dst.dtype(), "index_select", [&]<typename T>() {
    T* d = dst.data<T>();
    const T* s = src.data<T>();
    int64_t n_idx = idx.numel();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t j = 0; j < n_idx; ++j) {
        int64_t r = index_at(idx, j);
        if constexpr (kScatter) {
          T* drow = d + (o * n_dst + r) * inner;
          const T* srow = s + (o * n_src + j) * inner;
          for (int64_t k = 0; k < inner; ++k) drow[k] = T(acc_t<T>(drow[k]) + acc_t<T>(srow[k]));
        } else {
          std::memcpy(d + (o * n_dst + j) * inner, s + (o * n_src + r) * inner,
                      inner * sizeof(T));
        }
      }
    }
  });
}

#ifdef ZT_WITH_CUDA
// The index on x's GPU (copied there if it is on the CPU), checked to lie in [0, n).
Tensor device_index(const char* op, const Tensor& x, const Tensor& index, int64_t n,
                    const char* what) {
  ZT_CHECK(index.dtype() == DType::i64 || index.dtype() == DType::i32, op,
           ": indices must be i64 or i32, got ", dtype_name(index.dtype()));
  Tensor ic = index.detach().to(x.device()).contiguous();
  std::array<int64_t, 2> r = cuda::index_range(ic);
  if (ic.numel() > 0) {
    const int64_t bad = r[0] < 0 ? r[0] : r[1];
    ZT_CHECK(r[0] >= 0 && r[1] < n, op, ": ", what, " ", bad, " out of range [0, ", n, ")");
  }
  return ic;
}

Tensor index_select_cuda(const Tensor& x, int64_t dim, const Tensor& index) {
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
  cuda::index_rows(out, xc, ic, outer, n, inner);
  if (autograd::needs_grad({x})) {
    Shape xs = x.sizes();
    autograd::record("index_select", {x}, {out},
                     [xs, ic, outer, n, inner](const std::vector<Tensor>& g) {
                       Tensor gx = zeros(xs, g[0].dtype(), g[0].device());
                       cuda::index_rows_add(gx, g[0].contiguous(), ic, outer, n, inner);
                       return std::vector<Tensor>{gx};
                     });
  }
  return out;
}

Tensor gather_cuda(const Tensor& x, int64_t dim, const Tensor& index) {
  dim = wrap_dim(dim, x.dim(), "gather");
  ZT_CHECK(index.dim() == x.dim(), "gather: index has ", index.dim(), " dims, input has ", x.dim());
  for (int64_t d = 0; d < x.dim(); ++d)
    ZT_CHECK(d == dim || index.size(d) <= x.size(d), "gather: index shape ",
             shape_str(index.sizes()), " too large for input ", shape_str(x.sizes()));
  Tensor ic = device_index("gather", x, index, x.size(dim), "index");
  Tensor xc = x.detach().contiguous();
  Tensor offsets = Tensor::empty(ic.sizes(), DType::i64, x.device());
  cuda::gather_offsets(offsets, ic, xc.sizes(), dim);
  Tensor out = Tensor::empty(ic.sizes(), x.dtype(), x.device());
  cuda::take(out, xc, offsets);
  if (autograd::needs_grad({x})) {
    Shape xs = x.sizes();
    autograd::record("gather", {x}, {out}, [xs, offsets](const std::vector<Tensor>& g) {
      Tensor gx = zeros(xs, g[0].dtype(), g[0].device());
      cuda::put_add(gx, g[0].contiguous(), offsets);
      return std::vector<Tensor>{gx};
    });
  }
  return out;
}
#endif
}  // namespace

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
#ifdef ZT_WITH_CUDA
  if (x.device().is_cuda()) return index_select_cuda(x, dim, index);
#endif
  check_index(index, "index_select");
  ZT_CHECK(index.dim() == 1, "index_select: index must be 1-D, got ", shape_str(index.sizes()));
  dim = wrap_dim(dim, x.dim(), "index_select");
  Tensor xc = x.detach().contiguous();
  Tensor ic = index.contiguous();
  int64_t n = x.size(dim);
  for (int64_t j = 0; j < ic.numel(); ++j) {
    int64_t r = index_at(ic, j);
    ZT_CHECK(r >= 0 && r < n, "index_select: index ", r, " out of range for dimension ", dim,
             " of size ", n);
  }
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= x.size(d);
  for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= x.size(d);
  Shape os = x.sizes();
  os[dim] = ic.numel();
  Tensor out = Tensor::empty(os, x.dtype(), x.device());
  rows_kernel<false>(out, xc, ic, outer, n, ic.numel(), inner);
  if (autograd::needs_grad({x})) {
    Shape xs = x.sizes();
    autograd::record("index_select", {x}, {out},
                     [xs, ic, outer, n, inner](const std::vector<Tensor>& g) {
                       Tensor gx = zeros(xs, g[0].dtype(), g[0].device());
                       Tensor gc = g[0].contiguous();
                       rows_kernel<true>(gx, gc, ic, outer, ic.numel(), n, inner);
                       return std::vector<Tensor>{gx};
                     });
  }
  return out;
}

Tensor embedding(const Tensor& weight, const Tensor& ids) {
  ZT_CHECK(weight.dim() == 2, "embedding: weight must be (V, E), got ",
           shape_str(weight.sizes()));
  Shape os = ids.sizes();
  os.push_back(weight.size(1));
  return index_select(weight, 0, ids.reshape({-1})).reshape(os);
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
#ifdef ZT_WITH_CUDA
  if (x.device().is_cuda()) return gather_cuda(x, dim, index);
#endif
  check_index(index, "gather");
  dim = wrap_dim(dim, x.dim(), "gather");
  ZT_CHECK(index.dim() == x.dim(), "gather: index has ", index.dim(), " dims, input has ",
           x.dim());
  for (int64_t d = 0; d < x.dim(); ++d)
    ZT_CHECK(d == dim || index.size(d) <= x.size(d), "gather: index shape ",
             shape_str(index.sizes()), " too large for input ", shape_str(x.sizes()));
  Tensor xc = x.detach().contiguous();
  Tensor ic = index.contiguous();
  Tensor out = Tensor::empty(index.sizes(), x.dtype(), x.device());
  // Walk index positions; map each to the input offset with dim replaced.
  Shape xst = xc.strides();
  Shape isz = ic.sizes();
  int64_t n = ic.numel(), nd = ic.dim();
  std::vector<int64_t> src_off(n);
  for (int64_t i = 0; i < n; ++i) {
    int64_t rem = i, off = 0;
    for (int64_t d = nd - 1; d >= 0; --d) {
      int64_t c = rem % isz[d];
      rem /= isz[d];
      if (d == dim) {
        int64_t r = index_at(ic, i);
        ZT_CHECK(r >= 0 && r < x.size(dim), "gather: index ", r,
                 " out of range for dimension ", dim, " of size ", x.size(dim));
        off += r * xst[d];
      } else {
        off += c * xst[d];
      }
    }
    src_off[i] = off;
  }
  dispatch_all(x.dtype(), [&]<typename T>() {
    const T* s = static_cast<const T*>(xc.data_ptr());
    T* o = static_cast<T*>(out.data_ptr());
    for (int64_t i = 0; i < n; ++i) o[i] = s[src_off[i]];
  });
  if (autograd::needs_grad({x})) {
    Shape xs = x.sizes();
    autograd::record("gather", {x}, {out}, [xs, src_off](const std::vector<Tensor>& g) {
      Tensor gx = zeros(xs, g[0].dtype(), g[0].device());
      Tensor gc = g[0].contiguous();
      dispatch_floating(gx.dtype(), "gather backward", [&]<typename T>() {
        T* d = gx.data<T>();
        const T* s = gc.data<T>();
        for (size_t i = 0; i < src_off.size(); ++i)
          d[src_off[i]] = T(acc_t<T>(d[src_off[i]]) + acc_t<T>(s[i]));
      });
      return std::vector<Tensor>{gx};
    });
  }
  return out;
}

Tensor one_hot(const Tensor& ids, int64_t classes) {
#ifdef ZT_WITH_CUDA
  if (ids.device().is_cuda()) {
    Tensor ic = device_index("one_hot", ids, ids, classes, "id");
    Shape os = ids.sizes();
    os.push_back(classes);
    Tensor out = zeros(os, DType::f32, ids.device());
    cuda::one_hot(out, ic, classes);
    return out;
  }
#endif
  check_index(ids, "one_hot");
  Tensor ic = ids.contiguous();
  Shape os = ids.sizes();
  os.push_back(classes);
  Tensor out = zeros(os);
  float* o = out.data<float>();
  for (int64_t i = 0; i < ic.numel(); ++i) {
    int64_t c = index_at(ic, i);
    ZT_CHECK(c >= 0 && c < classes, "one_hot: id ", c, " out of range [0, ", classes, ")");
    o[i * classes + c] = 1.0f;
  }
  return out;
}

}  // namespace zt
