// An output write that fails midway leaves what was there before: every file a command
// replaces is written through a temporary and renamed into place (write_file_atomically),
// so a failed write leaves the old file and no temporary. The failure is injected with a
// limit on the size of the files this process writes (RLIMIT_FSIZE): the write that passes
// it fails with EFBIG, as on a full disk.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "apps/app_test_util.h"
#include "apps/vqgpt_test_util.h"
#include "apps/vqtok/vqtok_app.h"
#include "common/test_util.h"
#include "core/ops.h"
#include "data/image.h"
#include "data/npy.h"

using namespace zt;
namespace fs = std::filesystem;

namespace {

// While alive, a file this process writes cannot grow past `bytes` (the write past it
// fails with EFBIG instead of raising SIGXFSZ).
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &old_);
    old_handler_ = signal(SIGXFSZ, SIG_IGN);
    rlimit l = old_;
    l.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &l);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &old_);
    signal(SIGXFSZ, old_handler_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  rlimit old_{};
  sighandler_t old_handler_{};
};

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The names in `dir` that start with '.' and hold ".tmp": temporaries left behind.
std::vector<std::string> temporaries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name[0] == '.' && name.find(".tmp") != std::string::npos) out.push_back(name);
  }
  return out;
}

}  // namespace

// An encode of a folder writes the codes and, beside them, which file each row is. A later
// encode into the same file that fails leaves both as they were: the codes and the list
// that describes them (the list went before the codes were complete, so a full disk at
// the codes' last flush left the earlier codes without their list).
TEST(OutputFailures, AFailedEncodeKeepsTheEarlierCodesAndTheirFileList) {
  const std::string dir = apptest::fresh_dir("zt_output_failures", "encode");
  fs::create_directories(dir + "/imgs");
  const config::AppConfig cfg = apptest::tiny_vqtok_config(dir);
  vqtok::EncodeOptions o;
  o.weights = dir + "/tok.safetensors";
  apptest::save_fresh_tokenizer(cfg, o.weights);
  for (const char* name : {"a.png", "b.png", "c.png"})
    data::save_png(dir + "/imgs/" + name,
                   data::Image{16, 16, std::vector<uint8_t>(16 * 16 * 3, 90)});
  o.input = dir + "/imgs";
  o.out = dir + "/codes.npy";
  o.quiet = true;
  apptest::encode_on_one_rank(cfg, o);
  const std::string codes = read_all(o.out), list = read_all(o.out + ".files.txt");
  ASSERT_FALSE(list.empty());
  // The codes (a 128-byte header and 3 x 2 x 2 ids) fit the write buffer: the write that
  // fails is the last flush, after every round was written.
  {
    FileSizeLimit limit(100);
    EXPECT_THROW(apptest::encode_on_one_rank(cfg, o), Error);
  }
  EXPECT_EQ(read_all(o.out), codes);
  EXPECT_TRUE(fs::exists(o.out + ".files.txt")) << "the earlier codes lost their file list";
  EXPECT_EQ(read_all(o.out + ".files.txt"), list);
  EXPECT_EQ(temporaries(dir), std::vector<std::string>{});
  fs::remove_all(dir);
}

// A decode writes many files into its folder. One that fails before it is done (here at
// grid.png, the last and largest) leaves the earlier decode's files as they were, not a
// mix of the new frames and the old grid that would look like a whole decode.
TEST(OutputFailures, AFailedDecodeLeavesTheEarlierDecodesFiles) {
  const std::string dir = apptest::fresh_dir("zt_output_failures", "decode");
  fs::create_directories(dir);
  const config::AppConfig cfg = apptest::tiny_vqtok_config(dir + "/run");
  vqtok::DecodeOptions o;
  o.weights = dir + "/tok.safetensors";
  apptest::save_fresh_tokenizer(cfg, o.weights);
  o.quiet = true;
  auto decode = [&](int64_t step, const std::string& out) {
    Tensor ids = zeros({3, 2, 2}, DType::i64);
    int64_t* d = ids.data<int64_t>();
    for (int64_t i = 0; i < ids.numel(); ++i) d[i] = (step * i + 1) % cfg.model.codebook_size;
    o.codes = dir + "/ids.npy";
    data::save_npy(o.codes, ids);
    o.out_dir = out;
    comm::run_threads(1, [&](comm::Communicator& comm) { vqtok::decode(cfg, o, comm); });
  };
  auto contents = [&](const std::string& folder) {
    std::map<std::string, std::string> files;
    for (const auto& e : fs::directory_iterator(folder))
      files[e.path().filename().string()] = read_all(e.path().string());
    return files;
  };
  decode(7, dir + "/new");  // the sizes of the second decode's files
  uintmax_t largest_frame = 0;
  for (const auto& e : fs::directory_iterator(dir + "/new"))
    if (e.path().filename().string().rfind("image_", 0) == 0)
      largest_frame = std::max(largest_frame, fs::file_size(e.path()));
  ASSERT_LT(largest_frame, fs::file_size(dir + "/new/grid.png"));

  const std::string out = dir + "/frames";
  decode(3, out);
  const auto before = contents(out);
  ASSERT_EQ(before.size(), 5u);  // 3 images, grid.png, the manifest
  {
    FileSizeLimit limit(largest_frame);  // every frame fits; grid.png does not
    EXPECT_THROW(decode(7, out), Error);
  }
  const auto after = contents(out);
  EXPECT_EQ(after.size(), before.size());
  for (const auto& [name, bytes] : before) {
    ASSERT_TRUE(after.count(name)) << name;
    EXPECT_TRUE(after.at(name) == bytes) << name << " was changed by the decode that failed";
  }
  fs::remove_all(dir);
}

