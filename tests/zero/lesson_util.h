// Shared pieces of the ZeRO lessons: a small model that touches every layer family the
// engine must handle, seeded batches, and helpers to read a partitioned model back whole.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/test_util.h"
#include "core/kernel_profile.h"
#include "nn/nn.h"
#include "zero/zero.h"

namespace zt::lesson {

/// x (B, 3, 2, 6, 6) video-like input -> (B, 5).
///   Conv3d(3->4, k 1x3x3) -> per-frame Conv2d(4->6, 3x3, stride 2) -> GroupNorm(2, 6)
///   -> silu -> tokens (B, 18, 6) -> Linear(6->8) -> LayerNorm(8) -> attention(8, 2 heads)
///   -> mean over tokens -> Linear(8->5).
/// Sizes are uneven on purpose: at 2, 3 and 4 ranks some parameters do not divide (head's
/// bias has 5 elements, conv2's bias and the GroupNorm's 6, the attention projections 64),
/// so shards are padded. The attention has no biases: a key bias has a gradient that is
/// exactly zero in theory (softmax ignores a per-query constant), and Adam would turn its
/// rounding noise into full-size updates.
class Mixed : public nn::UnaryModule {
 public:
  Mixed();
  std::shared_ptr<nn::Conv3d> conv3;
  std::shared_ptr<nn::Conv2d> conv2;
  std::shared_ptr<nn::GroupNorm> gn;
  std::shared_ptr<nn::Linear> embed;
  std::shared_ptr<nn::LayerNorm> ln;
  std::shared_ptr<nn::MultiheadSelfAttention> attn;
  std::shared_ptr<nn::Linear> head;

 protected:
  Tensor forward(const Tensor& x) override;
};

/// depth x (Linear(width, width) -> tanh), children "l0", "l1", ...: a model whose size is
/// one number per layer, for lessons about memory and timing.
class TanhStack : public nn::UnaryModule {
 public:
  TanhStack(int64_t depth, int64_t width);
  std::vector<std::shared_ptr<nn::Linear>> layers;

 protected:
  Tensor forward(const Tensor& x) override;
};

/// a -> tanh -> b, two Linear(4, 4): the smallest model with two layers, for lessons about
/// what the engine refuses.
struct Pair : nn::UnaryModule {
  Pair() : nn::UnaryModule("Pair") {
    a = register_module("a", std::make_shared<nn::Linear>(4, 4));
    b = register_module("b", std::make_shared<nn::Linear>(4, 4));
  }
  Tensor forward(const Tensor& x) override { return (*b)(tanh((*a)(x))); }
  std::shared_ptr<nn::Linear> a, b;
};

/// A deterministic batch drawn from `seed`: x (B, 3, 2, 6, 6), y (B, 5).
std::pair<Tensor, Tensor> batch(int64_t B, int seed);

/// A model of type M built under zero::Init on `comm`: every parameter is partitioned as
/// it is registered (lesson 2 shows it step by step).
template <typename M, typename... Args>
std::shared_ptr<M> partitioned(comm::Communicator& comm, Args&&... args) {
  zero::Init init(comm);
  return std::make_shared<M>(std::forward<Args>(args)...);
}

/// This rank's rows of a global batch t (B, ...): rows [rank x B / N, (rank + 1) x B / N).
/// B must divide by the number of ranks.
Tensor rank_slice(const Tensor& t, const comm::Communicator& comm);

/// Whether `shard` (a rank's flat shard: parameter, gradient or master) holds that rank's
/// slice of `full` in its valid elements (the padding past them is not compared; a rank
/// holding only padding passes).
::testing::AssertionResult shard_is_slice(const Tensor& shard, const zero::Partition& part,
                                          int rank, const Tensor& full, double rtol = 0,
                                          double atol = 0);

/// AdamW with lr 1e-2 and weight decay 0.01, the lessons' usual optimizer.
zero::OptimizerConfig adamw();

/// Full values of every parameter (gathered if partitioned), by name, on this rank.
std::vector<std::pair<std::string, Tensor>> full_parameters(nn::Module& m,
                                                            comm::Communicator& comm);

/// Where event `e` is in an engine's event log at or after `from` (npos: not there).
size_t index_of(const std::vector<std::string>& events, const std::string& e, size_t from = 0);
/// How many times event `e` is in the log.
int count_of(const std::vector<std::string>& events, const std::string& e);
/// The module paths of the log's events of one kind ("fetch:", "gather:", ...), in order.
std::vector<std::string> modules_of(const std::vector<std::string>& events,
                                    const std::string& kind);

/// Engine settings that make every release visible: nothing persistent
/// (stage3_param_persistence_threshold 0), nothing kept for reuse
/// (stage3_max_reuse_distance 0) and no prefetch (stage3_prefetch_bucket_size 0). The
/// defaults (DeepSpeed's) keep parameters of at most 100k elements gathered for good and
/// a module gathered from its forward to its backward when that comes back in fewer than
/// 1e9 elements: for the lessons' small models, everything stays gathered (lessons 4, 9,
/// 18).
zero::Config eager_release_config();
/// eager_release_config() with a prefetch window of 1M elements: the lessons' models fit in
/// it whole (lessons 7 and 26).
zero::Config prefetch_config();

}  // namespace zt::lesson

