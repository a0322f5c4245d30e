// Storage allocation and accounting.
#include "core/storage.h"

namespace zt {

Storage::Storage(size_t bytes, Device device)
    : bytes_(bytes), device_(device), tag_(current_mem_tag()), ledger_(current_ledger()) {
  // Charge first: a refused charge (a memory limit) allocates nothing.
  ledger_->add(device_, tag_, static_cast<int64_t>(bytes_));
  try {
    data_ = allocator_for(device.type)->allocate(bytes, device);
  } catch (...) {
    ledger_->sub(device_, tag_, static_cast<int64_t>(bytes_));
    throw;
  }
}

Storage::Storage(void* data, size_t bytes, Device device, std::function<void(void*)> release)
    : data_(data), bytes_(bytes), device_(device), release_(std::move(release)) {}

Storage::~Storage() {
  if (release_) {
    release_(data_);
    return;
  }
  allocator_for(device_.type)->deallocate(data_, bytes_, device_);
  ledger_->sub(device_, tag_, static_cast<int64_t>(bytes_));
}

}  // namespace zt
