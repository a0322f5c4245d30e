// CPU elementwise kernels: unary, binary (incl. backward helpers), axpy, where, copy,
// multi_copy, fill and row sums. These are the specification of the CUDA kernels of the
// same names.
#include <algorithm>
#include <cmath>

#include "core/cpu/lanes.h"
#include "core/cpu/loops.h"
#include "core/kernel_checks.h"
#include "core/kernels.h"

namespace zt::cpu {

namespace {

// S -> D as copy converts: 16-bit floats go through float on either side.
template <typename D, typename S>
inline D convert(S x) {
  if constexpr (std::is_same_v<D, S>) {
    return x;
  } else if constexpr (std::is_same_v<S, bf16> || std::is_same_v<S, f16>) {
    return static_cast<D>(static_cast<float>(x));
  } else if constexpr (std::is_same_v<D, bf16> || std::is_same_v<D, f16>) {
    return D(static_cast<float>(x));
  } else {
    return static_cast<D>(x);
  }
}

// f32 GELU uses the lane arithmetic of the row kernels (lanes.h), as exp does below.
inline double gelu_erf(double x) {
  return 0.5 * x * (1.0 + std::erf(x * 0.70710678118654752440));
}
inline float gelu_erf(float x) {
  return gelu_lanes(x);
}
inline double gelu_erf_grad(double g, double x) {
  const double cdf = 0.5 * (1.0 + std::erf(x * 0.70710678118654752440));
  const double pdf = std::exp(-0.5 * x * x) * 0.39894228040143267794;
  return g * (cdf + x * pdf);
}
inline float gelu_erf_grad(float g, float x) {
  return gelu_grad_lanes(g, x);
}

inline double exp_any(double x) {
  return std::exp(x);
}
// The f32 overload serves 16-bit types (whose accumulation type is f32) with the lane
// arithmetic of the row kernels (lanes.h); f32 tensors go through the row kernels
// themselves (lane_row_strided).
inline float exp_any(float x) {
  return exp_lanes(x);
}

template <typename A>
A sigmoid(A x) {
  return A(1) / (A(1) + exp_any(-x));
}

// One elementwise function per op, chosen at compile time so the loops over a row are
// specialized (and vectorized where the op allows) instead of branching per element.
template <UnaryOp Op, typename A>
A unary_fn(A x, A p0, A p1) {
  if constexpr (Op == UnaryOp::kNeg) return -x;
  if constexpr (Op == UnaryOp::kExp) return exp_any(x);
  if constexpr (Op == UnaryOp::kLog) return std::log(x);
  if constexpr (Op == UnaryOp::kSqrt) return std::sqrt(x);
  if constexpr (Op == UnaryOp::kRsqrt) return A(1) / std::sqrt(x);
  if constexpr (Op == UnaryOp::kAbs) return std::abs(x);
  if constexpr (Op == UnaryOp::kRelu) return x > A(0) || x != x ? x : A(0);  // NaN stays
  if constexpr (Op == UnaryOp::kSilu) return x * sigmoid(x);
  if constexpr (Op == UnaryOp::kSigmoid) return sigmoid(x);
  if constexpr (Op == UnaryOp::kTanh) return std::tanh(x);
  if constexpr (Op == UnaryOp::kGelu) return gelu_erf(x);
  if constexpr (Op == UnaryOp::kGeluTanh) return gelu_tanh_of(x);
  if constexpr (Op == UnaryOp::kPow) return p0 == A(2) ? x * x : std::pow(x, p0);
  if constexpr (Op == UnaryOp::kClamp) return x < p0 ? p0 : (x > p1 ? p1 : x);
  if constexpr (Op == UnaryOp::kAffine) return x * p0 + p1;
  if constexpr (Op == UnaryOp::kSign) return x > A(0) ? A(1) : (x < A(0) ? A(-1) : A(0));
  return x;
}

template <BinaryOp Op, typename A>
A binary_fn(A a, A b) {
  if constexpr (Op == BinaryOp::kAdd) return a + b;
  if constexpr (Op == BinaryOp::kSub) return a - b;
  if constexpr (Op == BinaryOp::kMul) return a * b;
  if constexpr (Op == BinaryOp::kDiv) return a / b;
  if constexpr (Op == BinaryOp::kReluGrad) return b <= A(0) ? A(0) : a;
  if constexpr (Op == BinaryOp::kSiluGrad) {
    A s = sigmoid(b);
    return a * s * (A(1) + b * (A(1) - s));
  }
  if constexpr (Op == BinaryOp::kSigmoidGrad) return a * b * (A(1) - b);
  if constexpr (Op == BinaryOp::kTanhGrad) return a * (A(1) - b * b);
  if constexpr (Op == BinaryOp::kGeluGrad) return gelu_erf_grad(a, b);
  if constexpr (Op == BinaryOp::kGeluTanhGrad) return gelu_tanh_grad_of(a, b);
  if constexpr (Op == BinaryOp::kEq) return a == b;
  if constexpr (Op == BinaryOp::kNe) return a != b;
  if constexpr (Op == BinaryOp::kLt) return a < b;
  if constexpr (Op == BinaryOp::kLe) return a <= b;
  if constexpr (Op == BinaryOp::kGt) return a > b;
  if constexpr (Op == BinaryOp::kGe) return a >= b;
  return a;
}

// The row kernel of a unary op on contiguous f32 rows, if it has one.
constexpr auto kNoLaneOp = static_cast<LaneOp>(255);
template <UnaryOp Op>
constexpr LaneOp lane_op() {
  if constexpr (Op == UnaryOp::kExp) return LaneOp::kExp;
  if constexpr (Op == UnaryOp::kSigmoid) return LaneOp::kSigmoid;
  if constexpr (Op == UnaryOp::kSilu) return LaneOp::kSilu;
  if constexpr (Op == UnaryOp::kGelu) return LaneOp::kGelu;
  if constexpr (Op == UnaryOp::kGeluTanh) return LaneOp::kGeluTanh;
  return kNoLaneOp;
}
template <BinaryOp Op>
constexpr LaneOp lane_op() {
  if constexpr (Op == BinaryOp::kSiluGrad) return LaneOp::kSiluGrad;
  if constexpr (Op == BinaryOp::kGeluGrad) return LaneOp::kGeluGrad;
  if constexpr (Op == BinaryOp::kGeluTanhGrad) return LaneOp::kGeluTanhGrad;
  return kNoLaneOp;
}

// Calls fn.template operator()<Op>() with the runtime op as a compile-time constant.
template <typename Fn>
void with_unary_op(UnaryOp op, Fn&& fn) {
#define ZT_UNARY_CASE(name) \
  case UnaryOp::name:       \
    return fn.template operator()<UnaryOp::name>()
  switch (op) {
    ZT_UNARY_CASE(kNeg);
    ZT_UNARY_CASE(kExp);
    ZT_UNARY_CASE(kLog);
    ZT_UNARY_CASE(kSqrt);
    ZT_UNARY_CASE(kRsqrt);
    ZT_UNARY_CASE(kAbs);
    ZT_UNARY_CASE(kRelu);
    ZT_UNARY_CASE(kSilu);
    ZT_UNARY_CASE(kSigmoid);
    ZT_UNARY_CASE(kTanh);
    ZT_UNARY_CASE(kGelu);
    ZT_UNARY_CASE(kGeluTanh);
    ZT_UNARY_CASE(kPow);
    ZT_UNARY_CASE(kClamp);
    ZT_UNARY_CASE(kAffine);
    ZT_UNARY_CASE(kSign);
  }
#undef ZT_UNARY_CASE
}
template <typename Fn>
void with_binary_op(BinaryOp op, Fn&& fn) {
#define ZT_BINARY_CASE(name) \
  case BinaryOp::name:       \
    return fn.template operator()<BinaryOp::name>()
  switch (op) {
    ZT_BINARY_CASE(kAdd);
    ZT_BINARY_CASE(kSub);
    ZT_BINARY_CASE(kMul);
    ZT_BINARY_CASE(kDiv);
    ZT_BINARY_CASE(kEq);
    ZT_BINARY_CASE(kNe);
    ZT_BINARY_CASE(kLt);
    ZT_BINARY_CASE(kLe);
    ZT_BINARY_CASE(kGt);
    ZT_BINARY_CASE(kGe);
    ZT_BINARY_CASE(kReluGrad);
    ZT_BINARY_CASE(kSiluGrad);
    ZT_BINARY_CASE(kSigmoidGrad);
    ZT_BINARY_CASE(kTanhGrad);
    ZT_BINARY_CASE(kGeluGrad);
    ZT_BINARY_CASE(kGeluTanhGrad);
  }
#undef ZT_BINARY_CASE
}

// out[i so] = op(a[i sa] (, b[i sb])), i < n, for an f32 row with strides (a transposed
// or broadcast view): the elements are gathered into contiguous chunks for the row
// kernel, so every f32 element gets a contiguous row's bits (the row kernels may fuse
// multiply-adds that one element's scalar arithmetic does not).
void lane_row_strided(LaneOp op, float* out, int64_t so, const float* a, int64_t sa, const float* b,
                      int64_t sb, int64_t n) {
  constexpr int64_t kChunk = 256;
  float ca[kChunk], cb[kChunk], co[kChunk];
  for (int64_t i0 = 0; i0 < n; i0 += kChunk) {
    const int64_t len = std::min(kChunk, n - i0);
    for (int64_t i = 0; i < len; ++i) ca[i] = a[(i0 + i) * sa];
    if (b)
      for (int64_t i = 0; i < len; ++i) cb[i] = b[(i0 + i) * sb];
    lane_row(op, co, ca, b ? cb : nullptr, len);
    for (int64_t i = 0; i < len; ++i) out[(i0 + i) * so] = co[i];
  }
}

bool is_compare(BinaryOp op) {
  return op >= BinaryOp::kEq && op <= BinaryOp::kGe;
}

}  // namespace

void unary(UnaryOp op, const Tensor& out, const Tensor& in, double p0, double p1) {
  auto l = make_loop<2>(out.sizes(), {out.strides(), in.strides()});
  dispatch_floating(in.dtype(), "unary op", [&]<typename T>() {
    using A = acc_t<T>;
    T* o = out.data<T>();
    const T* x = in.data<T>();
    A a0 = static_cast<A>(p0), a1 = static_cast<A>(p1);
    with_unary_op(op, [&]<UnaryOp Op>() {
      for_each_row(l, [&](auto off, int64_t n, auto st) {
        T* po = o + off[0];
        const T* px = x + off[1];
        if constexpr (std::is_same_v<T, float> && lane_op<Op>() != kNoLaneOp) {
          if (st[0] == 1 && st[1] == 1) return lane_row(lane_op<Op>(), po, px, nullptr, n);
          return lane_row_strided(lane_op<Op>(), po, st[0], px, st[1], nullptr, 0, n);
        }
        if (st[0] == 1 && st[1] == 1) {
          for (int64_t i = 0; i < n; ++i) po[i] = T(unary_fn<Op, A>(A(px[i]), a0, a1));
        } else {
          for (int64_t i = 0; i < n; ++i)
            po[i * st[0]] = T(unary_fn<Op, A>(A(px[i * st[1]]), a0, a1));
        }
      });
    });
  });
}

void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  auto l = make_loop<3>(out.sizes(), {out.strides(), a.strides(), b.strides()});
  if (is_compare(op)) {
    dispatch_all(a.dtype(), [&]<typename T>() {
      using A = acc_t<T>;
      bool* o = out.data<bool>();
      const T* pa = static_cast<const T*>(a.data_ptr());
      const T* pb = static_cast<const T*>(b.data_ptr());
      with_binary_op(op, [&]<BinaryOp Op>() {
        if constexpr (Op >= BinaryOp::kEq && Op <= BinaryOp::kGe) {
          for_each_row(l, [&](auto off, int64_t n, auto st) {
            for (int64_t i = 0; i < n; ++i)
              o[off[0] + i * st[0]] =
                  binary_fn<Op, A>(A(pa[off[1] + i * st[1]]), A(pb[off[2] + i * st[2]]));
          });
        }
      });
    });
    return;
  }
  dispatch_floating(a.dtype(), "binary op", [&]<typename T>() {
    using A = acc_t<T>;
    T* o = out.data<T>();
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    with_binary_op(op, [&]<BinaryOp Op>() {
      if constexpr (!(Op >= BinaryOp::kEq && Op <= BinaryOp::kGe)) {
        for_each_row(l, [&](auto off, int64_t n, auto st) {
          T* po = o + off[0];
          const T* xa = pa + off[1];
          const T* xb = pb + off[2];
          if constexpr (std::is_same_v<T, float> && lane_op<Op>() != kNoLaneOp) {
            // (casts of float* to float*: clang checks these calls for every T)
            auto* fo = reinterpret_cast<float*>(po);
            auto* fa = reinterpret_cast<const float*>(xa);
            auto* fb = reinterpret_cast<const float*>(xb);
            if (st[0] == 1 && st[1] == 1 && st[2] == 1)
              return lane_row(lane_op<Op>(), fo, fa, fb, n);
            return lane_row_strided(lane_op<Op>(), fo, st[0], fa, st[1], fb, st[2], n);
          }
          if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
            for (int64_t i = 0; i < n; ++i) po[i] = T(binary_fn<Op, A>(A(xa[i]), A(xb[i])));
          } else if (st[0] == 1 && st[1] == 1 && st[2] == 0) {
            const A bv = A(xb[0]);
            for (int64_t i = 0; i < n; ++i) po[i] = T(binary_fn<Op, A>(A(xa[i]), bv));
          } else if (st[0] == 1 && st[1] == 0 && st[2] == 1) {
            const A av = A(xa[0]);
            for (int64_t i = 0; i < n; ++i) po[i] = T(binary_fn<Op, A>(av, A(xb[i])));
          } else {
            for (int64_t i = 0; i < n; ++i)
              po[i * st[0]] = T(binary_fn<Op, A>(A(xa[i * st[1]]), A(xb[i * st[2]])));
          }
        });
      }
    });
  });
}

