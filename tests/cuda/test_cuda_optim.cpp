// The optimizer kernels on the GPU (label cuda): Adam, AdamW and SGD (momentum,
// Nesterov, weight decay) stepping several tensors of odd sizes on CUDA give the CPU's
// bits over several steps, bf16/f16 copies included; one multi-tensor launch equals one
// launch per tensor; the optimizer's grouped step issues the same updates; and a repeated
// update reuses its uploaded table (one launch, no copy, no wait).
#include <cstring>
#include <functional>
#include <memory>

#include "core/kernels.h"
#include "core/work_counts.h"
#include "cuda/cuda_compare.h"
#include "optim/optim.h"

using namespace zt;
using namespace zt::cuda_test;

namespace {

// Bits of two tensors (any devices) are equal.
bool same_bits(const Tensor& a, const Tensor& b) {
  Tensor x = a.to(Device::cpu()).contiguous(), y = b.to(Device::cpu()).contiguous();
  return x.dtype() == y.dtype() && x.numel() == y.numel() &&
         std::memcmp(x.data_ptr(), y.data_ptr(), x.numel() * dtype_size(x.dtype())) == 0;
}

const std::vector<Shape> kShapes = {{1}, {7}, {4097}, {3, 333}, {10001}, {5, 5, 5}};

using Factory = std::function<std::unique_ptr<optim::Optimizer>(optim::NamedTensors)>;

struct Case {
  const char* name;
  Factory make;
};

std::vector<Case> cases() {
  return {
      {"adam",
       [](optim::NamedTensors p) {
         return std::make_unique<optim::Adam>(std::move(p),
                                              optim::AdamOptions(0.01).weight_decay(0.05));
       }},
      {"adamw",
       [](optim::NamedTensors p) {
         return std::make_unique<optim::AdamW>(std::move(p), optim::AdamWOptions(0.02));
       }},
      {"sgd-nesterov",
       [](optim::NamedTensors p) {
         return std::make_unique<optim::SGD>(
             std::move(p), optim::SGDOptions(0.1).momentum(0.9).nesterov(true).weight_decay(1e-2));
       }},
      {"sgd-dampened",
       [](optim::NamedTensors p) {
         return std::make_unique<optim::SGD>(std::move(p),
                                             optim::SGDOptions(0.1).momentum(0.8).dampening(0.3));
       }},
      {"sgd-plain",
       [](optim::NamedTensors p) {
         return std::make_unique<optim::SGD>(std::move(p), optim::SGDOptions(0.1));
       }},
  };
}

}  // namespace

TEST(CudaOptim, OptimizersMatchTheCpuBitForBitWithCopies) {
  ZT_SKIP_WITHOUT_GPU();
  const Device gpu = Device::cuda(0);
  for (const Case& c : cases()) {
    for (DType dt : {DType::f32, DType::f64}) {
      optim::NamedTensors on_cpu, on_gpu;
      std::vector<Tensor> copy_cpu, copy_gpu;
      for (size_t i = 0; i < kShapes.size(); ++i) {
        Tensor p = normal_cpu(kShapes[i], i + 1, dt);
        on_cpu.emplace_back("p" + std::to_string(i), p.clone());
        on_gpu.emplace_back("p" + std::to_string(i), p.to(gpu));
        DType low = i % 2 ? DType::f16 : DType::bf16;
        // The copies start as the parameters rounded: a step that skips a parameter (no
        // gradient) leaves its copy as it was.
        copy_cpu.push_back(p.to(low));
        copy_gpu.push_back(p.to(low).to(gpu));
      }
      auto cpu_opt = c.make(on_cpu);
      auto gpu_opt = c.make(on_gpu);
      for (size_t i = 0; i < kShapes.size(); ++i) {
        cpu_opt->set_low_precision_copy(on_cpu[i].first, copy_cpu[i]);
        gpu_opt->set_low_precision_copy(on_gpu[i].first, copy_gpu[i]);
      }
      for (int step = 0; step < 4; ++step) {
        for (size_t i = 0; i < kShapes.size(); ++i) {
          if (i == 2 && step == 0) continue;  // a lagging step count: its own group
          Tensor g = normal_cpu(kShapes[i], 50 * step + i + 7, dt);
          on_cpu[i].second.set_grad(g);
          on_gpu[i].second.set_grad(g.to(gpu));
        }
        cpu_opt->step();
        gpu_opt->step();
        for (size_t i = 0; i < kShapes.size(); ++i) {
          EXPECT_TRUE(same_bits(on_gpu[i].second, on_cpu[i].second))
              << c.name << " " << dtype_name(dt) << " step " << step << " tensor " << i;
          EXPECT_TRUE(same_bits(copy_gpu[i], copy_cpu[i]))
              << c.name << " copy, step " << step << " tensor " << i;
          EXPECT_TRUE(same_bits(copy_gpu[i], on_gpu[i].second.to(copy_gpu[i].dtype())));
        }
        cpu_opt->zero_grad();
        gpu_opt->zero_grad();
      }
      // The state slots agree too.
      auto sc = cpu_opt->state_dict(), sg = gpu_opt->state_dict();
      ASSERT_EQ(sc.size(), sg.size());
      for (size_t k = 0; k < sc.size(); ++k)
        EXPECT_TRUE(same_bits(sg[k].second, sc[k].second)) << c.name << " " << sc[k].first;
    }
  }
}

