// Buffer synchronization and replica verification.
#include "zero/replicas.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <sstream>

#include "core/ops.h"
#include "zero/param.h"

namespace zt::zero {

namespace {

// Buffers that one collective can synchronize together: the same operation (average, or
// rank 0's value), dtype and device.
struct SyncGroup {
  bool average;
  DType dtype;
  Device device;
  std::vector<Tensor> members;
};

// One collective over `group`: on the tensor itself when it is the only contiguous
// member, else on a flat buffer its members are packed into and unpacked from by one
// multi_copy_ each. An average is taken in f64 whatever the buffers' dtype: f32, bf16 and
// f16 values equal on every rank then average back to themselves exactly (in f32,
// (x + x + x) / 3 is not always x), so a buffer no rank changed, such as a frozen
// BatchNorm's statistics, stays bit for bit as it was at any world size. An f64 buffer has
// no wider type to sum in: its equal values may come back an ulp apart.
void sync_group(const SyncGroup& group, comm::Communicator& comm) {
  const DType wire = group.average ? DType::f64 : group.dtype;
  auto collective = [&](const Tensor& t) {
    if (group.average)
      comm.all_reduce(t, comm::ReduceOp::kAvg);
    else
      broadcast_tensor(t, comm, 0);
  };
  if (group.members.size() == 1 && group.members[0].is_contiguous() && wire == group.dtype) {
    collective(group.members[0]);
    return;
  }
  std::vector<Tensor> members, spans;
  for (const Tensor& b : group.members) members.push_back(b.contiguous());
  int64_t total = 0;
  for (const Tensor& b : members) total += b.numel();
  Tensor flat;
  {
    MemTagScope tag(MemTag::kCommBuffer);
    flat = Tensor::empty({total}, wire, group.device);
  }
  int64_t off = 0;
  for (const Tensor& b : members) {
    spans.push_back(flat.narrow(0, off, b.numel()).view(b.sizes()));
    off += b.numel();
  }
  multi_copy_(spans, members);
  collective(flat);
  multi_copy_(members, spans);
  for (size_t i = 0; i < members.size(); ++i)
    if (!members[i].same(group.members[i])) group.members[i].copy_(members[i]);
}

}  // namespace

void sync_buffers(const NamedTensors& buffers, const BuffersConfig& policy,
                  comm::Communicator& comm) {
  if (comm.size() == 1) return;
  autograd::NoGradGuard ng;
  // One collective per group (a model's BatchNorm statistics: one all-reduce for the
  // running means and variances, one broadcast for the batch counters), not per buffer.
  std::vector<SyncGroup> groups;
  for (const auto& [name, b] : buffers) {
    if (!b.defined()) continue;
    const BufferSync s = policy.sync_for(name);
    if (s == BufferSync::none) continue;
    const bool average = s == BufferSync::average && is_floating(b.dtype());
    // Named here for the lambda: clang before 16 does not let a lambda capture `b`, a
    // structured binding.
    const DType dtype = b.dtype();
    const Device device = b.device();
    auto g = std::find_if(groups.begin(), groups.end(), [&](const SyncGroup& x) {
      return x.average == average && x.dtype == dtype && x.device == device;
    });
    if (g == groups.end()) g = groups.insert(groups.end(), {average, dtype, device, {}});
    g->members.push_back(b);
  }
  for (const SyncGroup& g : groups) sync_group(g, comm);
}

uint64_t fnv1a(const void* p, size_t n, uint64_t h) {
  const unsigned char* c = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ c[i]) * 1099511628211ull;
  return h;
}

uint64_t tensor_hash(const Tensor& t) {
  uint8_t dt = static_cast<uint8_t>(t.dtype());
  uint64_t h = fnv1a(&dt, 1);
  for (int64_t s : t.sizes()) h = fnv1a(&s, sizeof(s), h);
  Tensor c = t.detach().to(Device::cpu()).contiguous();
  return fnv1a(c.data_ptr(), c.numel() * dtype_size(c.dtype()), h);
}

uint64_t content_hash(const Tensor& t) {
  uint64_t meta = static_cast<uint64_t>(t.dtype());
  for (int64_t s : t.sizes()) meta = meta * 1099511628211ull ^ static_cast<uint64_t>(s);
  Tensor c = t.detach().to(Device::cpu()).contiguous();
  const auto* p = static_cast<const unsigned char*>(c.data_ptr());
  const size_t n = static_cast<size_t>(c.numel()) * dtype_size(c.dtype());
  // Four lanes of multiply-xorshift over 8-byte words: the lanes' multiplies overlap.
  constexpr uint64_t kMul = 0x9e3779b97f4a7c15ull;
  uint64_t lane[4] = {meta, meta ^ 1, meta ^ 2, meta ^ 3};
  auto mix = [](uint64_t h, uint64_t w) {
    h = (h ^ w) * kMul;
    return h ^ (h >> 29);
  };
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int k = 0; k < 4; ++k) {
      uint64_t w;
      std::memcpy(&w, p + i + 8 * k, 8);
      lane[k] = mix(lane[k], w);
    }
  }
  uint64_t tail = n;  // the remaining 0..31 bytes, and the length
  for (; i < n; ++i) tail = mix(tail, p[i]);
  return mix(mix(mix(mix(tail, lane[0]), lane[1]), lane[2]), lane[3]);
}

std::string rank_set(const std::vector<int>& ranks) {
  std::ostringstream os;
  os << "{";
  for (size_t i = 0; i < ranks.size(); ++i) os << (i ? ", " : "") << ranks[i];
  return os.str() + "}";
}

void verify_replicas(const NamedTensors& tensors, comm::Communicator& comm) {
  if (comm.size() == 1) return;
  std::string mine(tensors.size() * sizeof(uint64_t), '\0');
  for (size_t i = 0; i < tensors.size(); ++i) {
    uint64_t h = content_hash(tensors[i].second);
    std::memcpy(mine.data() + i * sizeof(uint64_t), &h, sizeof(h));
  }
  std::vector<std::string> all = comm.all_gather_bytes(mine, "verify_replicas");
  for (size_t r = 0; r < all.size(); ++r)
    ZT_CHECK(all[r].size() == mine.size(), "verify_replicas: rank ", r, " has ",
             all[r].size() / sizeof(uint64_t), " replicated tensors, rank ", comm.rank(), " has ",
             tensors.size(), " (the ranks built different models)");
  for (size_t i = 0; i < tensors.size(); ++i) {
    std::map<uint64_t, std::vector<int>> groups;
    for (size_t r = 0; r < all.size(); ++r) {
      uint64_t h;
      std::memcpy(&h, all[r].data() + i * sizeof(uint64_t), sizeof(h));
      groups[h].push_back(static_cast<int>(r));
    }
    if (groups.size() == 1) continue;
    std::ostringstream os;
    os << "replica check failed: '" << tensors[i].first << "' differs across ranks ("
       << groups.size() << " distinct values):";
    for (auto& [h, ranks] : groups) os << " ranks " << rank_set(ranks);
    os << " — it is the first divergent tensor; load it with zero::load_state_dict (rank 0's "
          "values reach every rank) or alike on every rank, and for a buffer that training "
          "changes on each rank, use a buffers.sync policy (broadcast or average)";
    throw comm::AgreedError(os.str(), comm.rank());  // every rank compared the same hashes
  }
}

}  // namespace zt::zero
