// write_text_atomically: a temporary file, then a rename.
#include "core/text_file.h"

#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace zt {

namespace fs = std::filesystem;

void write_text_atomically(const std::string& path, const std::string& text,
                           const std::string& id) {
  const fs::path target(path);
  const fs::path tmp = target.parent_path() /
                       ("." + target.filename().string() + ".tmp" + (id.empty() ? "" : "-") + id);
  bool written = false;
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (f.good()) {
      f << text;
      f.close();
      written = f.good();
    }
  }
  std::error_code ec;
  if (written) fs::rename(tmp, target, ec);
  if (!written || ec) {
    std::error_code ignore;
    fs::remove(tmp, ignore);
    ZT_FAIL("cannot write '", path, "'",
            written ? ": " + ec.message()
                    : std::string(": check that its folder exists, is writable and not full"));
  }
}

}  // namespace zt
