// CPU allocator (64-byte aligned) and the ledgers that count bytes per tag.
#include "core/allocator.h"

#include <malloc.h>
#include <sys/sysinfo.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <new>
#include <sstream>
#include <vector>

#include "core/error.h"

namespace zt {

const char* mem_tag_name(MemTag t) {
  switch (t) {
    case MemTag::kParamShard:
      return "param_shard";
    case MemTag::kGradShard:
      return "grad_shard";
    case MemTag::kOptimState:
      return "optim_state";
    case MemTag::kGatheredParam:
      return "gathered_param";
    case MemTag::kActivation:
      return "activation";
    case MemTag::kCommBuffer:
      return "comm_buffer";
    case MemTag::kOther:
      return "other";
  }
  return "?";
}

int MemoryLedger::slot_of(Device d) {
  ZT_CHECK(d.is_cpu() || (d.index >= 0 && d.index < kMaxCudaDevices), "memory ledger: device ",
           d.str(), " is out of range; zt supports cuda:0..", kMaxCudaDevices - 1);
  return d.is_cpu() ? 0 : 1 + d.index;
}

static void raise_peak(std::atomic<int64_t>& peak, int64_t v) {
  int64_t p = peak.load(std::memory_order_relaxed);
  while (v > p && !peak.compare_exchange_weak(p, v, std::memory_order_relaxed)) {
  }
}

int64_t parse_byte_size(const std::string& text, const std::string& what) {
  const char* p = text.c_str();
  char* end = nullptr;
  double v = std::strtod(p, &end);
  std::string unit(end);
  unit.erase(0, unit.find_first_not_of(' '));
  double mul = -1;
  struct Unit {
    const char* name;
    double mul;
  };
  static const Unit units[] = {{"", 1},
                               {"B", 1},
                               {"k", 1024.0},
                               {"K", 1024.0},
                               {"KiB", 1024.0},
                               {"M", 1048576.0},
                               {"MiB", 1048576.0},
                               {"G", 1073741824.0},
                               {"GiB", 1073741824.0},
                               {"KB", 1e3},
                               {"MB", 1e6},
                               {"GB", 1e9}};
  for (const Unit& u : units)
    if (unit == u.name) mul = u.mul;
  const std::string quoted = what + (what.empty() ? "'" : ": '") + text + "'";
  ZT_CHECK(end != p && mul > 0 && std::isfinite(v) && v >= 0, quoted,
           " is not a byte size; write a number with an optional unit, e.g. 4096, 512k, "
           "64MiB, 1.5GiB");
  // A limit of 0 is "no limit": a size that would round to 0, or past what int64 holds,
  // must not quietly become one.
  const double bytes = v * mul;
  ZT_CHECK(bytes == 0 || bytes >= 1, quoted, " is less than one byte (0 means no limit)");
  ZT_CHECK(bytes < 0x1p63, quoted, " is larger than any memory (at most 8 EiB)");
  return static_cast<int64_t>(std::llround(bytes));
}

std::string format_byte_size(int64_t bytes) {
  char buf[32];
  const double b = static_cast<double>(bytes);
  if (bytes < 1024)
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  else if (bytes < (int64_t{1} << 20))
    std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024);
  else if (bytes < (int64_t{1} << 30))
    std::snprintf(buf, sizeof buf, "%.1f MiB", b / 1048576);
  else
    std::snprintf(buf, sizeof buf, "%.2f GiB", b / 1073741824);
  return buf;
}

static int64_t env_memory_limit() {
  static const int64_t limit = [] {
    const char* v = std::getenv("ZT_MEMORY_LIMIT");
    return v && *v ? parse_byte_size(v, "ZT_MEMORY_LIMIT") : int64_t{0};
  }();
  return limit;
}

