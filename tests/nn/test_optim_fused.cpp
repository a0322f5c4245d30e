// Optimizers stepping many parameters at once (update_many over the kernel table's fused
// kernels): the same bits as one optimizer per parameter, parameters at different step
// counts grouped apart, and low-precision copies written by every path (fused in the
// pass for bf16/f16, copied after for other dtypes and for the generic ops path).
#include <cstring>
#include <memory>

#include "common/test_util.h"
#include "core/kernel_profile.h"
#include "core/rng.h"
#include "optim/optim.h"

using namespace zt;

namespace {

bool same_bits(const Tensor& a, const Tensor& b) {
  Tensor x = a.contiguous(), y = b.contiguous();
  return x.dtype() == y.dtype() && x.numel() == y.numel() &&
         std::memcmp(x.data_ptr(), y.data_ptr(), x.numel() * dtype_size(x.dtype())) == 0;
}

Tensor normal(const Shape& s, uint64_t seed) {
  Generator g(seed);
  return randn(s, g, DType::f64).to(DType::f32);
}

using Factory = std::function<std::unique_ptr<optim::Optimizer>(optim::NamedTensors)>;

std::vector<Factory> factories() {
  return {
      [](optim::NamedTensors p) {
        return std::make_unique<optim::Adam>(std::move(p),
                                             optim::AdamOptions(0.01).weight_decay(0.1));
      },
      [](optim::NamedTensors p) {
        return std::make_unique<optim::AdamW>(std::move(p), optim::AdamWOptions(0.01));
      },
      [](optim::NamedTensors p) {
        return std::make_unique<optim::SGD>(
            std::move(p), optim::SGDOptions(0.1).momentum(0.9).nesterov(true).weight_decay(0.01));
      },
      [](optim::NamedTensors p) {
        return std::make_unique<optim::SGD>(std::move(p), optim::SGDOptions(0.1));
      },
  };
}

}  // namespace

TEST(OptimFused, GroupStepEqualsOneOptimizerPerParameter) {
  const std::vector<Shape> shapes = {{3, 5}, {1}, {9000}, {7, 11, 13}};
  for (const Factory& make : factories()) {
    optim::NamedTensors together;
    std::vector<Tensor> alone;
    std::vector<std::unique_ptr<optim::Optimizer>> alone_opts;
    for (size_t i = 0; i < shapes.size(); ++i) {
      Tensor p = normal(shapes[i], i + 1);
      together.emplace_back("p" + std::to_string(i), p.clone());
      alone.push_back(p.clone());
      alone_opts.push_back(make({{"p", alone.back()}}));
    }
    auto opt = make(together);
    for (int step = 0; step < 4; ++step) {
      for (size_t i = 0; i < shapes.size(); ++i) {
        // Parameter 1 has no gradient at step 0, so its step count lags the others'.
        if (i == 1 && step == 0) continue;
        Tensor g = normal(shapes[i], 100 * step + i);
        together[i].second.set_grad(g);
        alone[i].set_grad(g);
        alone_opts[i]->step();
      }
      opt->step();
      opt->zero_grad();
    }
    for (size_t i = 0; i < shapes.size(); ++i)
      EXPECT_TRUE(same_bits(together[i].second, alone[i])) << "parameter " << i;
  }
}

TEST(OptimFused, LowPrecisionCopiesFollowEveryPath) {
  for (const Factory& make : factories()) {
    Tensor dense = normal({4, 6}, 1);
    Tensor strided = normal({6, 4}, 2).transpose(0, 1);  // the generic ops path
    Tensor wide = normal({5000}, 3);
    auto opt = make({{"dense", dense}, {"strided", strided}, {"wide", wide}});
    Tensor c_dense = Tensor::empty({24}, DType::bf16);  // another shape, the same numel
    Tensor c_strided = Tensor::empty({4, 6}, DType::f16);
    Tensor c_wide = Tensor::empty({5000}, DType::f64);  // not 16-bit: copied after the pass
    opt->set_low_precision_copy("dense", c_dense);
    opt->set_low_precision_copy("strided", c_strided);
    opt->set_low_precision_copy("wide", c_wide);
    for (int step = 0; step < 3; ++step) {
      dense.set_grad(normal({4, 6}, 10 + step));
      strided.set_grad(normal({4, 6}, 20 + step));
      wide.set_grad(normal({5000}, 30 + step));
      opt->step();
      EXPECT_TRUE(same_bits(c_dense, dense.to(DType::bf16).reshape({24})));
      EXPECT_TRUE(same_bits(c_strided, strided.to(DType::f16)));
      EXPECT_TRUE(same_bits(c_wide, wide.to(DType::f64)));
    }
    // On the fused path a bf16 copy is written in the update kernel's pass: the step
    // dispatches no copy of its own for it (the other copies above are made after).
    {
      optim::NamedTensors alone{{"d", normal({4, 6}, 1)}};
      auto o = make(alone);
      o->set_low_precision_copy("d", Tensor::empty({24}, DType::bf16));
      alone[0].second.set_grad(normal({4, 6}, 9));
      KernelProfile profile;
      o->step();
      int64_t fused = 0;
      for (const KernelProfile::Entry& e : profile.totals()) {
        EXPECT_NE(e.kernel, "copy") << "the bf16 copy was not written in the kernel's pass";
        if (e.kernel == "adam_update" || e.kernel == "sgd_update") fused += e.calls;
      }
      EXPECT_EQ(fused, 1);
    }
    // Stopped: the copy keeps its last value.
    opt->set_low_precision_copy("dense", Tensor());
    Tensor before = c_dense.clone();
    dense.set_grad(normal({4, 6}, 40));
    opt->step();
    EXPECT_TRUE(same_bits(c_dense, before));
    EXPECT_FALSE(same_bits(dense.to(DType::bf16).reshape({24}), before));
  }
}