#ifdef ZT_WITH_CUDA
TEST(CudaOptim, OneLaunchOverManyTensorsEqualsOneLaunchEach) {
  ZT_SKIP_WITHOUT_GPU();
  const Device gpu = Device::cuda(0);
  std::vector<Tensor> p1, g1, m1, v1, l1, p2, g2, m2, v2, l2;
  for (size_t i = 0; i < kShapes.size(); ++i) {
    const int64_t n = shape_numel(kShapes[i]);
    Tensor p = normal_cpu({n}, i + 1).to(gpu), g = normal_cpu({n}, i + 11).to(gpu);
    Tensor m = normal_cpu({n}, i + 21).to(gpu), v = abs(normal_cpu({n}, i + 31)).to(gpu);
    p1.push_back(p.clone());
    g1.push_back(g);
    m1.push_back(m.clone());
    v1.push_back(v.clone());
    l1.push_back(Tensor::empty({n}, DType::bf16, gpu));
    p2.push_back(p.clone());
    g2.push_back(g);
    m2.push_back(m.clone());
    v2.push_back(v.clone());
    l2.push_back(Tensor::empty({n}, DType::bf16, gpu));
  }
  for (int step = 0; step < 3; ++step) {
    cuda::adam_update(p1, g1, m1, v1, l1, 0.9, 0.999, 0.01, 1, 1e-3, 1.2, 1e-8);
    for (size_t i = 0; i < p2.size(); ++i)
      cuda::adam_update({p2[i]}, {g2[i]}, {m2[i]}, {v2[i]}, {l2[i]}, 0.9, 0.999, 0.01, 1, 1e-3, 1.2,
                        1e-8);
    cuda::sgd_update(p1, g1, m1, l1, 0.1, 0.9, 0, 1e-3, true, step == 0);
    for (size_t i = 0; i < p2.size(); ++i)
      cuda::sgd_update({p2[i]}, {g2[i]}, {m2[i]}, {l2[i]}, 0.1, 0.9, 0, 1e-3, true, step == 0);
  }
  for (size_t i = 0; i < p1.size(); ++i) {
    EXPECT_TRUE(same_bits(p1[i], p2[i])) << "tensor " << i;
    EXPECT_TRUE(same_bits(m1[i], m2[i])) << "tensor " << i;
    EXPECT_TRUE(same_bits(v1[i], v2[i])) << "tensor " << i;
    EXPECT_TRUE(same_bits(l1[i], l2[i])) << "tensor " << i;
  }
}

