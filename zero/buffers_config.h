// zt's buffer policy for ZeRO-3: how buffers (BatchNorm running statistics and the like)
// are kept identical across ranks, and how often that is verified. A plain struct the
// engine reads; configs/ fills it from the YAML `buffers` section.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zt::zero {

/// broadcast: rank 0's value; average: all-reduce mean of floating buffers (integer
/// buffers take rank 0's); none: each rank keeps its own.
enum class BufferSync { broadcast, average, none };

/// A buffer sync policy for one module subtree (dotted path, "" = everything).
struct BufferPolicy {
  std::string module{};
  BufferSync sync = BufferSync::average;
};

/// A default policy, per-module exceptions, replica checks.
struct BuffersConfig {
  BufferSync sync = BufferSync::average;
  std::vector<BufferPolicy> modules;
  int64_t verify_every = 0;  ///< steps between replica checks; 0: after init/load only
  /// The policy for a buffer name: the longest module prefix (at a '.' boundary) wins.
  BufferSync sync_for(const std::string& buffer_name) const;
};

}  // namespace zt::zero
