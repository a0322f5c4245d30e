// CPU elementwise kernels: unary, binary (incl. backward helpers), axpy, where, copy,
// fill and row sums. These are the specification of the CUDA kernels of the same names.
#include <cmath>

#include "core/cpu/loops.h"
#include "core/kernels.h"

namespace zt::cpu {

namespace {

template <typename A>
A gelu_erf(A x) {
  return A(0.5) * x * (A(1) + std::erf(x * A(0.70710678118654752440)));
}
template <typename A>
A gelu_tanh(A x) {
  const A k = A(0.79788456080286535588);  // sqrt(2/pi)
  return A(0.5) * x * (A(1) + std::tanh(k * (x + A(0.044715) * x * x * x)));
}
template <typename A>
A sigmoid(A x) {
  return A(1) / (A(1) + std::exp(-x));
}

template <typename A>
A apply_unary(UnaryOp op, A x, A p0, A p1) {
  switch (op) {
    case UnaryOp::kNeg: return -x;
    case UnaryOp::kExp: return std::exp(x);
    case UnaryOp::kLog: return std::log(x);
    case UnaryOp::kSqrt: return std::sqrt(x);
    case UnaryOp::kRsqrt: return A(1) / std::sqrt(x);
    case UnaryOp::kAbs: return std::abs(x);
    case UnaryOp::kRelu: return x > A(0) ? x : A(0);
    case UnaryOp::kSilu: return x * sigmoid(x);
    case UnaryOp::kSigmoid: return sigmoid(x);
    case UnaryOp::kTanh: return std::tanh(x);
    case UnaryOp::kGelu: return gelu_erf(x);
    case UnaryOp::kGeluTanh: return gelu_tanh(x);
    case UnaryOp::kPow: return p0 == A(2) ? x * x : std::pow(x, p0);
    case UnaryOp::kClamp: return x < p0 ? p0 : (x > p1 ? p1 : x);
    case UnaryOp::kAffine: return x * p0 + p1;
    case UnaryOp::kSign: return x > A(0) ? A(1) : (x < A(0) ? A(-1) : A(0));
  }
  return x;
}

template <typename A>
A apply_binary(BinaryOp op, A a, A b) {
  switch (op) {
    case BinaryOp::kAdd: return a + b;
    case BinaryOp::kSub: return a - b;
    case BinaryOp::kMul: return a * b;
    case BinaryOp::kDiv: return a / b;
    case BinaryOp::kReluGrad: return b > A(0) ? a : A(0);
    case BinaryOp::kSiluGrad: {
      A s = sigmoid(b);
      return a * s * (A(1) + b * (A(1) - s));
    }
    case BinaryOp::kSigmoidGrad: return a * b * (A(1) - b);
    case BinaryOp::kTanhGrad: return a * (A(1) - b * b);
    case BinaryOp::kGeluGrad: {
      A cdf = A(0.5) * (A(1) + std::erf(b * A(0.70710678118654752440)));
      A pdf = std::exp(A(-0.5) * b * b) * A(0.39894228040143267794);
      return a * (cdf + b * pdf);
    }
    case BinaryOp::kGeluTanhGrad: {
      const A k = A(0.79788456080286535588);
      A u = k * (b + A(0.044715) * b * b * b);
      A t = std::tanh(u);
      A du = k * (A(1) + A(3) * A(0.044715) * b * b);
      return a * (A(0.5) * (A(1) + t) + A(0.5) * b * (A(1) - t * t) * du);
    }
    default: return a;  // comparisons are handled separately
  }
}

template <typename A>
bool apply_compare(BinaryOp op, A a, A b) {
  switch (op) {
    case BinaryOp::kEq: return a == b;
    case BinaryOp::kNe: return a != b;
    case BinaryOp::kLt: return a < b;
    case BinaryOp::kLe: return a <= b;
    case BinaryOp::kGt: return a > b;
    case BinaryOp::kGe: return a >= b;
    default: return false;
  }
}

bool is_compare(BinaryOp op) { return op >= BinaryOp::kEq && op <= BinaryOp::kGe; }

}  // namespace

void unary(UnaryOp op, const Tensor& out, const Tensor& in, double p0, double p1) {
  auto l = make_loop<2>(out.sizes(), {out.strides(), in.strides()});
  dispatch_floating(in.dtype(), "unary op", [&]<typename T>() {
    using A = acc_t<T>;
    T* o = out.data<T>();
    const T* x = in.data<T>();
    A a0 = static_cast<A>(p0), a1 = static_cast<A>(p1);
    for_each_row(l, [&](auto off, int64_t n, auto st) {
      T* po = o + off[0];
      const T* px = x + off[1];
      if (st[0] == 1 && st[1] == 1) {
        for (int64_t i = 0; i < n; ++i) po[i] = T(apply_unary<A>(op, A(px[i]), a0, a1));
      } else {
        for (int64_t i = 0; i < n; ++i)
          po[i * st[0]] = T(apply_unary<A>(op, A(px[i * st[1]]), a0, a1));
      }
    });
  });
}

void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  auto l = make_loop<3>(out.sizes(), {out.strides(), a.strides(), b.strides()});
  if (is_compare(op)) {
    dispatch_all(a.dtype(), [&]<typename T>() {
      using A = std::conditional_t<std::is_same_v<T, bool>, int, acc_t<T>>;
      bool* o = out.data<bool>();
      const T* pa = static_cast<const T*>(a.data_ptr());
      const T* pb = static_cast<const T*>(b.data_ptr());
      for_each_row(l, [&](auto off, int64_t n, auto st) {
        for (int64_t i = 0; i < n; ++i)
          o[off[0] + i * st[0]] =
              apply_compare<A>(op, A(pa[off[1] + i * st[1]]), A(pb[off[2] + i * st[2]]));
      });
    });
    return;
  }
  dispatch_floating(a.dtype(), "binary op", [&]<typename T>() {
    using A = acc_t<T>;
    T* o = out.data<T>();
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    for_each_row(l, [&](auto off, int64_t n, auto st) {
      T* po = o + off[0];
      const T* xa = pa + off[1];
      const T* xb = pb + off[2];
      if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
        for (int64_t i = 0; i < n; ++i) po[i] = T(apply_binary<A>(op, A(xa[i]), A(xb[i])));
      } else if (st[0] == 1 && st[1] == 1 && st[2] == 0) {
        A bv = A(xb[0]);
        for (int64_t i = 0; i < n; ++i) po[i] = T(apply_binary<A>(op, A(xa[i]), bv));
      } else {
        for (int64_t i = 0; i < n; ++i)
          po[i * st[0]] = T(apply_binary<A>(op, A(xa[i * st[1]]), A(xb[i * st[2]])));
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
      for (int64_t i = 0; i < n; ++i)
        o[off[0] + i * st[0]] = T(A(pa[off[1] + i * st[1]]) + al * A(pb[off[2] + i * st[2]]));
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
        for (int64_t i = 0; i < n; ++i) {
          if constexpr (std::is_same_v<D, S>) {
            po[i * st[0]] = px[i * st[1]];
          } else if constexpr (std::is_same_v<S, bf16> || std::is_same_v<S, f16>) {
            po[i * st[0]] = static_cast<D>(static_cast<float>(px[i * st[1]]));
          } else if constexpr (std::is_same_v<D, bf16> || std::is_same_v<D, f16>) {
            po[i * st[0]] = D(static_cast<float>(px[i * st[1]]));
          } else {
            po[i * st[0]] = static_cast<D>(px[i * st[1]]);
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
    using A = std::conditional_t<std::is_same_v<T, double>, double, double>;
    const T* x = in.data<T>();
    T* o = out.data<T>();
    parallel_for(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(inner, 1)),
                 [&](int64_t r0, int64_t r1) {
                   for (int64_t r = r0; r < r1; ++r) {
                     const T* p = x + r * inner;
                     A s = 0;
                     for (int64_t i = 0; i < inner; ++i) s += A(p[i]);
                     o[r] = T(static_cast<acc_t<T>>(s));
                   }
                 });
  });
}

}  // namespace zt::cpu
