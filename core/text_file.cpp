// write_text_atomically: a temporary file, then a rename.
#include "core/text_file.h"

#include <cerrno>
#include <cstring>
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
  std::string why;  // empty: written
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f.good()) {
      why = std::strerror(errno);
    } else {
      f << text;
      f.close();
      if (!f.good()) why = "the write failed";
    }
  }
  std::error_code ec;
  if (why.empty()) {
    fs::rename(tmp, target, ec);
    if (ec) why = ec.message();
  }
  if (why.empty()) return;
  std::error_code ignore;
  fs::remove(tmp, ignore);
  ZT_FAIL("cannot write '", path, "': ", why,
          " (check that its folder exists, is writable and not full)");
}

}  // namespace zt
