// The optimizer kernels of the device kernel table (cpu::adam_update, cpu::sgd_update),
// called directly: their bits against a scalar loop that follows the contract in
// core/kernel_list.h operation by operation, the 16-bit copies written in the same pass
// (bits of Tensor::to), one call over many tensors against one call per tensor, the same
// bits with the blocks of a long tensor spread over several threads, and the errors for
// lists that break the contract.
#include <cmath>
#include <cstring>
#include <vector>

#include "common/test_util.h"
#include "core/kernels.h"
#include "core/ops.h"
#include "core/ops/optim.h"
#include "core/rng.h"

using namespace zt;

namespace {

Tensor normal(int64_t n, uint64_t seed, DType dt) {
  Generator g(seed);
  return randn({n}, g, DType::f64).to(dt);
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.numel() == b.numel() &&
         std::memcmp(a.data_ptr(), b.data_ptr(), a.numel() * dtype_size(a.dtype())) == 0;
}

// One parameter's tensors: p, g, two state slots (positive second moment for Adam).
struct Entry {
  Tensor p, g, s0, s1;
};

Entry make_entry(int64_t n, uint64_t seed, DType dt) {
  return {normal(n, seed, dt), normal(n, seed + 1, dt), normal(n, seed + 2, dt),
          abs(normal(n, seed + 3, dt))};
}

Entry clone(const Entry& e) {
  return {e.p.clone(), e.g.clone(), e.s0.clone(), e.s1.clone()};
}

// The Adam contract, one element at a time, in T (but 1 - beta: in double, rounded once).
template <typename T>
void adam_reference(const Entry& e, double b1, double b2, double l2, double decay, double step,
                    double ibc2, double eps) {
  T *p = e.p.data<T>(), *m = e.s0.data<T>(), *v = e.s1.data<T>();
  const T* g = e.g.data<T>();
  const T tb1 = static_cast<T>(b1), tb2 = static_cast<T>(b2), tl2 = static_cast<T>(l2),
          tdecay = static_cast<T>(decay), tstep = static_cast<T>(step),
          tibc2 = static_cast<T>(ibc2), teps = static_cast<T>(eps);
  // 1 - beta in double, rounded once, as PyTorch's scalar arguments.
  const T omb1 = static_cast<T>(1.0 - b1), omb2 = static_cast<T>(1.0 - b2);
  for (int64_t i = 0; i < e.p.numel(); ++i) {
    volatile T gi = g[i] + tl2 * p[i];  // volatile: one rounding per statement
    volatile T mi = tb1 * m[i] + omb1 * gi;
    volatile T vi = tb2 * v[i] + omb2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    volatile T denom = std::sqrt(static_cast<T>(vi)) * tibc2 + teps;
    p[i] = p[i] * tdecay - tstep * mi / denom;
  }
}

// The SGD contract, one element at a time, in T (buffer s0 when momentum != 0).
template <typename T>
void sgd_reference(const Entry& e, double lr, double mom, double damp, double wd, bool nesterov,
                   bool first) {
  T *p = e.p.data<T>(), *b = e.s0.data<T>();
  const T* g = e.g.data<T>();
  for (int64_t i = 0; i < e.p.numel(); ++i) {
    T d = g[i] + static_cast<T>(wd) * p[i];
    if (mom != 0) {
      b[i] = first ? d : static_cast<T>(mom) * b[i] + static_cast<T>(1 - damp) * d;
      d = nesterov ? d + static_cast<T>(mom) * b[i] : b[i];
    }
    p[i] -= static_cast<T>(lr) * d;
  }
}

const std::vector<int64_t> kSizes = {1, 7, 8193, 20000, 3};  // odd sizes, some over a block

}  // namespace

