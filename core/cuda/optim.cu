// CUDA optimizer kernels: Adam/AdamW and SGD over a whole list of parameters in one
// launch (a multi-tensor apply). The host builds a table of {pointers, numel, first
// block} entries, one per parameter, copies it through a pinned staging buffer to device
// memory on the current stream (no host synchronization), and launches one grid whose
// blocks each find their entry by binary search and update a fixed run of its elements.
// Uploaded tables are cached: a training step updates the same tensors every time, so
// in steady state the launch reuses its table and copies nothing.
// Per-step constants travel as kernel arguments, or, for a capturable optimizer, in a
// small f64 tensor each block reads when it starts (a replayed graph then sees the values
// written for its step). The CPU kernels of the same names (core/cpu/optim.cpp) are the
// specification: the arithmetic below rounds each operation on its own (explicit _rn
// intrinsics, so nvcc cannot fuse multiply-adds), in the CPU loop's order, and so gives
// its bits.
#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "core/cuda/allocator.h"
#include "core/cuda/block_reduce.cuh"
#include "core/cuda/device_math.cuh"
#include "core/cuda/graph.h"
#include "core/cuda/loops.cuh"
#include "core/kernel_checks.h"
#include "core/kernels.h"

namespace zt::cuda {

namespace {

constexpr int kOptThreads = 256;
constexpr int64_t kBlockElems = 4096;  // elements per block, 16 per thread
constexpr int kStagingSlots = 4;       // tables in flight per device before the host waits
constexpr size_t kCachedTables = 8;    // uploaded tables kept per device

// One parameter of a launch: its arrays (s0, s1: state slots, null when unused; low:
// the 16-bit copy or null), its numel and the first grid block that works on it.
struct Entry {
  void* p;
  const void* g;
  void* s0;
  void* s1;
  void* low;
  int64_t n;
  int64_t block0;
};
static_assert(sizeof(Entry) == 7 * 8, "Entry has no padding: tables compare with memcmp");

// ---------------------------------------------------------------- update rules

// Adam/AdamW at element i; returns the new parameter value (formula: kernel_list.h).
template <typename T>
struct AdamOp {
  T beta1, beta2, omb1, omb2, l2, decay, step_size, inv_sqrt_bc2, eps;
  const double* k;  // {l2, decay, step_size, inv_sqrt_bc2} in device memory, or null

  // The op with its per-step constants in place (cast as the host casts them).
  __device__ __forceinline__ AdamOp resolved() const {
    AdamOp o = *this;
    if (k) {
      o.l2 = static_cast<T>(k[0]);
      o.decay = static_cast<T>(k[1]);
      o.step_size = static_cast<T>(k[2]);
      o.inv_sqrt_bc2 = static_cast<T>(k[3]);
    }
    return o;
  }

  // One element: p, its gradient g and moments m, v (has_state is always true here).
  __device__ __forceinline__ void operator()(T& p, T g, T& m, T& v, bool) const {
    const T pi = p;
    const T gi = add_rn(g, mul_rn(l2, pi));
    const T mi = add_rn(mul_rn(beta1, m), mul_rn(omb1, gi));
    const T vi = add_rn(mul_rn(beta2, v), mul_rn(mul_rn(omb2, gi), gi));
    m = mi;
    v = vi;
    const T denom = add_rn(mul_rn(sqrt_rn(vi), inv_sqrt_bc2), eps);
    p = sub_rn(mul_rn(pi, decay), div_rn(mul_rn(step_size, mi), denom));
  }
};

// SGD at element i (buf null without momentum); returns the new parameter value.
template <typename T>
struct SgdOp {
  T lr, momentum, omd, weight_decay;
  bool nesterov, first;
  const double* k;  // {lr, first} in device memory, or null

  __device__ __forceinline__ SgdOp resolved() const {
    SgdOp o = *this;
    if (k) {
      o.lr = static_cast<T>(k[0]);
      o.first = k[1] != 0;
    }
    return o;
  }

