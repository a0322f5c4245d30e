// The buffer policy's lookup: the sync mode for one buffer.
#include "zero/buffers_config.h"

namespace zt::zero {

BufferSync BuffersConfig::sync_for(const std::string& buffer_name) const {
  BufferSync best = sync;
  size_t best_len = 0;
  bool found = false;
  for (const auto& p : modules) {
    const std::string& m = p.module;
    const bool match = m.empty() || buffer_name == m ||
                       (buffer_name.size() > m.size() && buffer_name.compare(0, m.size(), m) == 0 &&
                        buffer_name[m.size()] == '.');
    if (match && (!found || m.size() >= best_len)) {
      best = p.sync;
      best_len = m.size();
      found = true;
    }
  }
  return best;
}

}  // namespace zt::zero
