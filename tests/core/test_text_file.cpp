// write_file_atomically: a reader sees the old contents or the new, and a failed write
// leaves the old file whole and nothing behind.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/test_util.h"
#include "core/text_file.h"

using namespace zt;
namespace fs = std::filesystem;

namespace {
std::string read_all(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}
}  // namespace

TEST(TextFile, ReplacesTheWholeFileAndLeavesNoTemporary) {
  const fs::path dir =
      fs::path(::testing::TempDir()) / ("zt_text_file_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string path = (dir / "notes.txt").string();
  write_text_atomically(path, "first version, longer than the second\n");
  write_text_atomically(path, "second\n", "rank1");
  EXPECT_EQ(read_all(path), "second\n");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1)
      << "only the file itself";

  // A folder that does not exist: an error naming the path, nothing written.
  const std::string missing = (dir / "no_such_folder" / "x.txt").string();
  EXPECT_TRUE(test::throws_with(
      [&] { write_text_atomically(missing, "x"); },
      "cannot write '" + missing + "': No such file or directory (check that its folder exists"));
  // The rename fails (a folder holds the name): the temporary is removed, the folder kept.
  fs::create_directories(dir / "taken" / "inside");
  EXPECT_TRUE(test::throws_with([&] { write_text_atomically((dir / "taken").string(), "x"); },
                                "cannot write '"));
  EXPECT_TRUE(fs::is_directory(dir / "taken" / "inside"));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 2)
      << "notes.txt and taken/, no temporaries";

  // A write that fails part way (a full disk: `fill` says so) or throws: the old file stays
  // whole and no temporary is left.
  EXPECT_TRUE(test::throws_with(
      [&] {
        write_file_atomically(path, [](std::FILE* f) {
          errno = ENOSPC;
          return write_all(f, "half", 4) && false;
        });
      },
      "cannot write '" + path + "': No space left on device"));
  EXPECT_THROW(write_file_atomically(path,
                                     [](std::FILE* f) -> bool {
                                       write_all(f, "half", 4);
                                       throw std::runtime_error("the caller's own error");
                                     }),
               std::runtime_error);
  EXPECT_EQ(read_all(path), "second\n");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 2);
  fs::remove_all(dir);
}

// A folder sync that fails is reported, not ignored: a save that could not make its renames
// durable must not count as done (a checkpoint save would then delete older checkpoints).
TEST(TextFile, AFolderThatCannotBeSyncedIsAnError) {
  const fs::path dir =
      fs::path(::testing::TempDir()) / ("zt_sync_folder_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  EXPECT_EQ(test::error_of([&] { sync_folder(dir.string()); }), "");
  const std::string missing = (dir / "gone").string();
  EXPECT_TRUE(test::throws_with(
      [&] { sync_folder(missing); },
      "cannot open folder '" + missing + "' to sync it: No such file or directory"));
  const std::string file = (dir / "a_file").string();
  write_text_atomically(file, "x");
  EXPECT_TRUE(test::throws_with([&] { sync_folder(file); },
                                "cannot open folder '" + file + "' to sync it: Not a directory"));
  fs::remove_all(dir);
}

// A write killed before its rename leaves ".<name>.tmp-<pid>": the next writer removes it
// once that process has exited, and nothing of a running process's or of another name.
TEST(TextFile, TemporariesOfExitedProcessesAreRemoved) {
  const fs::path dir =
      fs::path(::testing::TempDir()) / ("zt_text_file_tmp_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);  // exited and reaped: no such process now
  const std::string dead = std::to_string(child), live = std::to_string(getppid());
  for (const std::string& name :
       std::vector<std::string>{".x.npy.tmp-" + dead, ".x.npy.tmp-" + live, ".x.npy.tmp-ab",
                                ".y.npy.tmp-" + dead, ".x.npy.tmp"})
    std::ofstream(dir / name) << "partial";
  EXPECT_TRUE(process_exited(child));
  EXPECT_FALSE(process_exited(getppid()));
  EXPECT_FALSE(process_exited(getpid()));
  const auto removed = remove_exited_temporaries((dir / "x.npy").string());
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0], (dir / (".x.npy.tmp-" + dead)).string());
  for (const std::string& kept : std::vector<std::string>{".x.npy.tmp-" + live, ".x.npy.tmp-ab",
                                                          ".y.npy.tmp-" + dead, ".x.npy.tmp"})
    EXPECT_TRUE(fs::exists(dir / kept)) << kept;
  fs::remove_all(dir);
}

// The temporary of a write is ".<name>.tmp-<id>" beside the file (".<name>.tmp" without an
// id): concurrent writers of one path (ranks, each with its own id) fill their own, and a
// process killed mid-write leaves one that remove_exited_temporaries knows by its pid.
TEST(TextFile, AWritersTemporaryCarriesItsId) {
  const fs::path dir =
      fs::path(::testing::TempDir()) / ("zt_text_file_id_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string path = (dir / "latest").string();
  std::vector<std::string> seen;  // the folder's entries while `fill` writes
  auto fill = [&](std::FILE* f) {
    seen.clear();
    for (const auto& e : fs::directory_iterator(dir)) seen.push_back(e.path().filename());
    std::sort(seen.begin(), seen.end());
    return write_all(f, "x", 1);
  };
  write_file_atomically(path, fill, "1234");
  EXPECT_EQ(seen, std::vector<std::string>{".latest.tmp-1234"});
  write_file_atomically(path, fill);
  EXPECT_EQ(seen, (std::vector<std::string>{".latest.tmp", "latest"}));
  fs::remove_all(dir);
}

// Two writers of one path at once, neither giving an id (two commands writing the same
// output): each fills a temporary of its own, so the file ends as one writer's contents,
// whole, never a mix of both.
TEST(TextFile, ConcurrentWritersWithoutIdsLeaveOneWholeFile) {
  const fs::path dir =
      fs::path(::testing::TempDir()) / ("zt_text_file_race_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string path = (dir / "out.bin").string();
  const size_t kBytes = 1 << 20;
  for (int round = 0; round < 20; ++round) {
    std::vector<std::thread> writers;
    for (char c : {'a', 'b'})
      writers.emplace_back([&, c] {
        const std::string chunk(4096, c);
        try {
          write_file_atomically(path, [&](std::FILE* f) {
            for (size_t done = 0; done < kBytes; done += chunk.size())
              if (!write_all(f, chunk.data(), chunk.size()) || std::fflush(f) != 0) return false;
            return true;
          });
        } catch (const Error&) {  // a writer may fail; the file must still be whole
        }
      });
    for (auto& w : writers) w.join();
    const std::string got = read_all(path);
    ASSERT_EQ(got.size(), kBytes) << "round " << round;
    ASSERT_TRUE(got == std::string(kBytes, 'a') || got == std::string(kBytes, 'b'))
        << "round " << round << ": a mix of both writers";
  }
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1)
      << "only the file itself, no temporaries";
  fs::remove_all(dir);
}
