// write_file_atomically: a temporary file, synced, then a rename and a synced folder.
#include "core/text_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
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

namespace {

// Opens `tmp` for writing, empty, and locked (flock) against other writers: a temporary
// left by a writer that was killed is taken over (its lock went with it); one another
// writer holds is left to it (null, `busy` set). The lock is checked to be on the file
// `tmp` still names: a writer that opened it just as its owner renamed it into place must
// not empty the renamed file. Null with errno set when it cannot be opened.
std::FILE* open_temporary(const fs::path& tmp, bool* busy) {
  *busy = false;
  for (;;) {
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) return nullptr;
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
      ::close(fd);
      *busy = true;
      return nullptr;
    }  // any other failure: a file system without locks, written as before
    struct stat held = {};
    struct stat named = {};
    if (::fstat(fd, &held) == 0 && ::stat(tmp.c_str(), &named) == 0 &&
        held.st_dev == named.st_dev && held.st_ino == named.st_ino) {
      std::FILE* f = ::ftruncate(fd, 0) == 0 ? ::fdopen(fd, "wb") : nullptr;
      if (f == nullptr) {
        const int err = errno;
        ::close(fd);
        errno = err;
      }
      return f;
    }
    ::close(fd);  // renamed or removed since it was opened: open the name again
  }
}

}  // namespace

void write_file_atomically(const std::string& path, const std::function<bool(std::FILE*)>& fill,
                           const std::string& id) {
  // A link's file is written (the link stays); anything but a regular file is left as it is.
  const fs::path target(write_target(path));
  const std::string kind = not_a_regular_file(target);
  ZT_CHECK(kind.empty(), "cannot write '", path, "': it is ", kind,
           ", not a regular file, and a write would replace it with one; pass a file's path");
  const std::string base = "." + target.filename().string() + ".tmp";
  fs::path tmp = target.parent_path() / (base + (id.empty() ? "" : "-") + id);
  std::string why;  // empty: written
  bool busy = false;
  std::FILE* f = open_temporary(tmp, &busy);
  // Another writer of the path fills that temporary now: this one takes its process's own
  // (then one of its own beside that, for a third writer in one process).
  for (int k = 0; f == nullptr && busy && k < 64; ++k) {
    tmp = target.parent_path() /
          (base + "-" + std::to_string(::getpid()) + (k == 0 ? "" : "." + std::to_string(k)));
    f = open_temporary(tmp, &busy);
  }
  const int open_error = errno;
  ZT_CHECK(f != nullptr || !busy, "cannot write '", path,
           "': too many writers of it at once (each holds a temporary beside it)");
  ZT_CHECK(f != nullptr, "cannot write '", path, "': ", std::strerror(open_error),
           " (check that its folder exists, is writable and not full)");
  // The temporary is renamed, or removed, while this writer holds its lock: no other
  // writer of the path can take it over in between.
  bool ok = false;
  errno = 0;  // a `fill` that returns false without a cause: "a write failed"
  try {
    ok = fill(f) && std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
  } catch (...) {
    std::remove(tmp.c_str());
    std::fclose(f);
    throw;
  }
  if (!ok) why = errno != 0 ? std::strerror(errno) : "a write failed";
  if (ok && std::rename(tmp.c_str(), target.c_str()) != 0) why = std::strerror(errno);
  if (!why.empty()) std::remove(tmp.c_str());
  std::fclose(f);  // after fsync it has nothing left to write: its result changes nothing
  if (why.empty()) {
    try {
      sync_folder(target.parent_path().string());
    } catch (const Error& e) {
      ZT_FAIL("wrote '", path, "', but ", e.what());
    }
    return;
  }
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
