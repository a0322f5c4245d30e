// Storage: one allocation on one device, charged to the ledger and tag that were
// current when it was made; freed (and uncharged) when the last Tensor lets go.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "core/allocator.h"

namespace zt {

class Storage {
 public:
  /// Allocates `bytes` on `device`, tagged with the current MemTag.
  Storage(size_t bytes, Device device);
  /// Wraps external memory (an mmap, a pinned host buffer); `release` frees it. Not counted.
  Storage(void* data, size_t bytes, Device device, std::function<void(void*)> release);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }
  MemTag tag() const { return tag_; }
  /// How many in-place writes (copy_, fill_, add_, mul_, random fills, optimizer updates)
  /// its tensors have had: autograd compares it with the version a node saved, as
  /// PyTorch's version counter (views share it, being views of one storage).
  uint64_t version() const { return version_; }
  void bump_version() { ++version_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  Device device_;
  MemTag tag_ = MemTag::kOther;
  uint64_t version_ = 0;  // written by the thread that writes the data
  std::shared_ptr<MemoryLedger> ledger_;  // null for external memory
  std::function<void(void*)> release_;
};

}  // namespace zt
