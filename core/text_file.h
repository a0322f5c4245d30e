// Writing a whole file so that readers never see half of it, and a finished write survives
// a crash of the machine.
#pragma once

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace zt {

/// The file a write of `path` replaces: `path` itself or, where `path` is a symbolic link,
/// the file its links lead to (which need not exist yet). An error names a loop of links.
std::string write_target(const std::string& path);

/// What `path` (its links followed) is when it exists and is not a regular file: "a folder",
/// "a FIFO", "a character device", "a block device", "a socket" or "not a regular file";
/// "" for a regular file or for nothing there.
std::string not_a_regular_file(const std::string& path);

/// Writes `path` through a temporary file beside it (".<name>.tmp", or ".<name>.tmp-<id>"):
/// `fill` writes the contents to the open file and returns false when a write failed; then
/// the file is flushed and synced to disk, renamed over `path`, and the folder synced so the
/// rename lasts too (a failed folder sync is an error too: the new contents are in place but
/// may not survive a power loss). A reader sees the old contents or the new ones, never a part,
/// even after a power loss. A failure (a full disk, a missing folder, `fill` returning false or
/// throwing) leaves `path` as it was and no temporary behind, and raises an error naming
/// `path` and the cause. `id` keeps the temporaries of concurrent writers of one path apart
/// (a rank, a unique token); the temporary is locked while it is filled, so a writer that
/// finds it held by another (two commands writing one output at once) fills
/// ".<name>.tmp-<pid>" instead, and the file ends as one writer's contents, never a mix,
/// while one left by a killed writer is reused. A symbolic link is followed (write_target: the
/// temporary goes beside the file it leads to, which is replaced, and the link stays); a `path`
/// that is not a regular file (a device, a FIFO, a socket, a folder) is an error before anything is
/// written, never replaced.
void write_file_atomically(const std::string& path, const std::function<bool(std::FILE*)>& fill,
                           const std::string& id = "");

/// write_file_atomically with `text` as the contents.
void write_text_atomically(const std::string& path, const std::string& text,
                           const std::string& id = "");

/// Writes `bytes` bytes from `data` to `f`; false when the write failed. For `fill`s.
bool write_all(std::FILE* f, const void* data, size_t bytes);

/// Whether process `pid` of this machine has exited (gone, or a zombie not yet reaped);
/// false for this process and for one that runs (or that this one may not signal).
bool process_exited(long pid);

/// Removes the temporaries write_file_atomically left beside `path` (its write_target) under
/// a process id (".<name>.tmp-<pid>") whose process has exited: a write killed before its
/// rename. Returns the paths removed.
std::vector<std::string> remove_exited_temporaries(const std::string& path);

/// Syncs a folder's entries to disk (after files were renamed or removed in it). A folder that
/// cannot be opened or synced is an error naming it and the cause; a file system that cannot
/// sync folders at all (EINVAL, ENOTSUP) has nothing to make durable this way, and passes.
void sync_folder(const std::string& dir);

}  // namespace zt