// The host's memory: RAM and swap, or a smaller cgroup limit (a container's memory.max).
// CPU allocations past it could only end with the kernel killing the process (memory is
// overcommitted: the allocation succeeds and the pages fail later), so they are refused.
int64_t host_memory_bytes() {
  static const int64_t bytes = [] {
    struct sysinfo si {};
    int64_t total = sysinfo(&si) == 0 ? static_cast<int64_t>(si.totalram + si.totalswap) *
                                            static_cast<int64_t>(si.mem_unit)
                                      : int64_t{0};
    for (const char* path :
         {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
      std::ifstream f(path);
      int64_t cap = 0;
      if (f >> cap && cap > 0 && (total == 0 || cap < total)) total = cap;  // "max": none
    }
    return total;
  }();
  return bytes;
}

// Every CPU byte charged to any ledger of this process (thread ranks each have one).
static std::atomic<int64_t> g_process_cpu_bytes{0};

int64_t process_cpu_bytes() {
  return g_process_cpu_bytes.load(std::memory_order_relaxed);
}

MemoryLedger::MemoryLedger(std::string label) : label_(std::move(label)) {
  const int64_t limit = env_memory_limit();
  for (Slot& s : slots_) s.limit.store(limit);
}

void MemoryLedger::set_limit(Device d, int64_t bytes) {
  ZT_CHECK(bytes >= 0, "memory limit must be >= 0 bytes (0: none), got ", bytes);
  slots_[slot_of(d)].limit.store(bytes);
}

int64_t MemoryLedger::limit(Device d) const {
  return slots_[slot_of(d)].limit.load();
}

void MemoryLedger::fail_limit(Device d, MemTag t, int64_t bytes, int64_t limit, bool host) const {
  MemoryCounters c = counters(d);
  std::vector<int> order(kNumMemTags);
  for (int i = 0; i < kNumMemTags; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](int a, int b) { return c.current[a] > c.current[b]; });
  std::ostringstream os;
  os << label_ << " is out of memory on " << d.str() << ": allocating " << format_byte_size(bytes)
     << " (" << mem_tag_name(t) << ") with ";
  if (host) {
    os << format_byte_size(g_process_cpu_bytes.load()) << " in use by this process would pass "
       << "this machine's memory of " << format_byte_size(limit) << " (RAM and swap, or the "
       << "container's limit). This rank's largest consumers:";
  } else {
    os << format_byte_size(c.total_current) << " in use would pass its limit of "
       << format_byte_size(limit) << ". Largest consumers:";
  }
  const char* sep = " ";
  for (int i : order)
    if (c.current[i] > 0) {
      os << sep << mem_tag_name(static_cast<MemTag>(i)) << ' ' << format_byte_size(c.current[i]);
      sep = ", ";
    }
  if (c.total_current == 0) os << (host ? " none on this rank" : " none, nothing is held");
  os << " (peak " << format_byte_size(c.total_peak) << "). "
     << (host ? "Lower the batch or the model's sizes, or train on more machines"
              : "Raise memory.limit / ZT_MEMORY_LIMIT, or train on more ranks")
     << " (ZeRO-3 divides model states by the rank count)";
  // What shrinks the largest consumer, the request counted in.
  c.current[static_cast<int>(t)] += bytes;
  const auto largest =
      static_cast<MemTag>(std::max_element(c.current.begin(), c.current.end()) - c.current.begin());
  os << "; the largest, " << mem_tag_name(largest) << ", ";
  switch (largest) {
    case MemTag::kOptimState:
      os << "moves to host memory with zero_optimization.offload_optimizer (device: cpu)";
      break;
    case MemTag::kGatheredParam:
      os << "shrinks with a lower stage3_max_live_parameters, stage3_prefetch_bucket_size or "
            "stage3_param_persistence_threshold";
      break;
    case MemTag::kActivation:
      os << "shrinks with a smaller batch or train.activation_checkpointing: true";
      break;
    case MemTag::kCommBuffer:
      os << "shrinks with a lower reduce_bucket_size";
      break;
    case MemTag::kParamShard:
    case MemTag::kGradShard:
      os << "shrinks with more ranks";
      break;
    case MemTag::kOther:
      os << "is what ZeRO-3 does not partition (replicated modules, buffers, scratch): it "
            "shrinks with a smaller model or batch";
      break;
  }
  throw OutOfMemoryError(os.str());
}

void MemoryLedger::add(Device d, MemTag t, int64_t bytes) {
  Slot& s = slots_[slot_of(d)];
  int i = static_cast<int>(t);
  // Reserve first, then check: concurrent adds (a rank and its communication thread)
  // cannot both slip under a limit.
  if (d.is_cpu()) {
    const int64_t host = host_memory_bytes();
    if (g_process_cpu_bytes.fetch_add(bytes, std::memory_order_relaxed) + bytes > host &&
        host > 0) {
      g_process_cpu_bytes.fetch_sub(bytes, std::memory_order_relaxed);
      fail_limit(d, t, bytes, host, /*host=*/true);
    }
  }
  if (int64_t limit = s.limit.load(std::memory_order_relaxed); limit > 0) {
    int64_t after = s.total_current.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    if (after > limit) {
      s.total_current.fetch_sub(bytes, std::memory_order_relaxed);
      if (d.is_cpu()) g_process_cpu_bytes.fetch_sub(bytes, std::memory_order_relaxed);
      fail_limit(d, t, bytes, limit, /*host=*/false);
    }
    raise_peak(s.peak[i], s.current[i].fetch_add(bytes, std::memory_order_relaxed) + bytes);
    raise_peak(s.total_peak, after);
    return;
  }
  raise_peak(s.peak[i], s.current[i].fetch_add(bytes, std::memory_order_relaxed) + bytes);
  raise_peak(s.total_peak, s.total_current.fetch_add(bytes, std::memory_order_relaxed) + bytes);
}

