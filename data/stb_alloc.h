// A cap on the stb image decoder's allocations on this thread (data/stb_impl.cpp), for the
// scope of an object: a decode that would allocate past it fails as out of memory.
#pragma once

#include <cstddef>

namespace zt::data {

class StbAllocCap {
 public:
  /// Each allocation of the decoder on this thread at most `bytes` until destruction.
  explicit StbAllocCap(std::size_t bytes);
  ~StbAllocCap();
  StbAllocCap(const StbAllocCap&) = delete;
  StbAllocCap& operator=(const StbAllocCap&) = delete;

 private:
  std::size_t previous_;
};

}  // namespace zt::data
