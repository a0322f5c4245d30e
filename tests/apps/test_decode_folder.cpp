// vqtok decode's output folder (apps/vqtok/decode_folder.h) and encode's output file. What
// these tests pin down:
//  1. decode never removes or replaces a file it did not write: a folder holding files
//     named as its outputs (a dataset's image_000000.png) that no manifest lists is
//     refused before anything is written, naming one;
//  2. a second decode into a folder replaces the first's files (fewer clips, or images
//     where clips were) and touches nothing else; a decode cut short leaves a manifest
//     that lists what it was writing, so the next one goes ahead;
//  3. a manifest lists only names decode writes: it cannot make decode remove others, nor
//     write into a FIFO or device under one of its names;
//  4. encode -o naming a folder is refused before anything is encoded;
//  5. a decode writes into a staging folder of its own and moves the files into place at
//     the end, through links;
//  6. ids saved as int32 (as uint8 ids load) decode as the same ids saved as int64.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "apps/app_test_util.h"
#include "apps/vqtok/decode_folder.h"
#include "apps/vqtok/vqtok_app.h"
#include "common/test_util.h"
#include "data/npy.h"

using namespace zt;
namespace fs = std::filesystem;

namespace {

using test::error_of;

std::string fresh_dir(const std::string& name) {
  return apptest::fresh_dir("zt_decode", name);
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The tiny model's weights (seed 5) and token ids for it: clips (n, 1, 2, 2) or images
// (n, 2, 2), in a scratch folder.
struct Scratch {
  std::string dir;
  config::AppConfig cfg;
  std::string weights;

  explicit Scratch(const std::string& name)
      : dir(fresh_dir(name)), cfg(apptest::tiny_vqtok_config(dir + "/run")) {
    fs::create_directories(dir);
    weights = dir + "/tok.safetensors";
    apptest::save_fresh_tokenizer(cfg, weights);
  }
  ~Scratch() { fs::remove_all(dir); }

  std::string codes(const std::string& name, const Shape& shape) const {
    const std::string path = dir + "/" + name;
    Tensor ids = zeros(shape, DType::i64);
    int64_t* d = ids.data<int64_t>();
    for (int64_t i = 0; i < ids.numel(); ++i) d[i] = (7 * i) % cfg.model.codebook_size;
    data::save_npy(path, ids);
    return path;
  }

  // The frames (rank 0's) of decoding `codes_path` into `out` ("": none written).
  Tensor decode(const std::string& codes_path, const std::string& out) const {
    vqtok::DecodeOptions o;
    o.weights = weights;
    o.codes = codes_path;
    o.out_dir = out;
    o.quiet = true;
    Tensor frames;
    comm::run_threads(2, [&](comm::Communicator& comm) {
      const Tensor f = vqtok::decode(cfg, o, comm);
      if (comm.rank() == 0) frames = f;
    });
    return frames;
  }
};

}  // namespace

TEST(DecodeFolder, AFolderOfTheUsersImagesIsRefusedBeforeAnythingIsWritten) {
  const Scratch s("dataset");
  const std::string out = s.dir + "/photos";
  fs::create_directories(out);
  for (const char* name : {"image_000000.png", "image_000001.png", "notes.txt"})
    std::ofstream(out + "/" + name) << "the user's";
  const std::string err = error_of([&] { s.decode(s.codes("ids.npy", {3, 2, 2}), out); });
  EXPECT_TRUE(has(err, "decode: -o '" + out + "' holds 'image_000000.png' and 1 more file named"))
      << err;
  EXPECT_TRUE(has(err, "Choose an empty folder for -o")) << err;
  for (const char* name : {"image_000000.png", "image_000001.png", "notes.txt"})
    EXPECT_EQ(read(out + "/" + name), "the user's") << name;
  EXPECT_FALSE(fs::exists(out + "/image_000002.png"));
  EXPECT_FALSE(fs::exists(out + "/grid.png"));
  EXPECT_FALSE(fs::exists(out + "/" + vqtok::kDecodeManifest));

  // grid.png is decode's too; clip frames the same.
  fs::remove(out + "/image_000000.png");
  fs::remove(out + "/image_000001.png");
  std::ofstream(out + "/grid.png") << "the user's";
  EXPECT_TRUE(has(error_of([&] {
                    s.decode(s.codes("ids.npy", {3, 2, 2}), out);
                  }),
                  "holds 'grid.png' named as decode names its output"));
  EXPECT_EQ(read(out + "/grid.png"), "the user's");
  const std::string file = s.dir + "/a_file";
  std::ofstream(file) << "x";
  EXPECT_TRUE(has(error_of([&] {
                    s.decode(s.codes("ids.npy", {3, 2, 2}), file);
                  }),
                  "is a file; pass a folder"));
}

TEST(DecodeFolder, ASecondDecodeReplacesTheFirstAndNothingElse) {
  const Scratch s("again");
  const std::string out = s.dir + "/frames";
  fs::create_directories(out);
  const std::vector<std::string> kept = {"notes.txt", "clip_000009_frame_00.png.bak",
                                         "clip_xyz_frame_00.png", "image_00001.png"};
  for (const std::string& name : kept) std::ofstream(out + "/" + name) << "mine";
  s.decode(s.codes("clips.npy", {3, 1, 2, 2}), out);  // 3 clips of 4 frames
  EXPECT_TRUE(fs::exists(out + "/clip_000002_frame_03.png"));
  EXPECT_TRUE(fs::exists(out + "/" + vqtok::kDecodeManifest));

  s.decode(s.codes("fewer.npy", {2, 1, 2, 2}), out);  // fewer clips: clip 2 goes
  EXPECT_TRUE(fs::exists(out + "/clip_000001_frame_03.png"));
  EXPECT_FALSE(fs::exists(out + "/clip_000002_frame_00.png"));

  s.decode(s.codes("images.npy", {2, 2, 2}), out);  // images where clips were
  EXPECT_TRUE(fs::exists(out + "/image_000001.png"));
  EXPECT_FALSE(fs::exists(out + "/clip_000000_frame_00.png"));
  EXPECT_TRUE(fs::exists(out + "/grid.png"));
  for (const std::string& name : kept) EXPECT_EQ(read(out + "/" + name), "mine") << name;

  // A file of the user's so named, added since: the next decode stops, changing nothing.
  std::ofstream(out + "/image_000007.png") << "mine";
  EXPECT_TRUE(has(error_of([&] {
                    s.decode(s.codes("images.npy", {2, 2, 2}), out);
                  }),
                  "holds 'image_000007.png' named as decode names its output"));
  EXPECT_TRUE(fs::exists(out + "/image_000001.png"));
}

TEST(DecodeFolder, ADecodeCutShortLeavesAManifestTheNextOneReads) {
  const std::string dir = fresh_dir("cut");
  {
    vqtok::DecodeFolder first(dir);
    first.begin({"image_000000.png", "image_000001.png", "grid.png"});
    std::ofstream(dir + "/image_000000.png") << "written before the cut";
  }                                 // no finish(): the process ended
  vqtok::DecodeFolder second(dir);  // no error: the manifest lists it
  second.begin({"grid.png"});
  std::ofstream(second.staged("grid.png")) << "written";
  EXPECT_EQ(second.finish(), 1);  // image_000000.png, the only one there
  EXPECT_FALSE(fs::exists(dir + "/image_000000.png"));
  fs::remove_all(dir);
}

// A decode writes its files into a staging folder of its own and moves them into place at
// the end: a file there that is a link is written through (the link stays), and the staging
// folder of a decode whose process has exited is removed by the next decode.
TEST(DecodeFolder, StagedFilesGoThroughLinksAndAKilledDecodesStagingGoes) {
  const std::string dir = fresh_dir("staging");
  fs::create_directories(dir + "/frames");
  fs::create_directories(dir + "/elsewhere");
  std::ofstream(dir + "/elsewhere/grid.png") << "old";
  fs::create_symlink("../elsewhere/grid.png", dir + "/frames/grid.png");
  std::ofstream(dir + "/frames/" + vqtok::kDecodeManifest) << R"({"files": ["grid.png"]})";
  const pid_t child = ::fork();  // a process that has exited: its staging folder is stale
  if (child == 0) ::_exit(0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  const std::string stale = dir + "/frames/.zt_decode.tmp-" + std::to_string(child);
  fs::create_directories(stale);
  std::ofstream(stale + "/image_000000.png") << "left by a killed decode";

  vqtok::DecodeFolder folder(dir + "/frames");
  folder.begin({"grid.png"});
  EXPECT_FALSE(fs::exists(stale));
  std::ofstream(folder.staged("grid.png")) << "new";
  EXPECT_EQ(read(dir + "/elsewhere/grid.png"), "old") << "replaced before the decode finished";
  EXPECT_EQ(folder.finish(), 0);
  EXPECT_TRUE(fs::is_symlink(dir + "/frames/grid.png"));
  EXPECT_EQ(read(dir + "/elsewhere/grid.png"), "new");
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir + "/frames"))
    names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{vqtok::kDecodeManifest, "grid.png"}));
  fs::remove_all(dir);
}