// A parameter's own settings (lr_scale, weight_decay) update it as an optimizer with
// those options would, bit for bit: on the fused kernels and, for a transposed
// (non-contiguous) tensor, on the ops path.
TEST(OptimFused, ParamSettingsUpdateAsThoseOptionsWould) {
  using Make =
      std::function<std::unique_ptr<optim::Optimizer>(optim::NamedTensors, double, double)>;
  const std::vector<Make> kinds = {
      [](optim::NamedTensors p, double lr, double wd) {
        return std::make_unique<optim::Adam>(std::move(p), optim::AdamOptions(lr).weight_decay(wd));
      },
      [](optim::NamedTensors p, double lr, double wd) {
        return std::make_unique<optim::AdamW>(std::move(p),
                                              optim::AdamWOptions(lr).weight_decay(wd));
      },
      [](optim::NamedTensors p, double lr, double wd) {
        return std::make_unique<optim::SGD>(std::move(p),
                                            optim::SGDOptions(lr).momentum(0.9).weight_decay(wd));
      },
  };
  for (size_t k = 0; k < kinds.size(); ++k) {
    for (bool strided : {false, true}) {
      SCOPED_TRACE("optimizer " + std::to_string(k) + (strided ? ", strided" : ""));
      auto make_param = [&](uint64_t seed) {
        Tensor p = normal({6, 4}, seed);
        return strided ? p.transpose(0, 1) : p;
      };
      Tensor grouped = make_param(1), other = make_param(2), alone = make_param(1);
      auto a = kinds[k]({{"g", grouped}, {"o", other}}, 0.02, 0.1);
      a->set_settings({"g"}, {.lr_scale = 0.5, .weight_decay = 0.4});
      auto b = kinds[k]({{"g", alone}}, 0.01, 0.4);
      for (int step = 0; step < 3; ++step) {
        Tensor g = normal({6, 4}, 10 + step);
        if (strided) g = g.transpose(0, 1);
        grouped.set_grad(g);
        other.set_grad(g);
        alone.set_grad(g.clone());
        a->step();
        b->step();
        ASSERT_TRUE(same_bits(grouped.contiguous(), alone.contiguous())) << "step " << step;
      }
    }
  }
  optim::SGD sgd({{"w", normal({4}, 1)}}, optim::SGDOptions(0.1));
  EXPECT_TRUE(test::throws_with([&] { sgd.set_settings({"v"}, {}); }, "no parameter named v"));
  EXPECT_TRUE(test::throws_with([&] { sgd.set_settings({"w"}, {.lr_scale = -1}); },
                                "lr_scale and weight_decay must be finite and >= 0"));
}

// exclude_from_weight_decay (the factory's no_weight_decay, the engine's 1-D parameters)
// takes the named parameters' decay to 0: each then steps as in an optimizer built with
// weight_decay 0, while the others keep the optimizer's decay.
TEST(OptimFused, ExcludedParametersStepWithoutWeightDecay) {
  Tensor kept = normal({6, 4}, 1), excluded = normal({6, 4}, 1), plain = normal({6, 4}, 1);
  Tensor decayed = normal({6, 4}, 1);
  optim::AdamW a({{"w", kept}, {"b", excluded}}, optim::AdamWOptions(0.02).weight_decay(0.3));
  a.exclude_from_weight_decay({"b"});
  EXPECT_EQ(a.settings("b").weight_decay, 0.0);
  EXPECT_EQ(a.settings("w").weight_decay, 0.3);
  optim::AdamW without({{"b", plain}}, optim::AdamWOptions(0.02).weight_decay(0.0));
  optim::AdamW with({{"w", decayed}}, optim::AdamWOptions(0.02).weight_decay(0.3));
  for (int step = 0; step < 3; ++step) {
    const Tensor g = normal({6, 4}, 10 + step);
    for (const Tensor& p : {kept, excluded, plain, decayed}) p.set_grad(g.clone());
    a.step();
    without.step();
    with.step();
    ASSERT_TRUE(same_bits(excluded, plain)) << "step " << step;
    ASSERT_TRUE(same_bits(kept, decayed)) << "step " << step;
  }
}