namespace zt::lesson {

/// A tokenizer-like frozen encoder: Conv3d -> BatchNorm3d -> GroupNorm -> silu.
/// x (B, 3, 4, 6, 6) -> (B, 8, 4, 6, 6). Its BatchNorm running statistics are the only
/// buffers — the tensors other ZeRO-3 stacks leave different on every rank.
class TokenizerLike : public nn::UnaryModule {
 public:
  TokenizerLike();
  std::shared_ptr<nn::Conv3d> conv;
  std::shared_ptr<nn::BatchNorm3d> bn;
  std::shared_ptr<nn::GroupNorm> gn;

 protected:
  Tensor forward(const Tensor& x) override;
};

/// "Pretrained" BatchNorm statistics, as a loader would fill them (rank 0 only, say).
void load_pretrained_stats(TokenizerLike& t);

/// Hashes of `t` from every rank (rank order).
std::vector<std::string> hashes_across_ranks(const Tensor& t, comm::Communicator& comm);

/// `local` from every rank (rank order).
std::vector<std::vector<double>> gather_doubles(const std::vector<double>& local,
                                                comm::Communicator& comm);

/// Kernel-table calls by kernel name, from a profile of the calling thread.
using KernelCalls = std::map<std::string, int64_t>;
KernelCalls kernel_calls(KernelProfile& profile);

}  // namespace zt::lesson

namespace zt::lesson {

/// x (B, 3, 2, 6, 6) -> LayerNorm(6) over the last dimension -> Mixed -> (B, 5). Built
/// with a communicator, the LayerNorm is a zero::Replicated replica (a full copy on every
/// rank, trainable unless frozen) and Mixed is partitioned; without one, a plain model.
class ReplicatedFront : public nn::UnaryModule {
 public:
  explicit ReplicatedFront(comm::Communicator* comm);
  std::shared_ptr<nn::LayerNorm> front;
  std::shared_ptr<Mixed> mixed;

 protected:
  Tensor forward(const Tensor& x) override;
};

/// Lesson 8's training setup: 5 steps on a global batch of 12. The loop itself is in
/// lesson08_loop.cpp, written to be read with test_08_equivalence.cpp.
struct EquivalenceSetup {
  int gas = 1;                      // gradient accumulation steps
  double clip = 0.0;                // gradient clipping (0: off)
  std::string optimizer = "adamw";  // or "sgd": plain SGD, no momentum
  bool replicated_front = false;    // train ReplicatedFront instead of Mixed
  bool decay_1d = true;             // false: biases and norm scales take no weight decay
  bool param_groups = false;        // conv2's parameters: half the learning rate, no decay
};
/// Plain single-process training on the whole batch; the final parameters.
std::vector<std::pair<std::string, Tensor>> train_single(const EquivalenceSetup& s);
/// The same training under ZeRO-3 on `comm` (each rank its slice of the batch), then
/// checks the full parameters against `expect` (1e-5 relative).
void train_zero_and_compare(comm::Communicator& comm, const EquivalenceSetup& s,
                            const std::vector<std::pair<std::string, Tensor>>& expect);

}  // namespace zt::lesson