// finish() checks that every file can go where it goes before it moves any: a link into a
// folder that does not exist fails the decode with the earlier files all in place.
TEST(DecodeFolder, ALinkIntoAMissingFolderFailsBeforeAnyFileMoves) {
  const std::string dir = fresh_dir("dangling");
  fs::create_directories(dir);
  std::ofstream(dir + "/grid.png") << "old";
  fs::create_symlink("missing/image_000000.png", dir + "/image_000000.png");
  std::ofstream(dir + "/" + vqtok::kDecodeManifest)
      << R"({"files": ["grid.png", "image_000000.png"]})";
  vqtok::DecodeFolder folder(dir);
  folder.begin({"grid.png", "image_000000.png"});
  for (const char* name : {"grid.png", "image_000000.png"})
    std::ofstream(folder.staged(name)) << "new";
  EXPECT_TRUE(has(error_of([&] { folder.finish(); }), "whose folder does not exist"));
  EXPECT_EQ(read(dir + "/grid.png"), "old");
  fs::remove_all(dir);
}

TEST(DecodeFolder, AManifestCannotMakeDecodeRemoveOtherFiles) {
  const std::string dir = fresh_dir("manifest");
  fs::create_directories(dir + "/sub");
  for (const char* name : {"notes.txt", "sub/image_000000.png"}) std::ofstream(dir + "/" + name);
  std::ofstream(dir + "/" + vqtok::kDecodeManifest)
      << R"({"files": ["notes.txt", "sub/image_000000.png", "../image_000000.png"]})";
  vqtok::DecodeFolder folder(dir);
  folder.begin({"grid.png"});
  std::ofstream(folder.staged("grid.png")) << "written";
  EXPECT_EQ(folder.finish(), 0);
  EXPECT_TRUE(fs::exists(dir + "/notes.txt"));
  EXPECT_TRUE(fs::exists(dir + "/sub/image_000000.png"));
  std::ofstream(dir + "/" + vqtok::kDecodeManifest) << "not json";
  EXPECT_TRUE(has(error_of([&] { vqtok::DecodeFolder{dir}; }), "is malformed"));
  fs::remove_all(dir);

  // Nor let decode write into what is not a regular file under one of its names.
  fs::create_directories(dir);
  ASSERT_EQ(::mkfifo((dir + "/grid.png").c_str(), 0600), 0);
  std::ofstream(dir + "/" + vqtok::kDecodeManifest) << R"({"files": ["grid.png"]})";
  EXPECT_TRUE(has(error_of([&] { vqtok::DecodeFolder{dir}; }), "holds 'grid.png', a FIFO"));
  EXPECT_TRUE(fs::is_fifo(dir + "/grid.png"));
  fs::remove_all(dir);

  EXPECT_TRUE(vqtok::is_decode_output_name("image_000000.png"));
  EXPECT_TRUE(vqtok::is_decode_output_name("clip_1234567_frame_00.png"));
  EXPECT_TRUE(vqtok::is_decode_output_name("grid.png"));
  EXPECT_FALSE(vqtok::is_decode_output_name("image_00000.png"));
  EXPECT_FALSE(vqtok::is_decode_output_name("clip_000000_frame_0.png"));
  EXPECT_FALSE(vqtok::is_decode_output_name("image_000000.png.bak"));
}