void axpy(const Tensor& out, const Tensor& a, const Tensor& b, double alpha) {
  auto l = make_loop<3>(out.sizes(), {out.strides(), a.strides(), b.strides()});
  dispatch_floating(out.dtype(), "axpy", [&]<typename T>() {
    using A = acc_t<T>;
    T* o = out.data<T>();
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    A al = static_cast<A>(alpha);
    for_each_row(l, [&](auto off, int64_t n, auto st) {
      T* po = o + off[0];
      const T* xa = pa + off[1];
      const T* xb = pb + off[2];
      if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
        for (int64_t i = 0; i < n; ++i) po[i] = T(A(xa[i]) + al * A(xb[i]));
      } else {
        for (int64_t i = 0; i < n; ++i) po[i * st[0]] = T(A(xa[i * st[1]]) + al * A(xb[i * st[2]]));
      }
    });
  });
}

void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  auto l = make_loop<4>(out.sizes(), {out.strides(), cond.strides(), a.strides(), b.strides()});
  dispatch_all(out.dtype(), [&]<typename T>() {
    T* o = out.data<T>();
    const bool* c = cond.data<bool>();
    const T* pa = static_cast<const T*>(a.data_ptr());
    const T* pb = static_cast<const T*>(b.data_ptr());
    for_each_row(l, [&](auto off, int64_t n, auto st) {
      for (int64_t i = 0; i < n; ++i)
        o[off[0] + i * st[0]] =
            c[off[1] + i * st[1]] ? pa[off[2] + i * st[2]] : pb[off[3] + i * st[3]];
    });
  });
}

