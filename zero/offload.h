// Optimizer offload (DeepSpeed's `offload_optimizer: {device: cpu, pin_memory: true}`):
// when the parameters train on a GPU, each trainable shard's fp32 master and the
// optimizer's state (Adam's moments, created next to the master) live in host memory,
// and the fused CPU optimizer updates them there. Around each update:
//
//   device grad shard --copy stream, D2H--> host grad buffer  (optimizer reads it)
//   host fp32 master --round to storage dtype on the host--> host staging
//   host staging (or the master itself for f32) --copy stream, H2D--> device shard
//
// The copies run on a side stream ordered against the compute stream by events; the
// host waits for the copy stream to finish all the gradient copies (and the previous
// step's uploads queued before them) before the optimizer starts, and the compute stream
// (not the host) waits for the uploads. With pin_memory the host buffers are page-locked,
// which makes the copies truly asynchronous. Host buffers are charged to the CPU ledger
// (masters as optimizer state, gradient buffers as gradient shards, staging as
// communication buffers).
//
// When the parameters are on the CPU everything already lives in host memory: the
// offload moves nothing and training is unchanged bit for bit.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "zero/config.h"
#include "zero/param.h"

namespace zt::zero {

class OptimizerOffload {
 public:
  /// `device`: where the parameters train.
  OptimizerOffload(const OffloadOptimizer& config, Device device);
  ~OptimizerOffload();
  OptimizerOffload(const OptimizerOffload&) = delete;
  OptimizerOffload& operator=(const OptimizerOffload&) = delete;

  /// True when state is moved to the host (offload on and the parameters on a GPU).
  bool moves() const { return moves_; }
  /// Gives a trainable partitioned parameter its fp32 master in host memory (from its
  /// current master, or from the shard when the shard was its own master) and a host
  /// gradient buffer; a device master is freed. No-op unless moves().
  void place(ZeroParam& z);
  /// Copies every placed parameter's gradient shard into its host buffer and makes that
  /// buffer the master's gradient; returns when the copies are done.
  void grads_to_host();
  /// Starts writing each updated master into its device shard (rounded to the storage
  /// dtype); later work on the compute stream waits for it.
  void params_to_device();
  /// One line for the log: where the optimizer state lives and why.
  std::string describe() const;

 private:
  struct Placed {
    ZeroParam* z;
    Tensor host_grad;  // fp32 [shard_numel]
    Tensor staging;    // [shard_numel] in the storage dtype (undefined for f32)
  };
  Tensor host_buffer(int64_t numel, DType dtype, MemTag tag) const;

  OffloadOptimizer config_;
  Device device_;
  bool moves_ = false;
  std::vector<Placed> placed_;
  struct Streams;  // the CUDA copy stream and events (CUDA builds only)
  std::unique_ptr<Streams> streams_;
};

}  // namespace zt::zero