// A transformers export writes the weights, then config.json beside them. When config.json
// cannot be written (here its temporary's name is taken by a folder), an earlier export's
// config.json of another model is not left beside the new weights, where it would pass for
// theirs.
TEST(OutputFailures, AFailedTransformersConfigLeavesNoOtherModelsConfigBesideTheWeights) {
  const std::string dir = apptest::fresh_dir("zt_output_failures", "hf_export");
  const config::AppConfig cfg = apptest::tiny_vqtok_config(dir + "/run", {"train.steps=1"});
  apptest::train_vqtok(cfg, false, 1);
  const std::string out = dir + "/hf/model.safetensors";
  fs::create_directories(dir + "/hf/.config.json.tmp");
  const std::string earlier = R"({"model_type": "emu3_vqgan", "codebook_size": 99})";
  std::ofstream(dir + "/hf/config.json") << earlier;
  std::string err;
  comm::run_threads(1, [&](comm::Communicator& comm) {
    try {
      vqtok::export_model(cfg, "", out, comm, true, vq::KeyNaming::transformers);
    } catch (const Error& e) {
      err = e.what();
    }
  });
  EXPECT_NE(err.find("config.json"), std::string::npos) << err;
  EXPECT_TRUE(fs::exists(out));
  EXPECT_FALSE(fs::exists(dir + "/hf/config.json") && read_all(dir + "/hf/config.json") == earlier)
      << "the earlier model's config.json beside the new weights";
  EXPECT_NE(err.find("export again"), std::string::npos) << err;
  fs::remove_all(dir);
}

// vqgpt sample writes the sampled codes (--tokens) and the grid of their images (--out). A
// later sample into the same files whose grid cannot be written (here the file size limit
// passes the codes but not the grid) leaves both as they were: not the new codes beside
// the earlier grid, which would pass for their images.
TEST(OutputFailures, AFailedSampleGridKeepsTheEarlierCodesBesideIt) {
  vqgpt_test::Scratch s("failed_grid");
  config::AppConfig cfg = vqgpt_test::tiny_config(s / "run");
  const std::string weights = s / "tokenizer.safetensors";
  nn::save_safetensors(weights, vqgpt_test::pretrained_tokenizer(cfg));
  cfg.train.steps = 1;
  cfg.train.checkpoint_every = 1;
  vqgpt::SampleOptions so;
  so.num = 3;
  so.quiet = true;
  auto sample = [&](uint64_t seed, const std::string& name) {
    so.sampling.seed = seed;
    so.out = s / (name + ".png");
    so.tokens_out = s / (name + ".npy");
    comm::run_threads(1, [&](comm::Communicator& comm) { vqgpt::sample(cfg, so, comm); });
  };
  comm::run_threads(1, [&](comm::Communicator& comm) {
    vqgpt::TrainOptions to;
    to.quiet = true;
    to.tokenizer = weights;
    vqgpt::train(cfg, to, comm);
  });
  sample(2, "sizes");  // the sizes of the failing sample's files
  const uintmax_t codes_size = fs::file_size(s / "sizes.npy");
  ASSERT_LT(codes_size, fs::file_size(s / "sizes.png"));
  EXPECT_EQ(data::load_npy(s / "sizes.npy").sizes(), (Shape{3, 1, 4, 4}));
  fs::create_directories(s / "out");
  sample(1, "out/ids");
  const std::string codes = read_all(s / "out/ids.npy"), grid = read_all(s / "out/ids.png");
  {
    FileSizeLimit limit(codes_size);  // the codes fit; the grid does not
    EXPECT_THROW(sample(2, "out/ids"), Error);
  }
  EXPECT_TRUE(read_all(s / "out/ids.npy") == codes) << "new codes beside the earlier grid";
  EXPECT_TRUE(read_all(s / "out/ids.png") == grid);
  EXPECT_EQ(temporaries(s / "out"), std::vector<std::string>{});
}
