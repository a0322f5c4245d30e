// Index ops and cross-entropy on the GPU without host waits (label cuda): the kernels
// check indices and targets themselves, so embedding, gather, one_hot and cross_entropy
// forward and backward issue no synchronization and no copy back; a bad index or target
// is reported at the host's next wait as a zt::Error naming the op, the value and the
// range (the kernel stays in bounds meanwhile), and the record is cleared once raised.
// Without a GPU every test skips and says why.
#include <cmath>
#include <string>

#include "core/work_counts.h"
#include "cuda/cuda_compare.h"
#ifdef ZT_WITH_CUDA
#include "core/cuda/stream.h"
#endif

using namespace zt;
using namespace zt::cuda_test;

namespace {

// Runs fn and returns the work it issued.
template <typename Fn>
WorkCounts work_of(Fn&& fn) {
  const WorkCounts before = work_counts();
  fn();
  return work_counts() - before;
}

// The message of the zt::Error that the next host wait raises ("" if none).
std::string error_at_next_wait() {
#ifdef ZT_WITH_CUDA  // (without CUDA every test skips before it gets here)
  try {
    cuda::synchronize_stream(cuda::current_stream(0));
  } catch (const Error& e) {
    return e.what();
  }
#endif
  return "";
}

}  // namespace

TEST(CudaDeviceErrors, IndexOpsAndCrossEntropyDoNotWait) {
  ZT_SKIP_WITHOUT_GPU();
  Tensor weight = normal_cpu({50, 8}, 1).to(kGpu);
  weight.set_requires_grad();
  Tensor ids = from_vector({3, 49, 0, 7, 7, 12}, {2, 3}, DType::i64).to(kGpu);
  Tensor logits = normal_cpu({6, 50}, 2).to(kGpu);
  logits.set_requires_grad();
  Tensor target = from_vector({1, 2, -100, 49, 0, 5}, {6}, DType::i64).to(kGpu);
  error_at_next_wait();  // the copies above are done; nothing pending
  Tensor picks = from_vector({0, 7, 3, 3, 1, 2}, {6, 1}, DType::i64).to(kGpu);
  // The loss of embedding, gather, one_hot and cross_entropy, and its backward.
  auto loss_of = [](const Tensor& weight, const Tensor& ids, const Tensor& logits,
                    const Tensor& target, const Tensor& picks) {
    Tensor e = gather(embedding(weight, ids).reshape({6, 8}), 1, picks);  // (6, 1)
    Tensor oh = one_hot(ids.reshape({-1}), 50);                           // (6, 50) f32
    Tensor loss = add(cross_entropy(add(logits, oh), target, -100), mean(e));
    loss.backward();
    return loss;
  };
  Tensor loss;
  const WorkCounts w = work_of([&] { loss = loss_of(weight, ids, logits, target, picks); });
  EXPECT_EQ(w.syncs, 0);
  EXPECT_EQ(w.d2h_copies, 0);
  EXPECT_EQ(w.host_reads, 0);
  EXPECT_EQ(error_at_next_wait(), "");
  // The values still equal the CPU's: the loss formed on the device and its gradients.
  const Device cpu = Device::cpu();
  Tensor weight_cpu = weight.detach().to(cpu), logits_cpu = logits.detach().to(cpu);
  weight_cpu.set_requires_grad();
  logits_cpu.set_requires_grad();
  const Tensor cpu_loss =
      loss_of(weight_cpu, ids.to(cpu), logits_cpu, target.to(cpu), picks.to(cpu));
  EXPECT_NEAR(loss.item(), cpu_loss.item(), 1e-5);
  EXPECT_CLOSE(weight.grad().to(cpu), weight_cpu.grad(), 1e-5, 1e-6);
  EXPECT_CLOSE(logits.grad().to(cpu), logits_cpu.grad(), 1e-5, 1e-6);
}

TEST(CudaDeviceErrors, ABadIndexIsRaisedAtTheNextWait) {
  ZT_SKIP_WITHOUT_GPU();
  error_at_next_wait();
  Tensor weight = normal_cpu({10, 4}, 3).to(kGpu);
  Tensor bad = from_vector({1, 10, 2}, {3}, DType::i64).to(kGpu);
  Tensor rows = embedding(weight, bad);  // queued: no error yet
  const std::string msg = error_at_next_wait();
  EXPECT_NE(msg.find("index_select: index 10 at position 1 out of range [0, 10)"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("next wait"), std::string::npos) << msg;
  // The bad row was skipped (zero), the good ones read; the record is clear again.
  Tensor got = rows.to(Device::cpu());
  EXPECT_EQ(sum(abs(got.select(0, 1))).item(), 0.0);
  EXPECT_CLOSE(got.select(0, 0), weight.to(Device::cpu()).select(0, 1), 0, 0);
  EXPECT_EQ(error_at_next_wait(), "");

  one_hot(from_vector({0, -1}, {2}, DType::i32).to(kGpu), 3);
  EXPECT_NE(error_at_next_wait().find("one_hot: index -1 at position 1"), std::string::npos);
  gather(weight, 1, from_vector({4}, {1, 1}, DType::i64).to(kGpu));
  EXPECT_NE(error_at_next_wait().find("gather: index 4 at position 0 out of range [0, 4)"),
            std::string::npos);
}

TEST(CudaDeviceErrors, ABadTargetIsRaisedAtTheNextWait) {
  ZT_SKIP_WITHOUT_GPU();
  error_at_next_wait();
  Tensor logits = normal_cpu({4, 5}, 4).to(kGpu);
  Tensor target = from_vector({0, 7, -100, 3}, {4}, DType::i64).to(kGpu);
  Tensor loss = cross_entropy(logits, target, -100);
  std::string msg;
  try {
    (void)loss.item();  // the read waits, and the wait raises
  } catch (const Error& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("cross_entropy: target 7 at position 1 is out of range [0, 5)"),
            std::string::npos)
      << msg;
  EXPECT_EQ(error_at_next_wait(), "");
}

// A bad target's row gets a zero gradient, as an ignored row does, not exp(x) over a
// log-sum-exp the forward left at 0 (inf for logits past ~88): under a CUDA graph or a
// deferred log read the optimizer step uses the gradient before the error surfaces.
TEST(CudaDeviceErrors, ABadTargetsRowGetsAZeroGradient) {
  ZT_SKIP_WITHOUT_GPU();
  error_at_next_wait();
  Tensor logits = full({2, 4}, 100.0, DType::f32, kGpu);
  logits.set_requires_grad();
  Tensor target = from_vector({1, 7}, {2}, DType::i64).to(kGpu);  // 7: out of range
  cross_entropy(logits, target).backward();
  EXPECT_NE(error_at_next_wait().find("cross_entropy: target 7 at position 1"), std::string::npos);
  const Tensor g = logits.grad().to(Device::cpu());
  EXPECT_EQ(sum(abs(g.select(0, 1))).item(), 0.0);
  EXPECT_TRUE(std::isfinite(sum(abs(g)).item()));
}
