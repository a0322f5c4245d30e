// Parameter partitioning, the gather / wait / release cycle, and group all-gathers.
#include "zero/param.h"

#include <algorithm>

#include "core/ops.h"
#include "core/ops/dispatch.h"

namespace zt::zero {

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
    "gathers it, or open a zero::GatheredParameters scope around the access (and around the "
    "backward through it, for a use that is backpropagated). A module whose "
    "forward uses another module's parameter directly registers it too "
    "(register_parameter(name, other->weight)), and it is gathered for either (an access "
    "outside both works only while a kept-for-reuse copy happens to be there).";

// Points the parameter's tensor at the first numel elements of `flat`, in its full shape.
static void attach_storage(TensorImpl* impl, const Tensor& flat) {
  impl->storage = flat.impl()->storage;
  impl->offset = flat.offset();
  impl->strides = contiguous_strides(impl->sizes);
}

// ---- the record's own cycle

ZeroParam::~ZeroParam() {
  // A group gather still in flight must not copy into a record that is gone.
  if (!flight) return;
  for (ZeroParam*& m : flight->members)
    if (m == this) m = nullptr;
}

void ZeroParam::gather(comm::Communicator& comm) {
  gather_group({this}, comm);
}

void ZeroParam::wait() {
  if (kind != ParamKind::kPartitioned || status == ParamStatus::kAvailable) return;
  ZT_CHECK(status == ParamStatus::kInflight, "parameter '", owner ? owner->name : "?",
           "' was never gathered: call gather() before wait()");
  std::shared_ptr<GroupGather> g = flight;  // finish() drops the members' references
  g->finish();
}

void ZeroParam::release() {
  if (kind != ParamKind::kPartitioned || status == ParamStatus::kNotAvailable) return;
  if (status == ParamStatus::kInflight) wait();
  // At one rank the gathered parameter is the shard itself, which the step updates in place.
  if (owner->storage && owner->storage != shard.impl()->storage) {
    std::erase_if(released_copies, [](const std::weak_ptr<Storage>& w) { return w.expired(); });
    released_copies.push_back(owner->storage);
  }
  gathered = Tensor();
  owner->storage = nullptr;
  status = ParamStatus::kNotAvailable;
}

bool ZeroParam::stale_copy_held() {
  const bool held = std::any_of(released_copies.begin(), released_copies.end(),
                                [](const std::weak_ptr<Storage>& w) { return !w.expired(); });
  released_copies.clear();
  return held;
}

namespace {
// This rank's slice of a whole value of z (undefined when the rank holds only padding).
Tensor own_slice(const ZeroParam& z, const Tensor& full, const char* what) {
  ZT_CHECK(full.numel() == z.part.numel, what, ": '", z.owner->name, "' has ", z.part.numel,
           " elements, the value given has ", full.numel());
  const int64_t valid = z.part.shard_valid(z.rank);
  if (valid <= 0) return Tensor();
  return full.detach().reshape({-1}).narrow(0, z.part.shard_offset(z.rank), valid);
}
}  // namespace

void ZeroParam::write_shard(const Tensor& full) {
  autograd::NoGradGuard ng;
  const Tensor src = own_slice(*this, full, "write_shard");
  if (!src.defined()) return;
  shard.narrow(0, 0, src.numel()).copy_(src);
  if (master.defined()) master.narrow(0, 0, src.numel()).copy_(src);
}

void ZeroParam::write_edit(const Tensor& full) {
  if (!master.defined() || master.dtype() == dtype) return write_shard(full);
  autograd::NoGradGuard ng;
  const Tensor src = own_slice(*this, full, "write_edit");
  if (!src.defined()) return;
  // Compared with the master rounded (the shard may share storage with the gathered
  // value, which the edit changed), where the master lives (the host under offload).
  const Tensor m = master.narrow(0, 0, src.numel());
  const Tensor edit = src.to(m.device());
  m.copy_(where(eq(m.to(dtype), edit), m, edit.to(m.dtype())));
  shard.narrow(0, 0, src.numel()).copy_(src);
}

void ZeroParam::set_storage_dtype(DType storage, bool keep_master) {
  if (storage == dtype) return;
  ZT_CHECK(holds == 0, "set_storage_dtype: '", owner->name,
           "' is held gathered by a GatheredParameters scope; close the scope first");
  release();  // a gathered copy (e.g. kept persistent by an earlier engine) is stale
  autograd::NoGradGuard ng;
  if (keep_master && !master.defined()) {
    MemTagScope tag(MemTag::kOptimState);
    master = dtype == DType::f32 ? shard.clone() : shard.to(DType::f32);
  }
  {
    MemTagScope tag(MemTag::kParamShard);
    // Back to f32 from a low precision, or from one 16-bit type to the other: the fp32
    // master holds the values (the shard only their rounding), so the new shard is made
    // from it, rounded as shard_from_master() rounds.
    if (!master.defined())
      shard = shard.to(storage);
    else if (storage == DType::f32)
      shard = master.to(shard.device()).clone();
    else
      shard = master.to(storage).to(shard.device());
  }
  dtype = storage;
  owner->dtype = storage;
}

void ZeroParam::shard_from_master() {
  if (master.defined()) shard.copy_(master);
}

// ---- group all-gathers

// One all-gather of `members` (partitioned, not gathered, all of one dtype and device).
static int64_t gather_run(const std::vector<ZeroParam*>& members, comm::Communicator& comm,
                          bool blocking) {
  auto g = std::make_shared<GroupGather>();
  int64_t padded = 0;
  for (ZeroParam* z : members) {
    g->members.push_back(z);
    g->offsets.push_back(g->piece);
    g->piece += z->part.shard_numel;
    padded += z->part.padded_numel();
  }
  if (g->members.empty()) return 0;
  ZeroParam* first = g->members[0];
  if (g->members.size() == 1) {
    g->send = first->shard;
  } else {
    MemTagScope tag(MemTag::kCommBuffer);
    g->send = Tensor::empty({g->piece}, first->dtype, first->device);
    std::vector<Tensor> slots, shards;
    for (size_t k = 0; k < g->members.size(); ++k) {
      slots.push_back(g->send.narrow(0, g->offsets[k], g->members[k]->part.shard_numel));
      shards.push_back(g->members[k]->shard);
    }
    multi_copy_(slots, shards);
  }
  {
    MemTagScope tag(MemTag::kGatheredParam);
    g->flat = Tensor::empty({g->piece * comm.size()}, first->dtype, first->device);
  }
  g->work = comm.all_gather(g->flat, g->send, /*async=*/!blocking);
  for (ZeroParam* z : g->members) {
    z->flight = g;
    z->status = ParamStatus::kInflight;
  }
  return padded;
}

int64_t gather_group(const std::vector<ZeroParam*>& group, comm::Communicator& comm,
                     bool blocking) {
  if (comm.size() == 1) {
    // One rank holds every element: the gathered parameter is its shard itself (no copy,
    // no memory, no collective to group them for), and writes through it (a
    // GatheredParameters modifier) land in place.
    int64_t padded = 0;
    for (ZeroParam* z : group) {
      if (z->kind != ParamKind::kPartitioned || z->status != ParamStatus::kNotAvailable) continue;
      z->gathered = z->shard;
      attach_storage(z->owner, z->gathered);
      z->status = ParamStatus::kAvailable;
      padded += z->part.padded_numel();
    }
    return padded;
  }
  // One all-gather per (dtype, device) among the members not gathered yet, in order of
  // first appearance (the same on every rank): a module may mix them, as a frozen bf16
  // base weight beside f32 adapters does.
  std::vector<std::vector<ZeroParam*>> runs;
  for (ZeroParam* z : group) {
    if (z->kind != ParamKind::kPartitioned || z->status != ParamStatus::kNotAvailable) continue;
    auto run = std::find_if(runs.begin(), runs.end(), [&](const std::vector<ZeroParam*>& r) {
      return r[0]->dtype == z->dtype && r[0]->device == z->device;
    });
    if (run == runs.end())
      runs.push_back({z});
    else
      run->push_back(z);
  }
  int64_t padded = 0;
  for (const std::vector<ZeroParam*>& run : runs) padded += gather_run(run, comm, blocking);
  return padded;
}

void GroupGather::finish() {
  if (done) return;
  // Transactional: a failure (a memory limit refusing a member's full copy) changes
  // nothing the members see, and the next wait() tries again from `flat` without another
  // collective, so the ranks stay in step.
  if (work) {
    work->wait();
    work = nullptr;
    send = Tensor();
  }
  autograd::NoGradGuard ng;
  const int64_t world = flat.numel() / std::max<int64_t>(piece, 1);
  // Each member's pieces from every rank's part of `flat`, all in one copy call.
  std::vector<Tensor> full(members.size()), spans, pieces;
  for (size_t k = 0; k < members.size(); ++k) {
    ZeroParam* z = members[k];
    if (!z) continue;
    if (members.size() == 1) {
      full[k] = flat;
      continue;
    }
    MemTagScope tag(MemTag::kGatheredParam);
    full[k] = Tensor::empty({z->part.numel}, z->dtype, z->device);
    for (int r = 0; r < world; ++r) {
      const int64_t valid = z->part.shard_valid(r);
      if (valid > 0) {
        spans.push_back(full[k].narrow(0, z->part.shard_offset(r), valid));
        pieces.push_back(flat.narrow(0, r * piece + offsets[k], valid));
      }
    }
  }
  multi_copy_(spans, pieces);
  done = true;
  for (size_t k = 0; k < members.size(); ++k) {
    ZeroParam* z = members[k];
    if (!z) continue;
    z->gathered = std::move(full[k]);
    attach_storage(z->owner, z->gathered);
    z->status = ParamStatus::kAvailable;
  }
  flat = Tensor();
  // Last: dropping the members' references may destroy this object.
  std::vector<ZeroParam*> ms = std::move(members);
  for (ZeroParam* z : ms)
    if (z) z->flight = nullptr;
}

void GroupGather::drop() noexcept {
  if (work) {
    try {
      work->wait();
    } catch (...) {  // the collective's failure was reported where the step failed
    }
    work = nullptr;
  }
  send = flat = Tensor();
  // Last: dropping the members' references may destroy this object.
  std::vector<ZeroParam*> ms = std::move(members);
  for (ZeroParam* z : ms)
    if (z) {
      z->status = ParamStatus::kNotAvailable;
      z->flight = nullptr;
    }
}

// ---- partitioning

void partition_param(const Tensor& p, comm::Communicator& comm, int src) {
  partition_param(p, comm, src, p.device());
}

void partition_param(const Tensor& p, comm::Communicator& comm, int src, Device device) {
  ZT_CHECK(!is_partitioned(p), "parameter '", p.name(), "' is already partitioned");
  autograd::NoGradGuard ng;
  auto z = std::make_shared<ZeroParam>();
  z->kind = ParamKind::kPartitioned;
  z->part = make_partition(p.numel(), comm.size());
  z->rank = comm.rank();
  z->shape = p.sizes();
  z->dtype = p.dtype();
  z->declared = p.dtype();
  z->device = device;
  z->owner = p.impl();
  {
    MemTagScope tag(MemTag::kParamShard);
    z->shard = zeros({z->part.shard_numel}, p.dtype(), device);
  }
  Tensor padded;
  if (comm.rank() == src) {
    MemTagScope tag(MemTag::kCommBuffer);
    padded = zeros({z->part.padded_numel()}, p.dtype(), device);
    if (p.numel() > 0) padded.narrow(0, 0, p.numel()).copy_(p.detach().reshape({-1}));
  }
  if (comm.size() == 1) {
    z->shard.copy_(padded);
  } else {
    comm.scatter(z->shard, padded, src);
  }
  p.impl()->storage = nullptr;
  p.impl()->device = device;
  p.impl()->unavailable_hint = kGatherHint;
  z->status = ParamStatus::kNotAvailable;
  p.impl()->extra = z;
}

std::string ZeroParam::conversion_refused() const {
  if (kind != ParamKind::kPartitioned) return {};
  return "it is partitioned by ZeRO-3, and its shards keep their dtype and device: build "
         "the model on its device and in f32 before zero::Init partitions it, and choose "
         "bf16 or fp16 through zero::Config::precision";
}

std::string ZeroParam::optimizer_refused() const {
  if (kind != ParamKind::kPartitioned) return {};
  return "it is partitioned by ZeRO-3, so its gradient goes to a zero::Engine's fp32 shard and "
         "never to the parameter: call engine.step(), whose optimizer (engine.optimizer()) "
         "updates the shards";
}

DType engine_storage_dtype(const Tensor& p, DType low) {
  const DType own = is_partitioned(p) ? zero_param(p)->declared : p.dtype();
  return own == DType::f32 ? low : own;
}

void partition_param(const Tensor& p, comm::Communicator& comm, int src, DType storage) {
  partition_param(p, comm, src);
  zero_param(p)->set_storage_dtype(storage, p.requires_grad());
}

void broadcast_tensor(const Tensor& t, comm::Communicator& comm, int src) {
  if (!t.defined() || comm.size() == 1) return;
  if (t.is_contiguous()) {
    comm.broadcast(t, src);
    // A write on every rank, the source's too (its tensor was just made every rank's): the
    // engine's check that the ranks wrote the same buffers since the last step sees a
    // rank-0 load or edit that was broadcast as written everywhere.
    detail::count_writes({t});
    return;
  }
  Tensor c = t.contiguous();
  comm.broadcast(c, src);
  t.copy_(c);
}

void replicate_param(const Tensor& p, comm::Communicator& comm, int src) {
  if (ZeroParam* z = zero_param(p); z && z->kind == ParamKind::kPartitioned) {
    z->gather(comm);
    z->wait();
    // Keep the gathered values as a standalone full tensor.
    Tensor full = p.detach().clone();
    z->gathered = Tensor();
    attach_storage(p.impl(), full);
  }
  broadcast_tensor(p, comm, src);
  auto z = std::make_shared<ZeroParam>();
  z->kind = ParamKind::kReplicated;
  z->shape = p.sizes();
  z->dtype = p.dtype();
  z->device = p.device();
  z->owner = p.impl();
  z->status = ParamStatus::kAvailable;
  p.impl()->extra = z;
}

}  // namespace zt::zero
