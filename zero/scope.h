// Explicit partitioning scopes. A scope is an RAII object that decides what happens to
// parameters and buffers registered on this thread while it is open; scopes nest and the
// innermost one decides alone. One closed before a scope opened inside it (held by an object
// that ends early) hands over to the scopes still open. Nothing leaks outside a scope: there
// is no global config.
//
//   zero::Init init(comm);                 // parameters partitioned at registration
//   auto gpt = std::make_shared<Gpt>(...);
//   {
//     zero::Replicated frozen(comm);       // full replicas, no hooks, no per-call cost
//     auto tok = std::make_shared<VqModel>(...);
//   }
//
// Given a device, a scope places what registers inside on that device: modules build on
// the host, and each parameter leaves the host as it registers (zero::Init(comm, gpu)), so
// neither the host nor the GPU ever holds the whole model.
#pragma once

#include <memory>
#include <optional>

#include "nn/module.h"
#include "zero/comm/communicator.h"

namespace zt::zero {

/// Partitions every parameter registered inside the scope at registration: rank 0's
/// initialized value is scattered, each rank keeps its flat padded shard, the full tensor
/// is freed at once (so building a model never holds more than one full parameter).
/// Buffers registered inside are broadcast from rank 0.
class Init : public nn::RegistrationObserver {
 public:
  explicit Init(comm::Communicator& comm);
  /// The shards and buffers made on `device` from parameters and buffers built anywhere
  /// (the host): each host parameter is released once its shard is made.
  Init(comm::Communicator& comm, Device device);
  ~Init() override;
  Init(const Init&) = delete;
  Init& operator=(const Init&) = delete;

  void on_parameter(nn::Module& owner, const std::string& name, const Tensor& p) override;
  void on_buffer(nn::Module& owner, const std::string& name, const Tensor& b) override;

 private:
  comm::Communicator& comm_;
  std::optional<Device> device_;  // none: each tensor stays where it was made
  MemTagScope tag_;               // full tensors built inside are counted as gathered parameters
};

/// Inside an Init scope (or anywhere): parameters and buffers registered inside become
/// full replicas broadcast from rank 0, marked replicated, so an engine installs no hooks
/// for them. Frozen replicas are skipped by the optimizer and by gradient reduction.
class Replicated : public nn::RegistrationObserver {
 public:
  explicit Replicated(comm::Communicator& comm);
  /// The replicas and buffers moved to `device` as they register.
  Replicated(comm::Communicator& comm, Device device);
  ~Replicated() override;
  Replicated(const Replicated&) = delete;
  Replicated& operator=(const Replicated&) = delete;

  void on_parameter(nn::Module& owner, const std::string& name, const Tensor& p) override;
  void on_buffer(nn::Module& owner, const std::string& name, const Tensor& b) override;

 private:
  comm::Communicator& comm_;
  std::optional<Device> device_;
  MemTagScope tag_;
};

/// After the fact: partitions every not-yet-partitioned parameter of `m` (rank 0's values
/// win; replicas become partitioned) and broadcasts its buffers.
void partition(nn::Module& m, comm::Communicator& comm);
/// The same with every shard and buffer made on `device`, one parameter at a time, from a
/// model built wherever it was (the host): the device never holds more than the shards and
/// one full parameter, and each host parameter is released as its shard is made. This is
/// how a model too big for one GPU is built whole in host memory and split onto the GPUs.
void partition(nn::Module& m, comm::Communicator& comm, Device device);
/// After the fact: makes every parameter of `m` a replica (gathering partitioned ones)
/// and broadcasts parameters and buffers from rank 0.
void replicate(nn::Module& m, comm::Communicator& comm);

}  // namespace zt::zero