void addcmul(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& c, double value) {
  auto l = make_loop<4>(out.sizes(), {out.strides(), a.strides(), b.strides(), c.strides()});
  dispatch_floating(out.dtype(), "addcmul", [&]<typename T>() {
    using A = acc_t<T>;
    const A v = static_cast<A>(value);
    T* o = out.data<T>();
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    const T* pc = c.data<T>();
    auto at = [&](int64_t ia, int64_t ib, int64_t ic) {
      const A p = A(pb[ib]) * A(pc[ic]);
      return T(A(pa[ia]) + (value == 1.0 ? p : A(v * p)));
    };
    for_each_row(l, [&](auto off, int64_t n, auto st) {
      if (st[0] == 1 && st[1] == 1 && st[2] == 1 && st[3] == 1) {
        for (int64_t i = 0; i < n; ++i) o[off[0] + i] = at(off[1] + i, off[2] + i, off[3] + i);
      } else {
        for (int64_t i = 0; i < n; ++i)
          o[off[0] + i * st[0]] = at(off[1] + i * st[1], off[2] + i * st[2], off[3] + i * st[3]);
      }
    });
  });
}

void copy(const Tensor& dst, const Tensor& src) {
  auto l = make_loop<2>(dst.sizes(), {dst.strides(), src.strides()});
  dispatch_all(dst.dtype(), [&]<typename D>() {
    dispatch_all(src.dtype(), [&]<typename S>() {
      D* o = static_cast<D*>(dst.data_ptr());
      const S* x = static_cast<const S*>(src.data_ptr());
      for_each_row(l, [&](auto off, int64_t n, auto st) {
        D* po = o + off[0];
        const S* px = x + off[1];
        if constexpr (std::is_same_v<D, S>) {
          if (st[0] == 1 && st[1] == 1) {
            std::memcpy(po, px, n * sizeof(D));
            return;
          }
        }
        for (int64_t i = 0; i < n; ++i) po[i * st[0]] = convert<D>(px[i * st[1]]);
      });
    });
  });
}