// The kernel updates 16 bytes at a time where all of an entry's arrays start on a 16-byte
// boundary, else element by element. Views one element into their buffers take the second
// path, fresh tensors the first (with tails: the sizes are not multiples of 4); both give
// the CPU's bits, the bf16 copies included.
TEST(CudaOptim, AlignedAndMisalignedArraysGiveTheCpuBits) {
  ZT_SKIP_WITHOUT_GPU();
  const Device gpu = Device::cuda(0);
  for (bool misaligned : {false, true}) {
    SCOPED_TRACE(misaligned ? "views one element in" : "fresh tensors");
    std::vector<Tensor> pg, gg, mg, vg, lg, pc, gc, mc, vc, lc;
    for (size_t i = 0; i < kShapes.size(); ++i) {
      const int64_t n = shape_numel(kShapes[i]), off = misaligned ? 1 : 0;
      auto on_gpu = [&](const Tensor& t) {
        Tensor buf = Tensor::empty({n + off}, t.dtype(), gpu);
        Tensor view = buf.slice(0, off, n + off);
        view.copy_(t.to(gpu));
        return view;
      };
      pc.push_back(normal_cpu({n}, i + 1));
      gc.push_back(normal_cpu({n}, i + 11));
      mc.push_back(normal_cpu({n}, i + 21));
      vc.push_back(abs(normal_cpu({n}, i + 31)));
      lc.push_back(Tensor::empty({n}, DType::bf16));
      pg.push_back(on_gpu(pc.back()));
      gg.push_back(on_gpu(gc.back()));
      mg.push_back(on_gpu(mc.back()));
      vg.push_back(on_gpu(vc.back()));
      lg.push_back(on_gpu(lc.back()));
    }
    for (int step = 0; step < 2; ++step) {
      cuda::adam_update(pg, gg, mg, vg, lg, 0.9, 0.999, 0.01, 1, 1e-3, 1.2, 1e-8);
      cpu::adam_update(pc, gc, mc, vc, lc, 0.9, 0.999, 0.01, 1, 1e-3, 1.2, 1e-8);
    }
    for (size_t i = 0; i < pg.size(); ++i) {
      EXPECT_TRUE(same_bits(pg[i], pc[i])) << "tensor " << i;
      EXPECT_TRUE(same_bits(mg[i], mc[i])) << "tensor " << i;
      EXPECT_TRUE(same_bits(vg[i], vc[i])) << "tensor " << i;
      EXPECT_TRUE(same_bits(lg[i], lc[i])) << "tensor " << i;
    }
  }
}

TEST(CudaOptim, ARepeatedUpdateReusesItsUploadedTable) {
  ZT_SKIP_WITHOUT_GPU();
  const Device gpu = Device::cuda(0);
  std::vector<Tensor> p, g, m, v;
  for (size_t i = 0; i < kShapes.size(); ++i) {
    const int64_t n = shape_numel(kShapes[i]);
    p.push_back(normal_cpu({n}, i + 1).to(gpu));
    g.push_back(normal_cpu({n}, i + 11).to(gpu));
    m.push_back(normal_cpu({n}, i + 21).to(gpu));
    v.push_back(abs(normal_cpu({n}, i + 31)).to(gpu));
  }
  auto update = [&](const std::vector<Tensor>& ps, const std::vector<Tensor>& gs,
                    const std::vector<Tensor>& ms, const std::vector<Tensor>& vs) {
    const WorkCounts before = work_counts();
    cuda::adam_update(ps, gs, ms, vs, {}, 0.9, 0.999, 0.0, 1, 1e-3, 1.2, 1e-8);
    return work_counts() - before;
  };
  update(p, g, m, v);
  const WorkCounts again = update(p, g, m, v);
  EXPECT_EQ(again.launches, 1);
  EXPECT_EQ(again.h2d_copies, 0) << "the second identical update uploaded its table again";
  EXPECT_EQ(again.syncs, 0);
  // The same tensors in another order are another table: uploaded once, then reused.
  auto reversed = [](std::vector<Tensor> t) { return std::vector<Tensor>(t.rbegin(), t.rend()); };
  EXPECT_EQ(update(reversed(p), reversed(g), reversed(m), reversed(v)).h2d_copies, 1);
  EXPECT_EQ(update(reversed(p), reversed(g), reversed(m), reversed(v)).h2d_copies, 0);
  // Reused tables address the right tensors: the results equal the CPU's four steps.
  std::vector<Tensor> pc, gc, mc, vc;
  for (size_t i = 0; i < kShapes.size(); ++i) {
    const int64_t n = shape_numel(kShapes[i]);
    pc.push_back(normal_cpu({n}, i + 1));
    gc.push_back(normal_cpu({n}, i + 11));
    mc.push_back(normal_cpu({n}, i + 21));
    vc.push_back(abs(normal_cpu({n}, i + 31)));
  }
  for (int step = 0; step < 4; ++step)
    cpu::adam_update(pc, gc, mc, vc, {}, 0.9, 0.999, 0.0, 1, 1e-3, 1.2, 1e-8);
  for (size_t i = 0; i < p.size(); ++i) {
    EXPECT_TRUE(same_bits(p[i], pc[i])) << "tensor " << i;
    EXPECT_TRUE(same_bits(v[i], vc[i])) << "tensor " << i;
  }
}
#endif  // ZT_WITH_CUDA