void MemoryLedger::sub(Device d, MemTag t, int64_t bytes) {
  if (d.is_cpu()) g_process_cpu_bytes.fetch_sub(bytes, std::memory_order_relaxed);
  Slot& s = slots_[slot_of(d)];
  s.current[static_cast<int>(t)].fetch_sub(bytes, std::memory_order_relaxed);
  s.total_current.fetch_sub(bytes, std::memory_order_relaxed);
}

MemoryCounters MemoryLedger::counters(Device d) const {
  const Slot& s = slots_[slot_of(d)];
  MemoryCounters c;
  for (int i = 0; i < kNumMemTags; ++i) {
    c.current[i] = s.current[i].load();
    c.peak[i] = s.peak[i].load();
  }
  c.total_current = s.total_current.load();
  c.total_peak = s.total_peak.load();
  return c;
}

void MemoryLedger::reset_peaks() {
  for (Slot& s : slots_) {
    for (int i = 0; i < kNumMemTags; ++i) s.peak[i].store(s.current[i].load());
    s.total_peak.store(s.total_current.load());
  }
}

std::string MemoryLedger::report_json(Device d) const {
  MemoryCounters c = counters(d);
  std::ostringstream os;
  os << "{\"device\":\"" << d.str() << "\"";
  for (int i = 0; i < kNumMemTags; ++i) {
    const char* n = mem_tag_name(static_cast<MemTag>(i));
    os << ",\"" << n << "\":" << c.current[i] << ",\"" << n << "_peak\":" << c.peak[i];
  }
  os << ",\"total\":" << c.total_current << ",\"total_peak\":" << c.total_peak << "}";
  return os.str();
}

static std::shared_ptr<MemoryLedger>& thread_ledger() {
  static std::shared_ptr<MemoryLedger> global = std::make_shared<MemoryLedger>("this process");
  thread_local std::shared_ptr<MemoryLedger> ledger = global;
  return ledger;
}

const std::shared_ptr<MemoryLedger>& current_ledger() {
  return thread_ledger();
}
MemoryCounters memory_stats(Device d) {
  return current_ledger()->counters(d);
}
void reset_peak_memory() {
  current_ledger()->reset_peaks();
}

LedgerScope::LedgerScope(std::shared_ptr<MemoryLedger> ledger) : prev_(thread_ledger()) {
  thread_ledger() = std::move(ledger);
}
LedgerScope::~LedgerScope() {
  thread_ledger() = std::move(prev_);
}

static thread_local MemTag g_tag = MemTag::kOther;
MemTag current_mem_tag() {
  return g_tag;
}
// The scopes open on this thread, in the order they opened.
static std::vector<MemTagScope*>& open_tag_scopes() {
  thread_local std::vector<MemTagScope*> scopes;
  return scopes;
}
MemTagScope::MemTagScope(MemTag t) : prev_(g_tag) {
  open_tag_scopes().push_back(this);
  g_tag = t;
}
// Scopes nest; one closed before a scope opened inside it (held by an object that ends
// early) leaves the chain, and that scope restores at its own close what this one would
// have: once every scope is closed, the tag is the one before the first opened.
MemTagScope::~MemTagScope() {
  std::vector<MemTagScope*>& open = open_tag_scopes();
  if (!open.empty() && open.back() == this) {
    g_tag = prev_;
    open.pop_back();
    return;
  }
  const auto it = std::find(open.begin(), open.end(), this);
  if (it == open.end()) return;
  (*(it + 1))->prev_ = prev_;
  open.erase(it);
}

namespace {
class CpuAllocator final : public Allocator {
 public:
  CpuAllocator() {
    // Training frees and re-allocates the same large blocks every step (gathered
    // parameters, buckets, activations). glibc serves blocks above its mmap threshold with
    // fresh mmaps and trims freed heap memory back to the OS, so each step pays page faults
    // on every large tensor; keeping freed memory in the heap makes reuse cheap (measured:
    // ZeRO-3 step 205 ms -> 132 ms in zt-bench zero).
    mallopt(M_MMAP_THRESHOLD, 256 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
  }
  void* allocate(size_t bytes, Device) override {
    size_t rounded = (bytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
    ZT_CHECK(p != nullptr, "out of CPU memory allocating ", bytes, " bytes");
    return p;
  }
  void deallocate(void* p, size_t, Device) override { std::free(p); }
};
CpuAllocator g_cpu_allocator;
Allocator* g_cuda_allocator = nullptr;
}  // namespace

Allocator* allocator_for(DeviceType t) {
  if (t == DeviceType::CPU) return &g_cpu_allocator;
  ZT_CHECK(g_cuda_allocator != nullptr,
           "CUDA device requested but zt was built without CUDA (configure with -DZT_CUDA=ON)");
  return g_cuda_allocator;
}

void register_allocator(DeviceType t, Allocator* a) {
  ZT_CHECK(t == DeviceType::CUDA, "only the CUDA allocator can be registered");
  g_cuda_allocator = a;
}

}  // namespace zt
