// write_file_atomically: a temporary file, synced, then a rename and a synced folder.
#include "core/text_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace zt {

namespace fs = std::filesystem;

bool write_all(std::FILE* f, const void* data, size_t bytes) {
  return bytes == 0 || std::fwrite(data, 1, bytes, f) == bytes;
}

void sync_folder(const std::string& dir) {
  const std::string path = dir.empty() ? "." : dir;
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) ZT_FAIL("cannot open folder '", path, "' to sync it: ", std::strerror(errno));
  const int err = ::fsync(fd) == 0 ? 0 : errno;
  ::close(fd);
  ZT_CHECK(err == 0 || err == EINVAL || err == ENOTSUP, "cannot sync folder '", path,
           "' to disk: ", std::strerror(err), " (what was written or renamed in it may not ",
           "survive a power loss)");
}

void write_file_atomically(const std::string& path, const std::function<bool(std::FILE*)>& fill,
                           const std::string& id) {
  const fs::path target(path);
  const fs::path tmp = target.parent_path() /
                       ("." + target.filename().string() + ".tmp" + (id.empty() ? "" : "-") + id);
  std::string why;  // empty: written
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) {
    why = std::strerror(errno);
  } else {
    bool ok = false;
    try {
      ok = fill(f) && std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
    } catch (...) {
      std::fclose(f);
      std::remove(tmp.c_str());
      throw;
    }
    int err = ok ? 0 : errno;
    if (std::fclose(f) != 0 && ok) {
      ok = false;
      err = errno;
    }
    if (!ok) why = err != 0 ? std::strerror(err) : "a write failed";
  }
  if (why.empty() && std::rename(tmp.c_str(), path.c_str()) != 0) why = std::strerror(errno);
  if (why.empty()) {
    try {
      sync_folder(target.parent_path().string());
    } catch (const Error& e) {
      ZT_FAIL("wrote '", path, "', but ", e.what());
    }
    return;
  }
  std::remove(tmp.c_str());
  ZT_FAIL("cannot write '", path, "': ", why,
          " (check that its folder exists, is writable and not full)");
}

void write_text_atomically(const std::string& path, const std::string& text,
                           const std::string& id) {
  write_file_atomically(
      path, [&](std::FILE* f) { return write_all(f, text.data(), text.size()); }, id);
}

}  // namespace zt
