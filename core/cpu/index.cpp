// CPU indexing kernels: index_select / embedding rows, gather (as offsets + take), their
// scatter-add gradients, one_hot, argmax / argmin and nearest-neighbour resizing; the
// twin of core/cuda/index.cu. Scatter-adds run in source order, rounding to the dtype
// after every add (the order the GPU reproduces).
// Legend: outer x n x inner the view of a tensor around the indexed dim; planes = N * C
// and (D, H, W) -> (Do, Ho, Wo) for resizing.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/cpu/loops.h"
#include "core/kernels.h"

namespace zt::cpu {

namespace {

// Calls fn(p) with p the index values of a contiguous i64 or i32 tensor.
template <typename Fn>
void with_indices(const Tensor& index, const char* op, Fn&& fn) {
  dispatch_index(index.dtype(), op, [&]<typename I>() { fn(index.data<I>()); });
}

// PyTorch's 'nearest' source index along one axis: identity, halving, else
// floor(dst * (in / out)) in float arithmetic, clamped to the last input element.
std::vector<int64_t> nearest_indices(int64_t in, int64_t out) {
  std::vector<int64_t> idx(out);
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  for (int64_t o = 0; o < out; ++o) {
    if (out == in) {
      idx[o] = o;
    } else if (out == 2 * in) {
      idx[o] = o >> 1;
    } else {
      idx[o] = std::min(static_cast<int64_t>(std::floor(static_cast<float>(o) * scale)), in - 1);
    }
  }
  return idx;
}

// The source index tables of a nearest resize (planes, D, H, W) -> (planes, Do, Ho, Wo),
// the same for every plane.
struct NearestPlan {
  int64_t in_plane, out_plane;
  Shape in, out;
  std::vector<int64_t> d, h, w;
  NearestPlan(const Shape& in_dhw, const Shape& out_dhw)
      : in_plane(shape_numel(in_dhw)),
        out_plane(shape_numel(out_dhw)),
        in(in_dhw),
        out(out_dhw),
        d(nearest_indices(in_dhw[0], out_dhw[0])),
        h(nearest_indices(in_dhw[1], out_dhw[1])),
        w(nearest_indices(in_dhw[2], out_dhw[2])) {}
  // The first input element of output row (od, oh) in a plane.
  int64_t in_row(int64_t od, int64_t oh) const { return (d[od] * in[1] + h[oh]) * in[2]; }
};

// o[r] = index of the first max (kMax) or min of row r of x (rows, n), a NaN being both
// (PyTorch's rule: the first NaN, so that max() shows it): an element replaces the best
// so far when strictly beyond it or a NaN where the best is not. Blocks of kBlock
// elements are first tested as a whole (one vectorizable pass) and scanned one by one
// only when some element beats the best so far, which gives the same answer.
template <bool kMax, typename T>
void first_extreme(int64_t* o, const T* x, int64_t rows, int64_t n) {
  using A = acc_t<T>;
  constexpr int64_t kBlock = 16;
  auto beats = [](A v, A best) { return (kMax ? v > best : v < best) || (v != v && best == best); };
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = x + r * n;
    A bv = A(row[0]);
    int64_t best = 0;
    auto scan = [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        if (beats(A(row[i]), bv)) {
          bv = A(row[i]);
          best = i;
        }
      }
    };
    int64_t i = 1;
    for (; i + kBlock <= n; i += kBlock) {
      bool any = false;
      for (int64_t k = 0; k < kBlock; ++k) any |= beats(A(row[i + k]), bv);
      if (any) scan(i, i + kBlock);
    }
    scan(i, n);
    o[r] = best;
  }
}

}  // namespace

std::array<int64_t, 2> index_range(const Tensor& index) {
  std::array<int64_t, 2> r{0, -1};
  const int64_t n = index.numel();
  if (n == 0) return r;
  r = {LLONG_MAX, LLONG_MIN};
  with_indices(index, "index", [&](const auto* p) {
    for (int64_t i = 0; i < n; ++i) {
      const auto v = static_cast<int64_t>(p[i]);
      r[0] = std::min(r[0], v);
      r[1] = std::max(r[1], v);
    }
  });
  return r;
}

void index_rows(const Tensor& out, const Tensor& x, const Tensor& index, int64_t outer, int64_t n,
                int64_t inner) {
  const int64_t n_idx = index.numel();
  const size_t row_bytes = static_cast<size_t>(inner) * dtype_size(out.dtype());
  auto* d = static_cast<char*>(out.data_ptr());
  const auto* s = static_cast<const char*>(x.data_ptr());
  with_indices(index, "index_select", [&](const auto* idx) {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < n_idx; ++j)
        std::memcpy(d + (o * n_idx + j) * row_bytes, s + (o * n + idx[j]) * row_bytes, row_bytes);
  });
}

void index_rows_add(const Tensor& dst, const Tensor& src, const Tensor& index, int64_t outer,
                    int64_t n, int64_t inner, IndexAddOp op) {
  const int64_t n_idx = index.numel();
  const char* name = op == IndexAddOp::kBincount ? "bincount" : "index_select backward";
  dispatch_floating(dst.dtype(), name, [&]<typename T>() {
    T* d = dst.data<T>();
    const T* s = src.data<T>();
    with_indices(index, name, [&](const auto* idx) {
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t j = 0; j < n_idx; ++j) {
          T* drow = d + (o * n + idx[j]) * inner;
          const T* srow = s + (o * n_idx + j) * inner;
          for (int64_t k = 0; k < inner; ++k) drow[k] = T(acc_t<T>(drow[k]) + acc_t<T>(srow[k]));
        }
      }
    });
  });
}

