// A checkpoint's files damaged every way a deterministic sweep lists: each file (meta.json,
// replicated.safetensors, a rank file) cut short at many lengths and with single bytes
// changed at many offsets. Each damaged checkpoint must be refused by verify_checkpoint
// with an error naming the damaged file, passed over by a resume for the complete one
// before it, and refused by load_checkpoint without a change to the engine. Run under the
// sanitizers this also shows the safetensors and meta.json readers never read outside
// the file.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/fifo_reader.h"
#include "common/test_util.h"
#include "zero/checkpoint_util.h"

using namespace zt;
namespace fs = std::filesystem;

namespace {

using Bytes = std::vector<char>;

Bytes read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), {});
}

void write_bytes(const fs::path& p, const Bytes& b, size_t n) {
  std::ofstream(p, std::ios::binary | std::ios::trunc)
      .write(b.data(), static_cast<std::streamsize>(n));
}

// The damaged copies of one file of `size` bytes: cut to a length (`flip` 0), or with byte
// `at` xor-ed with `flip`.
struct Damage {
  size_t at;
  char flip;
};
std::vector<Damage> damages(size_t size) {
  std::vector<Damage> out;
  const size_t stride = size / 97 + 1;
  for (size_t n = 0; n < size; n += n < 24 ? 1 : stride) out.push_back({n, 0});
  for (size_t i = 0; i < size; i += i < 24 ? 1 : stride)
    for (const char flip : {'\x01', '\x80', '\xff'}) out.push_back({i, flip});
  return out;
}

}  // namespace

TEST(CheckpointFuzz, EveryDamagedFileIsRefusedByNameAndPassedOver) {
  lesson::TempDir tmp;
  const fs::path root = tmp / "ckpt", good = root / "step_000001", bad = root / "step_000002";
  comm::run_threads(1, [&](comm::Communicator& comm) {
    auto e = lesson::make_engine(comm, lesson::make_net, 5);
    lesson::train_step(*e, 0);
    zero::save_checkpoint(*e, root.string(), "step_000001");
    lesson::train_step(*e, 1);
    zero::save_checkpoint(*e, root.string(), "step_000002");
  });
  const fs::path saved = tmp / "step_000002.saved";
  fs::copy(bad, saved, fs::copy_options::recursive);

  comm::run_threads(1, [&](comm::Communicator& comm) {
    auto e = lesson::make_engine(comm, lesson::make_net, 7);
    const lesson::Named before = lesson::full_state(*e);
    int loads = 0;
    for (const char* name : {"meta.json", "replicated.safetensors", "rank_00000.safetensors"}) {
      const Bytes whole = read_bytes(saved / name);
      for (const Damage& d : damages(whole.size())) {
        SCOPED_TRACE(std::string(name) + (d.flip ? " byte " : " cut to ") + std::to_string(d.at) +
                     (d.flip ? " ^ " + std::to_string(static_cast<uint8_t>(d.flip)) : ""));
        Bytes b = whole;
        if (d.flip) b[d.at] = static_cast<char>(b[d.at] ^ d.flip);
        write_bytes(bad / name, b, d.flip ? b.size() : d.at);
        EXPECT_TRUE(test::throws_with([&] { zero::verify_checkpoint(bad.string()); }, name));
        const zero::ResumePoint rp = zero::find_resume_point(root.string());
        EXPECT_EQ(rp.step, 1);
        EXPECT_NE(rp.note.find("step_000002"), std::string::npos) << rp.note;
        if (++loads % 16 == 0) {  // a load reads what verify does: a sample of them
          EXPECT_THROW(zero::load_checkpoint(*e, bad.string()), Error);
          lesson::expect_same(lesson::full_state(*e), before, 0.0, 0.0);
        }
      }
      write_bytes(bad / name, whole, whole.size());
    }
    zero::verify_checkpoint(bad.string());  // whole again
    zero::load_checkpoint(*e, bad.string());
    EXPECT_EQ(e->global_step(), 2);
  });
}

// A folder where a checkpoint's file should be, and a file where its folder should be.
TEST(CheckpointFuzz, AFolderInPlaceOfAFileIsRefusedByName) {
  lesson::TempDir tmp;
  const fs::path root = tmp / "ckpt", dir = root / "step_000001";
  comm::run_threads(1, [&](comm::Communicator& comm) {
    auto e = lesson::make_engine(comm, lesson::make_net, 5);
    lesson::train_step(*e, 0);
    zero::save_checkpoint(*e, root.string(), "step_000001");
  });
  for (const char* name : {"meta.json", "replicated.safetensors", "rank_00000.safetensors"}) {
    const fs::path moved = tmp / name;
    fs::rename(dir / name, moved);
    fs::create_directory(dir / name);
    EXPECT_TRUE(
        test::throws_with([&] { zero::verify_checkpoint(dir.string()); }, (dir / name).string()))
        << name;
    comm::run_threads(1, [&](comm::Communicator& comm) {
      auto e = lesson::make_engine(comm, lesson::make_net, 7);
      EXPECT_TRUE(test::throws_with([&] { zero::load_checkpoint(*e, root.string()); }, name))
          << name;
    });
    fs::remove(dir / name);
    fs::rename(moved, dir / name);
  }
  zero::verify_checkpoint(dir.string());
}

// A FIFO (a named pipe) in place of `latest` or of a meta.json is no file to read: opened
// with nothing writing to it, the open would wait forever. A resume takes the newest
// complete checkpoint, saying what `latest` is; a meta.json that is a FIFO is named.
TEST(CheckpointFuzz, AFifoInPlaceOfLatestOrMetaJsonIsNotWaitedOn) {
  lesson::TempDir tmp;
  const fs::path root = tmp / "ckpt";
  comm::run_threads(1, [&](comm::Communicator& comm) {
    auto e = lesson::make_engine(comm, lesson::make_net, 5);
    for (int step = 1; step <= 2; ++step) {
      lesson::train_step(*e, step);
      zero::save_checkpoint(*e, root.string(), zero::checkpoint_tag(step));
    }
  });
  const fs::path latest = root / "latest", meta = root / "step_000002/meta.json";
  fs::remove(latest);
  ASSERT_EQ(::mkfifo(latest.c_str(), 0600), 0);
  zero::ResumePoint rp;
  EXPECT_EQ(test::error_of_fifo_reader(latest.string(),
                                       [&] { rp = zero::find_resume_point(root.string()); }),
            "");
  EXPECT_EQ(rp.step, 2);
  EXPECT_NE(rp.note.find("'" + latest.string() + "' is a FIFO"), std::string::npos) << rp.note;
  std::string found;
  EXPECT_EQ(test::error_of_fifo_reader(latest.string(),
                                       [&] { found = zero::find_checkpoint(root.string()); }),
            "");
  EXPECT_EQ(found, (root / "step_000002").string());

  fs::remove(latest);
  std::ofstream(latest) << "step_000002\n";
  const fs::path saved = tmp / "meta.json";
  fs::rename(meta, saved);
  ASSERT_EQ(::mkfifo(meta.c_str(), 0600), 0);
  const std::string named = "'" + meta.string() + "' is a FIFO, not the file";
  EXPECT_NE(test::error_of_fifo_reader(
                meta.string(), [&] { zero::verify_checkpoint(meta.parent_path().string()); })
                .find(named),
            std::string::npos);
  EXPECT_EQ(test::error_of_fifo_reader(meta.string(),
                                       [&] { rp = zero::find_resume_point(root.string()); }),
            "");
  EXPECT_EQ(rp.step, 1);
  EXPECT_NE(rp.note.find(named), std::string::npos) << rp.note;
}