TEST(OptimKernels, AdamMatchesTheContractBitForBitWithCopies) {
  for (DType dt : {DType::f32, DType::f64}) {
    std::vector<Entry> ref, got;
    std::vector<Tensor> p, g, m, v, low;
    for (size_t i = 0; i < kSizes.size(); ++i) {
      ref.push_back(make_entry(kSizes[i], 10 * i + 1, dt));
      got.push_back(clone(ref.back()));
      p.push_back(got[i].p);
      g.push_back(got[i].g);
      m.push_back(got[i].s0);
      v.push_back(got[i].s1);
      // bf16 copies except for the second entry, which has none.
      low.push_back(i == 1 ? Tensor() : Tensor::empty({kSizes[i]}, DType::bf16));
    }
    for (int step = 1; step <= 3; ++step) {
      const double lr = 0.01, b1 = 0.9, b2 = 0.999, wd = 0.1 * (step % 2);
      const double bc = lr / (1 - std::pow(b1, step)), ibc2 = 1 / std::sqrt(1 - std::pow(b2, step));
      const double decay = 1 - lr * 0.01;
      cpu::adam_update(p, g, m, v, low, b1, b2, wd, decay, bc, ibc2, 1e-8);
      for (auto& e : ref) {
        if (dt == DType::f32)
          adam_reference<float>(e, b1, b2, wd, decay, bc, ibc2, 1e-8);
        else
          adam_reference<double>(e, b1, b2, wd, decay, bc, ibc2, 1e-8);
      }
      for (size_t i = 0; i < ref.size(); ++i) {
        EXPECT_TRUE(same_bits(got[i].p, ref[i].p)) << dtype_name(dt) << " entry " << i;
        EXPECT_TRUE(same_bits(got[i].s0, ref[i].s0)) << dtype_name(dt) << " entry " << i;
        EXPECT_TRUE(same_bits(got[i].s1, ref[i].s1)) << dtype_name(dt) << " entry " << i;
        if (low[i].defined()) {
          EXPECT_TRUE(same_bits(low[i], ref[i].p.to(DType::bf16)));
        }
      }
    }
  }
}

TEST(OptimKernels, SgdMatchesTheContractInEveryMode) {
  struct Mode {
    double mom, damp, wd;
    bool nesterov;
  };
  for (Mode mode : {Mode{0, 0, 0, false}, Mode{0.9, 0, 1e-2, true}, Mode{0.8, 0.3, 0, false}}) {
    std::vector<Entry> ref, got;
    std::vector<Tensor> p, g, buf, low;
    for (size_t i = 0; i < kSizes.size(); ++i) {
      ref.push_back(make_entry(kSizes[i], 7 * i + 3, DType::f32));
      got.push_back(clone(ref.back()));
      p.push_back(got[i].p);
      g.push_back(got[i].g);
      if (mode.mom != 0) buf.push_back(got[i].s0);
      low.push_back(Tensor::empty({kSizes[i]}, DType::f16));
    }
    for (int step = 0; step < 3; ++step) {
      cpu::sgd_update(p, g, buf, low, 0.05, mode.mom, mode.damp, mode.wd, mode.nesterov, step == 0);
      for (auto& e : ref)
        sgd_reference<float>(e, 0.05, mode.mom, mode.damp, mode.wd, mode.nesterov, step == 0);
      for (size_t i = 0; i < ref.size(); ++i) {
        EXPECT_TRUE(same_bits(got[i].p, ref[i].p)) << "momentum " << mode.mom << " entry " << i;
        if (mode.mom != 0) {
          EXPECT_TRUE(same_bits(got[i].s0, ref[i].s0));
        }
        EXPECT_TRUE(same_bits(low[i], ref[i].p.to(DType::f16)));
      }
    }
  }
}

TEST(OptimKernels, ManyTensorsInOneCallEqualOneCallEach) {
  std::vector<Entry> one, many;
  std::vector<Tensor> p, g, m, v;
  for (size_t i = 0; i < kSizes.size(); ++i) {
    one.push_back(make_entry(kSizes[i], 5 * i + 2, DType::f32));
    many.push_back(clone(one.back()));
    p.push_back(many[i].p);
    g.push_back(many[i].g);
    m.push_back(many[i].s0);
    v.push_back(many[i].s1);
  }
  cpu::adam_update(p, g, m, v, {}, 0.9, 0.99, 0, 0.999, 1e-3, 1.1, 1e-6);
  for (const Entry& e : one)
    cpu::adam_update({e.p}, {e.g}, {e.s0}, {e.s1}, {}, 0.9, 0.99, 0, 0.999, 1e-3, 1.1, 1e-6);
  for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(same_bits(one[i].p, many[i].p));
}

