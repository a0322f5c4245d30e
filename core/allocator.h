// Allocators and memory accounting. Every byte zt allocates is counted per device and
// per tag (what the memory is for), current and peak, in a MemoryLedger. Each thread
// charges the ledger installed by LedgerScope (thread ranks get one each), so per-rank
// memory claims can be measured inside one process. A ledger may carry a limit per
// device: an allocation that would pass it fails with OutOfMemoryError, which names the
// rank, the request, the limit and the largest consumers by tag. This is how a rank is
// made "smaller" than a model in tests, and how a run is kept inside a budget.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/device.h"
#include "core/error.h"
#include "core/error_context.h"

namespace zt {

/// What an allocation is for. Set with MemTagScope; default kOther.
enum class MemTag : uint8_t {
  kParamShard,
  kGradShard,
  kOptimState,
  kGatheredParam,
  kActivation,
  kCommBuffer,
  kOther,
};
constexpr int kNumMemTags = 7;
const char* mem_tag_name(MemTag t);

/// Byte counters for one device, per tag and in total.
struct MemoryCounters {
  std::array<int64_t, kNumMemTags> current{};
  std::array<int64_t, kNumMemTags> peak{};
  int64_t total_current = 0;
  int64_t total_peak = 0;
  int64_t cur(MemTag t) const { return current[static_cast<int>(t)]; }
  int64_t pk(MemTag t) const { return peak[static_cast<int>(t)]; }
};

/// An allocation refused because it would pass its ledger's limit, or because the device
/// has no memory left for it. Its last line names the module that was running, if any.
class OutOfMemoryError : public Error {
 public:
  explicit OutOfMemoryError(const std::string& what) : Error(with_error_context(what)) {}
};

/// "64MiB", "1.5GiB", "512k", "4096" -> bytes (k/M/G and KiB/MiB/GiB are powers of 1024;
/// KB/MB/GB powers of 1000). Errors name `what` and the accepted forms; a size below one
/// byte (other than 0) or past 8 EiB is an error, never rounded to 0 or wrapped.
int64_t parse_byte_size(const std::string& text, const std::string& what = "byte size");

/// A set of counters (CPU + each GPU), with optional limits. Thread-safe.
class MemoryLedger {
 public:
  /// Counter slots: 0 for the CPU, 1 + i for cuda:i.
  static constexpr int kLedgerSlots = kMaxCudaDevices + 1;
  /// A ledger named `label` in errors ("rank 2"); limits start at $ZT_MEMORY_LIMIT
  /// (every device) when that is set, else none.
  explicit MemoryLedger(std::string label = "this process");
  /// Charges `bytes`; throws OutOfMemoryError (charging nothing) past the device's limit.
  void add(Device d, MemTag t, int64_t bytes);
  void sub(Device d, MemTag t, int64_t bytes);
  /// A consistent copy of one device's counters.
  MemoryCounters counters(Device d) const;
  /// Sets every peak to the current value.
  void reset_peaks();
  /// One-line JSON object with current and peak bytes per tag for a device.
  std::string report_json(Device d) const;
  /// Caps the bytes charged on `d` (0: no limit).
  void set_limit(Device d, int64_t bytes);
  int64_t limit(Device d) const;
  void set_label(std::string label) { label_ = std::move(label); }
  const std::string& label() const { return label_; }

 private:
  struct Slot {
    std::array<std::atomic<int64_t>, kNumMemTags> current{};
    std::array<std::atomic<int64_t>, kNumMemTags> peak{};
    std::atomic<int64_t> total_current{0};
    std::atomic<int64_t> total_peak{0};
    std::atomic<int64_t> limit{0};
  };
  static int slot_of(Device d);
  /// Throws OutOfMemoryError: `bytes` would pass `limit`, this ledger's for `d`, or with
  /// `host` the machine's memory (every CPU ledger of the process together).
  [[noreturn]] void fail_limit(Device d, MemTag t, int64_t bytes, int64_t limit, bool host) const;
  std::array<Slot, kLedgerSlots> slots_;
  std::string label_;
};

/// Human-readable bytes: "512 B", "3.2 MiB", "1.05 GiB".
std::string format_byte_size(int64_t bytes);

/// The ledger this thread charges (the process-wide one unless a LedgerScope is active).
const std::shared_ptr<MemoryLedger>& current_ledger();
/// Counters of the current ledger for a device.
MemoryCounters memory_stats(Device d = Device::cpu());
/// Resets the peaks of the current ledger.
void reset_peak_memory();
/// The host's memory as CPU allocations are held to it: RAM and swap, or a smaller cgroup
/// limit (a container's); 0 where unknown. A process's CPU tensors past it are refused.
int64_t host_memory_bytes();
/// CPU bytes held by every ledger of this process (each thread rank has its own).
int64_t process_cpu_bytes();

/// Installs a ledger for this thread while in scope.
class LedgerScope {
 public:
  explicit LedgerScope(std::shared_ptr<MemoryLedger> ledger);
  ~LedgerScope();
  LedgerScope(const LedgerScope&) = delete;
  LedgerScope& operator=(const LedgerScope&) = delete;

 private:
  std::shared_ptr<MemoryLedger> prev_;
};

/// The tag new allocations on this thread get.
MemTag current_mem_tag();
/// Sets the allocation tag for this thread while in scope.
class MemTagScope {
 public:
  explicit MemTagScope(MemTag t);
  ~MemTagScope();
  MemTagScope(const MemTagScope&) = delete;
  MemTagScope& operator=(const MemTagScope&) = delete;

 private:
  MemTag prev_;
};

/// A raw allocator for one device type. Accounting is done by Storage, not here.
class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t bytes, Device d) = 0;
  virtual void deallocate(void* p, size_t bytes, Device d) = 0;
  /// Bytes held in caches (CUDA); 0 for the CPU.
  virtual int64_t cached_bytes() const { return 0; }
  /// Returns cached blocks to the system.
  virtual void empty_cache() {}
};

/// The allocator for a device type (CUDA's is registered by the CUDA backend).
Allocator* allocator_for(DeviceType t);
void register_allocator(DeviceType t, Allocator* a);

}  // namespace zt