  // One element: p, its gradient g and momentum buffer buf (when has_buf).
  __device__ __forceinline__ void operator()(T& p, T g, T& buf, T&, bool has_buf) const {
    const T pi = p;
    T d = add_rn(g, mul_rn(weight_decay, pi));
    if (has_buf) {
      const T b = first ? d : add_rn(mul_rn(momentum, buf), mul_rn(omd, d));
      buf = b;
      d = nesterov ? add_rn(d, mul_rn(momentum, b)) : b;
    }
    p = sub_rn(pi, mul_rn(lr, d));
  }
};

// Elements [i, i + kN) of an entry through `op`, loaded and stored kN at a time (one
// access per array: the caller checked the alignment) or one by one (kN = 1); writes
// their 16-bit copy (type L) when the entry has one.
template <int kN, typename T, typename L, typename Op>
__device__ __forceinline__ void update(const Op& op, T* p, const T* g, T* s0, T* s1, L* low,
                                       int64_t i) {
  T pv[kN], gv[kN], av[kN] = {}, bv[kN] = {};
  copy_vec<kN>(pv, p + i);
  copy_vec<kN>(gv, g + i);
  if (s0) copy_vec<kN>(av, s0 + i);
  if (s1) copy_vec<kN>(bv, s1 + i);
  L lv[kN];
#pragma unroll
  for (int e = 0; e < kN; ++e) {
    op(pv[e], gv[e], av[e], bv[e], s0 != nullptr);
    lv[e] = convert<L>(pv[e]);
  }
  copy_vec<kN>(p + i, pv);
  if (s0) copy_vec<kN>(s0 + i, av);
  if (s1) copy_vec<kN>(s1 + i, bv);
  if (low) copy_vec<kN>(low + i, lv);
}

// Block b updates elements [(b - block0) * kBlockElems, + kBlockElems) of the entry
// whose block range holds b, and writes their 16-bit copy (type L) when it has one:
// 16 / sizeof(T) elements a thread at a time where every array of the entry starts on a
// 16-byte boundary (a block's run starts on one too), then the run's tail one by one.
template <typename T, typename L, typename Op>
__global__ void multi_tensor_kernel(const Entry* __restrict__ table, int entries, Op step) {
  constexpr int kVec = 16 / sizeof(T);
  __shared__ int s_entry;
  const Op op = step.resolved();
  const int64_t block = blockIdx.x;
  if (threadIdx.x == 0) {
    int lo = 0, hi = entries - 1;  // the last entry with block0 <= block
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (table[mid].block0 <= block)
        lo = mid;
      else
        hi = mid - 1;
    }
    s_entry = lo;
  }
  __syncthreads();
  const Entry e = table[s_entry];
  const int64_t begin = (block - e.block0) * kBlockElems;
  const int64_t end = begin + kBlockElems < e.n ? begin + kBlockElems : e.n;
  T* p = static_cast<T*>(e.p);
  const T* g = static_cast<const T*>(e.g);
  T* s0 = static_cast<T*>(e.s0);
  T* s1 = static_cast<T*>(e.s1);
  L* low = static_cast<L*>(e.low);
  const auto bits = reinterpret_cast<uintptr_t>(p) | reinterpret_cast<uintptr_t>(g) |
                    reinterpret_cast<uintptr_t>(s0) | reinterpret_cast<uintptr_t>(s1);
  const bool vec = bits % 16 == 0 && reinterpret_cast<uintptr_t>(low) % (kVec * sizeof(L)) == 0;
  block_run<kVec>(begin, end, vec,
                  [&]<int kN>(int64_t i) { update<kN>(op, p, g, s0, s1, low, i); });
}

// ---------------------------------------------------------------- table upload

// Pinned host buffers for one device's tables, used in turn; each may be refilled once
// the copy recorded by its event has run. And the tables already on the device, by
// content and stream (a table is read on the stream it was copied on), least recently
// used first out.
struct Staging {
  struct Slot {
    Entry* host = nullptr;
    size_t capacity = 0;  // entries
    cudaEvent_t copied = nullptr;
  };
  struct Cached {
    cudaStream_t stream;
    std::vector<Entry> entries;
    Tensor table;
    uint64_t used;
  };
  std::mutex mu;
  Slot slots[kStagingSlots];
  int next = 0;
  std::vector<Cached> cached;
  uint64_t clock = 0;
};

// The staging of `device`. Kept for the life of the process (never freed), so no
// CUDA call runs at static destruction.
Staging& staging(int device) {
  static std::mutex mu;
  static std::map<int, Staging*> all;
  std::lock_guard<std::mutex> lock(mu);
  Staging*& s = all[device];
  if (!s) s = new Staging;
  return *s;
}

// Inside a graph capture: a table of the graph's own, copied from a pinned host buffer
// that the graph keeps unchanged (each replay copies it again).
Tensor captured_table(const std::vector<Entry>& entries, int device, cudaStream_t stream) {
  const size_t bytes = entries.size() * sizeof(Entry);
  void* h = nullptr;
  {
    RelaxedCapture relaxed;
    CUDA_CHECK(cudaMallocHost(&h, bytes));
  }
  std::shared_ptr<void> host(h, [](void* p) { cudaFreeHost(p); });
  std::memcpy(h, entries.data(), bytes);
  Tensor table = device_bytes(bytes, Device::cuda(device));
  ++::zt::detail::thread_work_counts().h2d_copies;
  CUDA_CHECK(cudaMemcpyAsync(table.data_ptr(), h, bytes, cudaMemcpyHostToDevice, stream));
  Graph::keep_alive(table);
  Graph::keep_alive(std::move(host));
  return table;
}

// The device table holding `entries` for launches on `stream` (the caller's device is
// current): a cached one with the same content, or a new one copied on `stream` and
// cached in place of the least recently used. In a graph capture, captured_table().
Tensor device_table(const std::vector<Entry>& entries, int device, cudaStream_t stream) {
  if (capturing()) return captured_table(entries, device, stream);
  const size_t bytes = entries.size() * sizeof(Entry);
  Staging& st = staging(device);
  std::lock_guard<std::mutex> lock(st.mu);
  ++st.clock;
  for (Staging::Cached& c : st.cached)
    if (c.stream == stream && c.entries.size() == entries.size() &&
        std::memcmp(c.entries.data(), entries.data(), bytes) == 0) {
      c.used = st.clock;
      return c.table;
    }
  Tensor table = device_bytes(bytes, Device::cuda(device));
  Staging::Slot& slot = st.slots[st.next];
  st.next = (st.next + 1) % kStagingSlots;
  if (!slot.copied) {
    CUDA_CHECK(cudaEventCreateWithFlags(&slot.copied, cudaEventDisableTiming));
  } else if (!event_done(slot.copied)) {
    // Its previous table, kStagingSlots uploads ago, has not left it yet: a host wait,
    // counted as one (it does not happen while the GPU keeps up).
    ++::zt::detail::thread_work_counts().syncs;
    CUDA_CHECK(cudaEventSynchronize(slot.copied));
  }
  if (slot.capacity < entries.size()) {
    if (slot.host) CUDA_CHECK(cudaFreeHost(slot.host));
    slot.host = nullptr;
    slot.capacity = 0;
    void* h = nullptr;
    CUDA_CHECK(cudaMallocHost(&h, bytes));
    slot.host = static_cast<Entry*>(h);
    slot.capacity = entries.size();
  }
  std::memcpy(slot.host, entries.data(), bytes);
  ++::zt::detail::thread_work_counts().h2d_copies;
  CUDA_CHECK(cudaMemcpyAsync(table.data_ptr(), slot.host, bytes, cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(cudaEventRecord(slot.copied, stream));
  Staging::Cached entry{stream, entries, table, st.clock};
  if (st.cached.size() < kCachedTables) {
    st.cached.push_back(std::move(entry));
  } else {
    auto oldest = std::min_element(st.cached.begin(), st.cached.end(),
                                   [](const auto& a, const auto& b) { return a.used < b.used; });
    *oldest = std::move(entry);
  }
  return table;
}

// ---------------------------------------------------------------- checks and launch

// One launch of `op` over the entries of lists p, g, s0, s1 (s0/s1 may be empty lists).
template <typename T, typename Op>
void launch(const std::vector<Tensor>& p, const std::vector<Tensor>& g,
            const std::vector<Tensor>& s0, const std::vector<Tensor>& s1,
            const std::vector<Tensor>& low, DType low_dt, const Op& op) {
  std::vector<Entry> entries;
  entries.reserve(p.size());
  int64_t blocks = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const int64_t n = p[i].numel();
    if (n == 0) continue;
    entries.push_back({p[i].data_ptr(), g[i].data_ptr(), s0.empty() ? nullptr : s0[i].data_ptr(),
                       s1.empty() ? nullptr : s1[i].data_ptr(),
                       low.empty() || !low[i].defined() ? nullptr : low[i].data_ptr(), n, blocks});
    blocks += (n + kBlockElems - 1) / kBlockElems;
  }
  if (entries.empty()) return;
  ZT_CHECK(blocks <= 0x7fffffff, "optimizer kernel: ", blocks,
           " blocks exceed one CUDA grid; update fewer elements per call");
  ZT_CHECK(entries.size() <= 0x7fffffff, "optimizer kernel: too many parameters in one call");
  const int device = p[0].device().index;
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream(device);
  Tensor table = device_table(entries, device, stream);
  const auto* t = static_cast<const Entry*>(table.data_ptr());
  const int count = static_cast<int>(entries.size());
  const auto grid = static_cast<unsigned>(blocks);
  if (low_dt == DType::bf16)
    multi_tensor_kernel<T, __nv_bfloat16><<<grid, kOptThreads, 0, stream>>>(t, count, op);
  else if (low_dt == DType::f16)
    multi_tensor_kernel<T, __half><<<grid, kOptThreads, 0, stream>>>(t, count, op);
  else  // no copies: every entry's low is null
    multi_tensor_kernel<T, T><<<grid, kOptThreads, 0, stream>>>(t, count, op);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void adam_update(const std::vector<Tensor>& p, const std::vector<Tensor>& g,
                 const std::vector<Tensor>& m, const std::vector<Tensor>& v,
                 const std::vector<Tensor>& low, double beta1, double beta2, double l2,
                 double decay, double step_size, double inv_sqrt_bc2, double eps,
                 const Tensor& constants) {
  if (p.empty()) return;
  const DType low_dt = ::zt::detail::check_optimizer_lists("adam_update", p, {&g, &m, &v}, low);
  ::zt::detail::check_step_constants("adam_update", constants, 4, p[0].device());
  const double* k = data_or_null<double>(constants);
  auto run = [&]<typename T>() {
    const T b1 = static_cast<T>(beta1), b2 = static_cast<T>(beta2);
    const AdamOp<T> op{b1,
                       b2,
                       static_cast<T>(1.0 - beta1),  // in double, rounded once, as on the CPU
                       static_cast<T>(1.0 - beta2),
                       static_cast<T>(l2),
                       static_cast<T>(decay),
                       static_cast<T>(step_size),
                       static_cast<T>(inv_sqrt_bc2),
                       static_cast<T>(eps),
                       k};
    launch<T>(p, g, m, v, low, low_dt, op);
  };
  if (p[0].dtype() == DType::f32)
    run.template operator()<float>();
  else
    run.template operator()<double>();
}

void sgd_update(const std::vector<Tensor>& p, const std::vector<Tensor>& g,
                const std::vector<Tensor>& buf, const std::vector<Tensor>& low, double lr,
                double momentum, double dampening, double weight_decay, bool nesterov, bool first,
                const Tensor& constants) {
  if (p.empty()) return;
  const DType low_dt = ::zt::detail::check_sgd_lists(p, g, buf, low);
  ::zt::detail::check_step_constants("sgd_update", constants, 2, p[0].device());
  const double* k = data_or_null<double>(constants);
  auto run = [&]<typename T>() {
    const SgdOp<T> op{static_cast<T>(lr),
                      static_cast<T>(momentum),
                      static_cast<T>(1 - dampening),
                      static_cast<T>(weight_decay),
                      nesterov,
                      first,
                      k};
    launch<T>(p, g, buf, {}, low, low_dt, op);
  };
  if (p[0].dtype() == DType::f32)
    run.template operator()<float>();
  else
    run.template operator()<double>();
}

}  // namespace zt::cuda
