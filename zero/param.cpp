// Parameter partitioning, gathering and release.
#include "zero/param.h"

#include "core/ops.h"

namespace zt::zero {

const char* status_name(ParamStatus s) {
  switch (s) {
    case ParamStatus::kNotAvailable:
      return "NOT_AVAILABLE";
    case ParamStatus::kInflight:
      return "INFLIGHT";
    case ParamStatus::kAvailable:
      return "AVAILABLE";
  }
  return "?";
}

ZeroParam* zero_param(const Tensor& p) {
  return p.defined() ? dynamic_cast<ZeroParam*>(p.impl()->extra.get()) : nullptr;
}
bool is_partitioned(const Tensor& p) {
  ZeroParam* z = zero_param(p);
  return z && z->kind == ParamKind::kPartitioned;
}
bool is_replicated(const Tensor& p) {
  ZeroParam* z = zero_param(p);
  return z && z->kind == ParamKind::kReplicated;
}

static const char* kGatherHint =
    "Call the owning module through Module::call() (operator()) under a zero::Engine, which "
    "gathers it, or open a zero::GatheredParameters scope around the access.";

// Points the parameter's tensor at the first numel elements of `flat`, in its full shape.
static void attach_storage(const Tensor& p, const Tensor& flat) {
  TensorImpl* impl = p.impl();
  impl->storage = flat.impl()->storage;
  impl->offset = flat.offset();
  impl->strides = contiguous_strides(impl->sizes);
}

void partition_param(const Tensor& p, comm::Communicator& comm, int src) {
  ZT_CHECK(!is_partitioned(p), "parameter '", p.name(), "' is already partitioned");
  autograd::NoGradGuard ng;
  auto z = std::make_shared<ZeroParam>();
  z->kind = ParamKind::kPartitioned;
  z->part = make_partition(p.numel(), comm.size());
  z->rank = comm.rank();
  z->shape = p.sizes();
  z->dtype = p.dtype();
  z->device = p.device();
  {
    MemTagScope tag(MemTag::kParamShard);
    z->shard = zeros({z->part.shard_numel}, p.dtype(), p.device());
  }
  Tensor padded;
  if (comm.rank() == src) {
    MemTagScope tag(MemTag::kCommBuffer);
    padded = zeros({z->part.padded_numel()}, p.dtype(), p.device());
    if (p.numel() > 0) padded.narrow(0, 0, p.numel()).copy_(p.detach().reshape({-1}));
  }
  if (comm.size() == 1) {
    z->shard.copy_(padded);
  } else {
    comm.scatter(z->shard, padded, src);
  }
  p.impl()->storage = nullptr;
  p.impl()->unavailable_hint = kGatherHint;
  z->status = ParamStatus::kNotAvailable;
  p.impl()->extra = z;
}

void broadcast_tensor(const Tensor& t, comm::Communicator& comm, int src) {
  if (!t.defined() || comm.size() == 1) return;
  if (t.is_contiguous()) {
    comm.broadcast(t, src);
    return;
  }
  Tensor c = t.contiguous();
  comm.broadcast(c, src);
  t.copy_(c);
}

void replicate_param(const Tensor& p, comm::Communicator& comm, int src) {
  if (is_partitioned(p)) {
    wait_gather(p, comm);
    ZeroParam* z = zero_param(p);
    // Keep the gathered values as a standalone full tensor.
    Tensor full = p.detach().clone();
    z->gathered = Tensor();
    attach_storage(p, full);
  }
  broadcast_tensor(p, comm, src);
  auto z = std::make_shared<ZeroParam>();
  z->kind = ParamKind::kReplicated;
  z->shape = p.sizes();
  z->dtype = p.dtype();
  z->device = p.device();
  z->status = ParamStatus::kAvailable;
  p.impl()->extra = z;
}

void issue_gather(const Tensor& p, comm::Communicator& comm) {
  ZeroParam* z = zero_param(p);
  if (!z || z->kind != ParamKind::kPartitioned || z->status != ParamStatus::kNotAvailable) return;
  {
    MemTagScope tag(MemTag::kGatheredParam);
    z->gathered = Tensor::empty({z->part.padded_numel()}, z->dtype, z->device);
  }
  if (comm.size() == 1) {
    z->gathered.copy_(z->shard);
    z->work = nullptr;
  } else {
    z->work = comm.all_gather(z->gathered, z->shard, /*async=*/true);
  }
  z->status = ParamStatus::kInflight;
}

void wait_gather(const Tensor& p, comm::Communicator& comm) {
  ZeroParam* z = zero_param(p);
  if (!z || z->kind != ParamKind::kPartitioned) return;
  if (z->status == ParamStatus::kNotAvailable) issue_gather(p, comm);
  if (z->status == ParamStatus::kInflight) {
    if (z->work) z->work->wait();
    z->work = nullptr;
    attach_storage(p, z->gathered);
    z->status = ParamStatus::kAvailable;
  }
}

void release_param(const Tensor& p) {
  ZeroParam* z = zero_param(p);
  if (!z || z->kind != ParamKind::kPartitioned || z->status == ParamStatus::kNotAvailable) return;
  if (z->status == ParamStatus::kInflight && z->work) z->work->wait();
  z->work = nullptr;
  z->gathered = Tensor();
  p.impl()->storage = nullptr;
  z->status = ParamStatus::kNotAvailable;
}

void write_back_shard(const Tensor& p) {
  ZeroParam* z = zero_param(p);
  ZT_CHECK(z && z->status == ParamStatus::kAvailable, "write_back_shard: parameter '", p.name(),
           "' is not gathered");
  autograd::NoGradGuard ng;
  int64_t valid = z->part.shard_valid(z->rank);
  int64_t off = z->part.shard_offset(z->rank);
  if (valid <= 0) return;
  Tensor src = p.detach().reshape({-1}).narrow(0, off, valid);
  z->shard.narrow(0, 0, valid).copy_(src);
  if (z->master.defined()) z->master.narrow(0, 0, valid).copy_(src);
}

}  // namespace zt::zero
