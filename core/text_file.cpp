// write_file_atomically: a temporary file, synced, then a rename and a synced folder.
#include "core/text_file.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

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

std::string write_target(const std::string& path) {
  fs::path p(path);
  std::error_code ec;
  // 40 links, as Linux follows (ELOOP past them).
  for (int links = 0; fs::is_symlink(fs::symlink_status(p, ec)); ++links) {
    ZT_CHECK(links < 40, "cannot write '", path,
             "': too many levels of symbolic links (a loop?); pass the file itself");
    const fs::path to = fs::read_symlink(p, ec);
    if (ec) break;
    p = to.is_absolute() ? to : p.parent_path() / to;
  }
  return p.string();
}

std::string not_a_regular_file(const std::string& path) {
  std::error_code ec;
  switch (fs::status(path, ec).type()) {
    case fs::file_type::not_found:
    case fs::file_type::none:
    case fs::file_type::regular:
      return "";
    case fs::file_type::directory:
      return "a folder";
    case fs::file_type::fifo:
      return "a FIFO";
    case fs::file_type::character:
      return "a character device";
    case fs::file_type::block:
      return "a block device";
    case fs::file_type::socket:
      return "a socket";
    default:
      return "not a regular file";
  }
}

void write_file_atomically(const std::string& path, const std::function<bool(std::FILE*)>& fill,
                           const std::string& id) {
  // A link's file is written (the link stays); anything but a regular file is left as it is.
  const fs::path target(write_target(path));
  const std::string kind = not_a_regular_file(target);
  ZT_CHECK(kind.empty(), "cannot write '", path, "': it is ", kind,
           ", not a regular file, and a write would replace it with one; pass a file's path");
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
  if (why.empty() && std::rename(tmp.c_str(), target.c_str()) != 0) why = std::strerror(errno);
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

bool process_exited(long pid) {
  if (pid <= 0 || pid == ::getpid()) return false;
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM) return true;
  // Exited but not reaped (Linux: state Z in /proc/<pid>/stat): the killed ranks of an
  // mpirun job stay such zombies until whatever adopted them reaps them.
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(f, stat);
  const size_t close = stat.rfind(')');  // "pid (command) S ..."
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z';
}

std::vector<std::string> remove_exited_temporaries(const std::string& path) {
  const fs::path target(write_target(path));
  const std::string prefix = "." + target.filename().string() + ".tmp-";
  std::vector<std::string> removed;
  std::error_code ec;
  const fs::path dir = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0 || name.size() == prefix.size() ||
        name.find_first_not_of("0123456789", prefix.size()) != std::string::npos ||
        name.size() - prefix.size() > 9 || !e.is_regular_file(ec))
      continue;
    if (!process_exited(std::stol(name.substr(prefix.size())))) continue;
    if (fs::remove(e.path(), ec)) removed.push_back(e.path().string());
  }
  return removed;
}

void write_text_atomically(const std::string& path, const std::string& text,
                           const std::string& id) {
  write_file_atomically(
      path, [&](std::FILE* f) { return write_all(f, text.data(), text.size()); }, id);
}

}  // namespace zt