void gather_offsets(const Tensor& offsets, const Tensor& index, const Shape& x_sizes, int64_t dim) {
  const Shape xst = contiguous_strides(x_sizes);
  const Shape& isz = index.sizes();
  const int64_t n = index.numel(), nd = index.dim();
  int64_t* off = offsets.data<int64_t>();
  with_indices(index, "gather", [&](const auto* idx) {
    for (int64_t i = 0; i < n; ++i) {
      int64_t rem = i, o = 0;
      for (int64_t d = nd - 1; d >= 0; --d) {
        const int64_t c = rem % isz[d];
        rem /= isz[d];
        o += (d == dim ? static_cast<int64_t>(idx[i]) : c) * xst[d];
      }
      off[i] = o;
    }
  });
}

void take(const Tensor& out, const Tensor& x, const Tensor& offsets) {
  const int64_t n = out.numel();
  const int64_t* off = offsets.data<int64_t>();
  dispatch_all(out.dtype(), [&]<typename T>() {
    const T* s = static_cast<const T*>(x.data_ptr());
    T* o = static_cast<T*>(out.data_ptr());
    for (int64_t i = 0; i < n; ++i) o[i] = s[off[i]];
  });
}

void put_add(const Tensor& dst, const Tensor& src, const Tensor& offsets) {
  ZT_CHECK(offsets.dtype() == DType::i64, "put_add: offsets must be i64");
  const int64_t n = offsets.numel();
  const int64_t* off = offsets.data<int64_t>();
  dispatch_floating(dst.dtype(), "gather backward", [&]<typename T>() {
    T* d = dst.data<T>();
    const T* s = src.data<T>();
    for (int64_t i = 0; i < n; ++i) d[off[i]] = T(acc_t<T>(d[off[i]]) + acc_t<T>(s[i]));
  });
}

void one_hot(const Tensor& out, const Tensor& ids, int64_t classes) {
  ZT_CHECK(out.dtype() == DType::f32, "one_hot: output must be f32");
  const int64_t n = ids.numel();
  float* o = out.data<float>();
  with_indices(ids, "one_hot", [&](const auto* p) {
    for (int64_t i = 0; i < n; ++i) o[i * classes + static_cast<int64_t>(p[i])] = 1.0f;
  });
}

void arg_extreme(const Tensor& out, const Tensor& x, int64_t rows, int64_t n, bool want_max) {
  ZT_CHECK(out.dtype() == DType::i64, "argmax/argmin: output must be i64");
  if (rows == 0) return;
  ZT_CHECK(n > 0, "argmax/argmin over an empty dimension");
  dispatch_all(x.dtype(), [&]<typename T>() {
    const T* px = static_cast<const T*>(x.data_ptr());
    if (want_max) {
      first_extreme<true>(out.data<int64_t>(), px, rows, n);
    } else {
      first_extreme<false>(out.data<int64_t>(), px, rows, n);
    }
  });
}

void nearest_forward(const Tensor& out, const Tensor& x, int64_t planes, const Shape& in_dhw,
                     const Shape& out_dhw) {
  const NearestPlan p(in_dhw, out_dhw);
  dispatch_all(out.dtype(), [&]<typename T>() {
    const T* px = static_cast<const T*>(x.data_ptr());
    T* py = static_cast<T*>(out.data_ptr());
    parallel_for(planes, grain_for(p.out_plane), [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        T* dst = py + b * p.out_plane;
        for (int64_t od = 0; od < p.out[0]; ++od) {
          for (int64_t oh = 0; oh < p.out[1]; ++oh, dst += p.out[2]) {
            const T* src = px + b * p.in_plane + p.in_row(od, oh);
            for (int64_t ow = 0; ow < p.out[2]; ++ow) dst[ow] = src[p.w[ow]];
          }
        }
      }
    });
  });
}

void nearest_backward(const Tensor& gx, const Tensor& gy, int64_t planes, const Shape& in_dhw,
                      const Shape& out_dhw) {
  const NearestPlan p(in_dhw, out_dhw);
  dispatch_floating(gx.dtype(), "interpolate_nearest backward", [&]<typename T>() {
    using A = acc_t<T>;
    const T* pgy = gy.data<T>();
    T* pgx = gx.data<T>();
    parallel_for(planes, grain_for(p.out_plane), [&](int64_t b0, int64_t b1) {
      // Each input element's sum in A, rounded to T once (a 16-bit gradient summed in 16
      // bits loses about a bit per doubling of the scale), in the order the GPU adds.
      std::vector<A> wide(std::is_same_v<T, A> ? 0 : p.in_plane);
      for (int64_t b = b0; b < b1; ++b) {
        const T* src = pgy + b * p.out_plane;
        A* plane;
        if constexpr (std::is_same_v<T, A>)
          plane = pgx + b * p.in_plane;
        else
          plane = wide.data();
        std::fill_n(plane, p.in_plane, A(0));
        for (int64_t od = 0; od < p.out[0]; ++od) {
          for (int64_t oh = 0; oh < p.out[1]; ++oh, src += p.out[2]) {
            A* dst = plane + p.in_row(od, oh);
            for (int64_t ow = 0; ow < p.out[2]; ++ow) dst[p.w[ow]] += A(src[ow]);
          }
        }
        if constexpr (!std::is_same_v<T, A>)
          for (int64_t i = 0; i < p.in_plane; ++i) pgx[b * p.in_plane + i] = T(wide[i]);
      }
    });
  });
}

}  // namespace zt::cpu