// The check comes first: here no weights exist, and the error is still about -o.
TEST(DecodeFolder, EncodeRefusesAFolderAsItsOutputFileAtOnce) {
  const std::string dir = fresh_dir("encode");
  fs::create_directories(dir + "/codes");
  vqtok::EncodeOptions o;
  o.weights = dir + "/missing.safetensors";
  o.out = dir + "/codes";
  o.quiet = true;
  const config::AppConfig cfg = apptest::tiny_vqtok_config(dir + "/run");
  const std::string err = error_of([&] { apptest::encode_on_one_rank(cfg, o); });
  EXPECT_TRUE(has(err, "encode -o '" + o.out + "' is a folder; pass the file to write")) << err;
  fs::remove_all(dir);
}

// A decode into a folder goes a round (ranks x batch clips) at a time: every clip's files
// are written, each rank returns only the grid's first 8 clips, and they are the frames a
// decode kept in memory gives.
TEST(DecodeFolder, ADecodeIntoAFolderKeepsOnlyTheGridsClips) {
  const Scratch s("rounds");
  const std::string ids = s.codes("ids.npy", {11, 1, 2, 2});
  vqtok::DecodeOptions o;
  o.weights = s.weights;
  o.codes = ids;
  o.batch = 2;
  o.quiet = true;
  std::vector<Tensor> kept(2), whole(2);
  comm::run_threads(2, [&](comm::Communicator& comm) {
    whole[comm.rank()] = vqtok::decode(s.cfg, o, comm);
    vqtok::DecodeOptions to_folder = o;
    to_folder.out_dir = s.dir + "/out";
    kept[comm.rank()] = vqtok::decode(s.cfg, to_folder, comm);
  });
  ASSERT_EQ(whole[0].size(0), 11);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(kept[r].size(0), 8) << "rank " << r;
    EXPECT_EQ(kept[r].to_vector(), whole[0].narrow(0, 0, 8).to_vector()) << "rank " << r;
    EXPECT_EQ(whole[r].to_vector(), whole[0].to_vector()) << "rank " << r;
  }
  for (int64_t t = 0; t < whole[0].size(1); ++t)
    EXPECT_TRUE(fs::exists(s.dir + "/out/clip_000010_frame_0" + std::to_string(t) + ".png"));
  EXPECT_TRUE(fs::exists(s.dir + "/out/grid.png"));
}

