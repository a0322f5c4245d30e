// Writing a whole text file so that readers never see half of it.
#pragma once

#include <string>

namespace zt {

/// Writes `text` to `path` through a temporary file beside it and a rename: a reader sees
/// the old contents or the new ones, never a part. A failed write (a full disk, a missing
/// folder) leaves no temporary behind and raises an error naming `path`. `id` keeps the
/// temporaries of concurrent writers of one path apart (a rank, a unique token).
void write_text_atomically(const std::string& path, const std::string& text,
                           const std::string& id = "");

}  // namespace zt