TEST(OptimFused, BadLowPrecisionCopiesAreErrors) {
  Tensor w = normal({4}, 1);
  optim::SGD sgd({{"w", w}}, optim::SGDOptions(0.1));
  EXPECT_TRUE(test::throws_with(
      [&] { sgd.set_low_precision_copy("v", Tensor::empty({4}, DType::bf16)); }, "no parameter"));
  EXPECT_TRUE(test::throws_with(
      [&] { sgd.set_low_precision_copy("w", Tensor::empty({5}, DType::bf16)); }, "same numel"));
  EXPECT_TRUE(test::throws_with(
      [&] { sgd.set_low_precision_copy("w", Tensor::empty({4}, DType::i64)); }, "floating"));
}

// Capturable mode (for CUDA graphs): the per-step constants reach the kernels through a
// device tensor written before the update; every optimizer gives the default mode's bits,
// across learning-rate changes, a parameter whose count lags, parameters with settings of
// their own and SGD's first step.
TEST(OptimFused, CapturableModeGivesTheDefaultModesBits) {
  const std::vector<Shape> shapes = {{3, 5}, {1}, {9000}};
  for (const Factory& make : factories()) {
    optim::NamedTensors plain, capt;
    for (size_t i = 0; i < shapes.size(); ++i) {
      Tensor p = normal(shapes[i], i + 7);
      plain.emplace_back("p" + std::to_string(i), p.clone());
      capt.emplace_back("p" + std::to_string(i), p.clone());
    }
    auto a = make(plain);
    auto b = make(capt);
    for (auto* o : {a.get(), b.get()}) {  // three groups of settings
      o->set_settings({"p0"}, {.lr_scale = 0.5, .weight_decay = 0.05});
      o->exclude_from_weight_decay({"p2"});
    }
    b->set_capturable(true);
    ASSERT_TRUE(b->capturable());
    for (int step = 0; step < 5; ++step) {
      const double lr = 0.02 / (1 + step);
      a->set_lr(lr);
      b->set_lr(lr);
      for (size_t i = 0; i < shapes.size(); ++i) {
        if (i == 1 && step == 0) continue;  // a lagging step count: its own group
        Tensor g = normal(shapes[i], 31 * step + i);
        plain[i].second.set_grad(g);
        capt[i].second.set_grad(g.clone());
      }
      const int64_t s0 = memory_stats().cur(MemTag::kOptimState);
      a->step();
      const int64_t s1 = memory_stats().cur(MemTag::kOptimState);
      b->step();
      const int64_t s2 = memory_stats().cur(MemTag::kOptimState);
      if (step == 0) {
        // The same state, and in capturable mode the step constants' f64 tensors besides:
        // the comparison below is of the two modes.
        EXPECT_GT(s2 - s1, s1 - s0) << "capturable mode holds no constants tensor";
      }
      a->zero_grad();
      b->zero_grad();
      for (size_t i = 0; i < shapes.size(); ++i)
        ASSERT_TRUE(same_bits(plain[i].second, capt[i].second))
            << "parameter " << i << " after step " << step;
    }
  }
}

TEST(OptimFused, CapturableModeErrorsAreClear) {
  auto opt = std::make_unique<optim::AdamW>(optim::NamedTensors{{"w", normal({4}, 1)}},
                                            optim::AdamWOptions(0.01));
  EXPECT_TRUE(
      test::throws_with([&] { opt->before_replay(); }, "before_replay() without a captured step"));
  // The kernels check the constants they are handed.
  Tensor p = normal({4}, 2), g = normal({4}, 3), m = zeros({4}), v = zeros({4});
  EXPECT_TRUE(test::throws_with(
      [&] { adam_update({p}, {g}, {m}, {v}, {}, 0.9, 0.999, 0, 1, 1e-3, 1, 1e-8, zeros({4})); },
      "the step constants must be 4 contiguous f64 values on cpu"));
  EXPECT_TRUE(test::throws_with(
      [&] { sgd_update({p}, {g}, {}, {}, 0.1, 0, 0, 0, false, false, zeros({3}, DType::f64)); },
      "the step constants must be 2 contiguous f64 values"));
}
