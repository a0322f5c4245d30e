// Init and Replicated scopes, and after-the-fact conversion.
#include "zero/scope.h"

#include <optional>

#include "zero/param.h"

namespace zt::zero {

Init::Init(comm::Communicator& comm) : comm_(comm), tag_(MemTag::kGatheredParam) {
  nn::push_registration_observer(this);
}
Init::Init(comm::Communicator& comm, Device device) : Init(comm) {
  device_ = device;
}
Init::~Init() {
  nn::pop_registration_observer(this);
}

void Init::on_parameter(nn::Module&, const std::string& name, const Tensor& p) {
  if (is_partitioned(p)) return;  // registered again (tied weights): partitioned already
  ZT_CHECK(!is_replicated(p), "zero::Init: parameter '", name,
           "' is a zero::Replicated scope's replica (a weight tied to a module built in that "
           "scope): it stays whole on every rank. Build the tying module inside the same "
           "Replicated scope, or build the tied weight under zero::Init");
  partition_param(p, comm_, 0, device_.value_or(p.device()));
  p.impl()->unavailable_hint =
      "While a model is built under zero::Init, each parameter is partitioned as it is "
      "registered: give it its initial values before registering it. Once built, call the "
      "owning module through Module::call() (operator()) under a zero::Engine, which gathers "
      "it, or open a zero::GatheredParameters scope around the access (and around the backward "
      "through it, for a use that is backpropagated).";
}
// A buffer or replica registered inside a scope with a device moves there, keeping its
// handle (the module's member sees the move).
static void move_registered(const Tensor& t, std::optional<Device> device) {
  if (!device || t.device() == *device || is_partitioned(t)) return;
  autograd::NoGradGuard ng;
  t.set_data(t.detach().to(*device));
}

void Init::on_buffer(nn::Module&, const std::string&, const Tensor& b) {
  // A buffer stays whole on every rank, as a replica does, and is charged as one: not to the
  // gathered parameters this scope charges the full tensors built inside to (the memory
  // report would show it gathered for good, past the planner's gathered peak).
  MemTagScope tag(MemTag::kOther);
  move_registered(b, device_);
  if (b.has_storage() && b.storage()->tag() == MemTag::kGatheredParam) {
    autograd::NoGradGuard ng;
    b.set_data(b.detach().clone());
  }
  broadcast_tensor(b, comm_, 0);
}

Replicated::Replicated(comm::Communicator& comm) : comm_(comm), tag_(MemTag::kOther) {
  nn::push_registration_observer(this);
}
Replicated::Replicated(comm::Communicator& comm, Device device) : Replicated(comm) {
  device_ = device;
}
Replicated::~Replicated() {
  nn::pop_registration_observer(this);
}

void Replicated::on_parameter(nn::Module&, const std::string& name, const Tensor& p) {
  ZT_CHECK(!is_partitioned(p), "zero::Replicated: parameter '", name,
           "' is partitioned by zero::Init (a weight tied to a module built outside this "
           "scope): replicating it would hold it whole on every rank. Build the tying module "
           "outside the Replicated scope, or zero::replicate() the modules after the fact");
  move_registered(p, device_);
  replicate_param(p, comm_, 0);
}
void Replicated::on_buffer(nn::Module&, const std::string&, const Tensor& b) {
  move_registered(b, device_);
  broadcast_tensor(b, comm_, 0);
}

// Shards on `device`, or on each parameter's own device.
static void partition_on(nn::Module& m, comm::Communicator& comm, std::optional<Device> device) {
  for (auto& [name, p] : m.named_parameters()) {
    if (p.name().empty()) p.set_name(name);
    if (is_partitioned(p)) continue;
    p.impl()->extra = nullptr;  // a replica becomes a plain tensor first
    partition_param(p, comm, 0, device.value_or(p.device()));
  }
  if (device) m.to(*device);  // the buffers: every parameter already reports `device`
  for (auto& [name, b] : m.named_buffers()) broadcast_tensor(b, comm, 0);
}

void partition(nn::Module& m, comm::Communicator& comm) {
  partition_on(m, comm, std::nullopt);
}
void partition(nn::Module& m, comm::Communicator& comm, Device device) {
  partition_on(m, comm, device);
}

void replicate(nn::Module& m, comm::Communicator& comm) {
  for (auto& [name, p] : m.named_parameters()) {
    if (p.name().empty()) p.set_name(name);
    replicate_param(p, comm, 0);
  }
  for (auto& [name, b] : m.named_buffers()) broadcast_tensor(b, comm, 0);
}

}  // namespace zt::zero