TEST(OptimKernels, ListsThatBreakTheContractAreErrors) {
  Entry a = make_entry(5, 1, DType::f32), b = make_entry(6, 2, DType::f32);
  // A gradient of another numel.
  EXPECT_TRUE(test::throws_with(
      [&] { cpu::adam_update({a.p}, {b.g}, {a.s0}, {a.s1}, {}, 0.9, 0.9, 0, 1, 1, 1, 1); },
      "one dtype and numel"));
  // A list one entry short.
  EXPECT_TRUE(test::throws_with(
      [&] {
        cpu::sgd_update({a.p, b.p}, {a.g}, {}, {}, 0.1, 0, 0, 0, false, false);
      },
      "tensors in a list"));
  // A copy that is not 16-bit.
  EXPECT_TRUE(test::throws_with(
      [&] { cpu::sgd_update({a.p}, {a.g}, {}, {a.s0}, 0.1, 0, 0, 0, false, false); }, "bf16/f16"));
  // f16 parameters.
  Tensor h = a.p.to(DType::f16);
  EXPECT_TRUE(test::throws_with(
      [&] { cpu::sgd_update({h}, {h.clone()}, {}, {}, 0.1, 0, 0, 0, false, false); },
      "f32 or f64"));
}

TEST(OptimKernels, SeveralThreadsGiveTheContractsBitsInEveryBlock) {
  // 40000 elements are five Adam blocks (8192) and three SGD blocks (16384), the last ones
  // partial: with three threads each block must still update its own slice of every
  // array (parameter, gradient, both moments or the momentum buffer, the 16-bit copy).
  test::ThreadCount threads(3);
  const int64_t n = 40000;
  Entry ref = make_entry(n, 91, DType::f32), got = clone(ref);
  Tensor low = Tensor::empty({n}, DType::bf16);
  for (int step = 1; step <= 2; ++step) {
    cpu::adam_update({got.p}, {got.g}, {got.s0}, {got.s1}, {low}, 0.9, 0.999, 0.1, 0.999, 1e-3, 1.2,
                     1e-8);
    adam_reference<float>(ref, 0.9, 0.999, 0.1, 0.999, 1e-3, 1.2, 1e-8);
    EXPECT_TRUE(same_bits(got.p, ref.p)) << "Adam step " << step;
    EXPECT_TRUE(same_bits(got.s0, ref.s0)) << "Adam step " << step;
    EXPECT_TRUE(same_bits(got.s1, ref.s1)) << "Adam step " << step;
    EXPECT_TRUE(same_bits(low, ref.p.to(DType::bf16))) << "Adam step " << step;
  }
  Entry sref = make_entry(n, 95, DType::f32), sgot = clone(sref);
  Tensor half = Tensor::empty({n}, DType::f16);
  for (int step = 0; step < 2; ++step) {
    cpu::sgd_update({sgot.p}, {sgot.g}, {sgot.s0}, {half}, 0.05, 0.9, 0.1, 1e-2, true, step == 0);
    sgd_reference<float>(sref, 0.05, 0.9, 0.1, 1e-2, true, step == 0);
    EXPECT_TRUE(same_bits(sgot.p, sref.p)) << "SGD step " << step;
    EXPECT_TRUE(same_bits(sgot.s0, sref.s0)) << "SGD step " << step;
    EXPECT_TRUE(same_bits(half, sref.p.to(DType::f16))) << "SGD step " << step;
  }
}

// An update refused for its arguments writes nothing, and so counts no write: a graph that
// saved the parameter still backpropagates (a write counted before the kernel's checks made
// autograd refuse it as written in place). A done update counts its writes of the
// parameter and of each moment.
TEST(OptimKernels, ARefusedUpdateCountsNoWriteAndADoneOneCountsEveryTensorItWrites) {
  Entry a = make_entry(5, 1, DType::f32), b = make_entry(6, 2, DType::f32);
  Tensor w = a.p.clone().set_requires_grad();
  Tensor loss = sum(mul(w, w));  // saves w
  Tensor wd = w.detach();        // the same storage, as an optimizer holds it
  EXPECT_TRUE(test::throws_with(
      [&] { adam_update({wd}, {b.g}, {a.s0}, {a.s1}, {}, 0.9, 0.9, 0, 1, 1, 1, 1); },
      "one dtype and numel"));
  EXPECT_TRUE(test::throws_with(
      [&] { sgd_update({wd}, {b.g}, {}, {}, 0.1, 0, 0, 0, false, false); }, "one dtype and numel"));
  loss.backward();
  EXPECT_TRUE(w.grad().defined());

  // Each moment of a done update is written, as saved tensors see it.
  Tensor m = a.s0.clone().set_requires_grad(), v = a.s1.clone().set_requires_grad();
  Tensor uses = add(sum(mul(m, m)), sum(mul(v, v)));
  adam_update({a.p}, {a.g}, {m.detach()}, {v.detach()}, {}, 0.9, 0.99, 0, 1, 1e-3, 1.1, 1e-6);
  EXPECT_TRUE(test::throws_with([&] { uses.backward(); }, "written in place"));
}