TEST(DecodeFolder, Int32IdsDecodeAsTheSameInt64Ids) {
  const Scratch s("int32");
  const std::string wide = s.codes("ids.npy", {3, 2, 2});
  const Tensor ids = data::load_npy(wide);
  data::save_npy(s.dir + "/ids32.npy", ids.to(DType::i32));
  ASSERT_EQ(data::load_npy(s.dir + "/ids32.npy").dtype(), DType::i32);
  const Tensor expected = s.decode(wide, "");
  const Tensor got = s.decode(s.dir + "/ids32.npy", "");
  ASSERT_EQ(got.sizes(), expected.sizes());
  EXPECT_EQ(got.to_vector(), expected.to_vector());
}

// One image decoded is counted as one: "wrote 1 image".
TEST(DecodeFolder, OneImageIsCountedInTheSingular) {
  const Scratch s("one");
  vqtok::DecodeOptions o;
  o.weights = s.weights;
  o.codes = s.codes("ids.npy", {1, 2, 2});
  o.out_dir = s.dir + "/out";
  ::testing::internal::CaptureStdout();
  comm::run_threads(1, [&](comm::Communicator& comm) { vqtok::decode(s.cfg, o, comm); });
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_TRUE(has(out, "decode: wrote 1 image to " + o.out_dir)) << out;
}