void multi_copy(const std::vector<Tensor>& dst, const std::vector<Tensor>& src, bool accumulate) {
  ::zt::detail::check_multi_copy(dst, src, accumulate);
  if (dst.empty()) return;
  // The pairs laid end to end: pair i covers elements [start[i], start[i + 1]). Chunks of
  // that range run in parallel, each over the pieces of the pairs it covers.
  std::vector<int64_t> start(dst.size() + 1, 0);
  for (size_t i = 0; i < dst.size(); ++i) start[i + 1] = start[i] + dst[i].numel();
  dispatch_all(dst[0].dtype(), [&]<typename D>() {
    dispatch_all(src[0].dtype(), [&]<typename S>() {
      using A = acc_t<D>;
      parallel_for(start.back(), kRowPiece, [&](int64_t begin, int64_t end) {
        size_t i = std::upper_bound(start.begin(), start.end(), begin) - start.begin() - 1;
        for (; i < dst.size() && start[i] < end; ++i) {
          const int64_t lo = std::max(begin, start[i]) - start[i];
          const int64_t hi = std::min(end, start[i + 1]) - start[i];
          D* o = dst[i].data<D>();
          const S* x = src[i].data<S>();
          if (accumulate) {
            for (int64_t j = lo; j < hi; ++j) o[j] = D(A(o[j]) + A(convert<D>(x[j])));
          } else if constexpr (std::is_same_v<D, S>) {
            std::memcpy(o + lo, x + lo, (hi - lo) * sizeof(D));
          } else {
            for (int64_t j = lo; j < hi; ++j) o[j] = convert<D>(x[j]);
          }
        }
      });
    });
  });
}

void fill(const Tensor& dst, double value) {
  auto l = make_loop<1>(dst.sizes(), {dst.strides()});
  dispatch_all(dst.dtype(), [&]<typename T>() {
    T v;
    if constexpr (std::is_same_v<T, bf16> || std::is_same_v<T, f16>) {
      v = T(static_cast<float>(value));
    } else {
      v = static_cast<T>(value);
    }
    T* o = static_cast<T*>(dst.data_ptr());
    for_each_row(l, [&](auto off, int64_t n, auto st) {
      for (int64_t i = 0; i < n; ++i) o[off[0] + i * st[0]] = v;
    });
  });
}

void sum_rows(const Tensor& out, const Tensor& in, int64_t rows, int64_t inner) {
  dispatch_floating(in.dtype(), "sum", [&]<typename T>() {
    const T* x = in.data<T>();
    T* o = out.data<T>();
    parallel_for(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(inner, 1)),
                 [&](int64_t r0, int64_t r1) {
                   // kLanes independent double sums in a fixed order (deterministic, and
                   // not one chain of dependent adds), combined at the end.
                   constexpr int64_t kLanes = 8;
                   for (int64_t r = r0; r < r1; ++r) {
                     const T* p = x + r * inner;
                     double acc[kLanes] = {};
                     int64_t i = 0;
                     for (; i + kLanes <= inner; i += kLanes)
                       for (int64_t j = 0; j < kLanes; ++j) acc[j] += static_cast<double>(p[i + j]);
                     double s = 0;
                     for (; i < inner; ++i) s += static_cast<double>(p[i]);
                     for (int64_t j = 0; j < kLanes; ++j) s += acc[j];
                     o[r] = T(static_cast<acc_t<T>>(s));
                   }
                 });
  });
}

}  // namespace zt::cpu
