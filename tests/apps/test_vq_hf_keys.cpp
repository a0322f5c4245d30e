// The BAAI <-> transformers naming map of the tokenizer (apps/vqtok/model/vq_hf_keys.h), checked
// against golden key lists that transformers' own Emu3VQVAE wrote (tests/apps/golden/, see
// the files' headers), so no Python is needed here. What these tests pin down:
//  1. the transformers names and shapes for the tiny and the real-size config are exactly
//     Emu3VQVAE's state dict;
//  2. the names map back and forth without loss, from either side, and the naming of a
//     state dict is told from its keys;
//  3. the config.json fields, and the refusal of a model Emu3VQVAE cannot describe;
//  4. a model's tensors survive BAAI -> transformers -> BAAI bit for bit;
//  5. vqtok export --format transformers writes those keys and config.json, and the file
//     loads back through --weights into a model that computes the same codes and frames
//     as the BAAI export. (Checked by hand as well: transformers 5.24.0 loads such an
//     export with Emu3VQVAE.from_pretrained without missing, unexpected or mismatched
//     keys and encodes images to the same tokens as zt.)
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "apps/vqtok/model/vq_hf_keys.h"
#include "apps/vqtok/vqtok_app.h"
#include "common/test_util.h"
#include "configs/config.h"
#include "nn/safetensors.h"
#include "nn/state_dict.h"

using namespace zt;
namespace fs = std::filesystem;

namespace {

using Keys = std::vector<std::pair<std::string, Shape>>;

// A golden file: "name d0,d1,..." per line ('#' lines are comments; no dims: a scalar).
Keys read_golden(const std::string& file) {
  const std::string path = std::string(ZT_SOURCE_DIR) + "/tests/apps/golden/" + file;
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << "cannot read " << path;
  Keys keys;
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t sp = line.find(' ');
    Shape shape;
    std::stringstream dims(sp == std::string::npos ? "" : line.substr(sp + 1));
    std::string d;
    while (std::getline(dims, d, ','))
      if (!d.empty()) shape.push_back(std::stoll(d));
    keys.emplace_back(line.substr(0, sp), shape);
  }
  return keys;
}

Keys sorted(Keys k) {
  std::sort(k.begin(), k.end());
  return k;
}

// configs/vqtok_tiny.yaml's model (ModelConfig's defaults).
config::ModelConfig tiny() {
  return config::ModelConfig{};
}

// configs/emu3_vision_tokenizer.yaml's model.
config::ModelConfig real() {
  config::ModelConfig m;
  m.codebook_size = 32768;
  m.ch = 256;
  return m;
}

void expect_same_keys(const Keys& got, const Keys& golden) {
  ASSERT_EQ(got.size(), golden.size());
  const Keys a = sorted(got), b = sorted(golden);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_EQ(a[i].second, b[i].second) << a[i].first;
  }
}

}  // namespace

TEST(VqHfKeys, TransformersKeysAreEmu3VqvaesForTinyAndRealSize) {
  expect_same_keys(vq::transformers_keys(tiny()), read_golden("emu3_vqvae_keys_tiny.txt"));
  expect_same_keys(vq::transformers_keys(real()), read_golden("emu3_vqvae_keys_real.txt"));
}

TEST(VqHfKeys, NamesMapBothWaysAndTheNamingIsDetected) {
  // From zt's side: every BAAI key goes to a different name and comes back.
  std::vector<std::string> baai, hf;
  for (const auto& [name, shape] : vq::VqModel::expected_keys(real())) {
    EXPECT_EQ(vq::baai_name(vq::transformers_name(name)), name);
    baai.push_back(name);
  }
  // From transformers' side: every golden key goes to a BAAI key zt has, and comes back.
  for (const auto& [name, shape] : read_golden("emu3_vqvae_keys_real.txt")) {
    const std::string b = vq::baai_name(name);
    EXPECT_EQ(vq::transformers_name(b), name);
    EXPECT_TRUE(std::find(baai.begin(), baai.end(), b) != baai.end()) << name << " -> " << b;
    hf.push_back(name);
  }
  EXPECT_EQ(vq::transformers_name("encoder.mid.attn_1.norm.weight"),
            "encoder.middle_block.attn_norm.weight");
  EXPECT_EQ(vq::transformers_name("decoder.up.3.attn.2.norm.conv_y.bias"),
            "decoder.up_block.up.3.attn_norms.2.conv_y.bias");
  EXPECT_EQ(vq::transformers_name("encoder.down.3.attn.1.proj_out.weight"),
            "encoder.down_block.down.3.attn.1.out_proj.weight");
  EXPECT_EQ(vq::detect_naming(baai), vq::KeyNaming::baai);
  EXPECT_EQ(vq::detect_naming(hf), vq::KeyNaming::transformers);
}

TEST(VqHfKeys, ConfigJsonDescribesTheModel) {
  const nlohmann::json j = vq::transformers_config(real());
  EXPECT_EQ(j["model_type"], "emu3_vqgan");
  EXPECT_EQ(j["architectures"][0], "Emu3VQVAE");
  EXPECT_EQ(j["codebook_size"], 32768);
  EXPECT_EQ(j["embed_dim"], 4);
  EXPECT_EQ(j["latent_channels"], 4);
  EXPECT_EQ(j["double_latent"], false);
  EXPECT_EQ(j["temporal_downsample_factor"], 4);
  EXPECT_EQ(j["base_channels"], 256);
  EXPECT_EQ(j["channel_multiplier"], nlohmann::json({1, 2, 2, 4}));
  EXPECT_EQ(j["num_res_blocks"], 2);
  EXPECT_EQ(j["attn_resolutions"], nlohmann::json({3}));
  EXPECT_EQ(j["hidden_size"], 1024);  // the attention width: ch * ch_mult[-1]
  EXPECT_EQ(j["num_attention_heads"], 1);
  EXPECT_EQ(vq::transformers_config(tiny())["hidden_size"], 128);

  config::ModelConfig two_widths = tiny();
  two_widths.attn_resolutions = {0, 3};  // widths 32 and 128: one hidden_size cannot say it
  EXPECT_TRUE(test::throws_with([&] { vq::transformers_config(two_widths); },
                                "attn_resolutions has level 0"));
}

TEST(VqHfKeys, TensorsSurviveARoundTripBitForBit) {
  config::ModelConfig m = tiny();
  m.ch_mult = {1, 1, 1, 1};
  m.num_res_blocks = 1;
  m.codebook_size = 64;
  manual_seed(5);
  vq::VqModel model(m);
  const nn::NamedTensors baai = nn::state_dict(model);
  const nn::NamedTensors hf = vq::to_transformers(baai);
  const Keys keys = vq::transformers_keys(m);
  ASSERT_EQ(hf.size(), keys.size());
  for (size_t i = 0; i < hf.size(); ++i) {
    EXPECT_EQ(hf[i].first, keys[i].first);
    EXPECT_EQ(hf[i].second.sizes(), keys[i].second) << hf[i].first;
  }
  const nn::NamedTensors back = vq::to_baai(hf);
  ASSERT_EQ(back.size(), baai.size());
  for (size_t i = 0; i < back.size(); ++i) {
    EXPECT_EQ(back[i].first, baai[i].first);
    EXPECT_EQ(back[i].second.sizes(), baai[i].second.sizes()) << back[i].first;
    EXPECT_EQ(back[i].second.to_vector(), baai[i].second.to_vector()) << back[i].first;
  }
  // BAAI names pass through to_baai unchanged.
  const nn::NamedTensors same = vq::to_baai(baai);
  ASSERT_EQ(same.size(), baai.size());
  for (size_t i = 0; i < same.size(); ++i) {
    EXPECT_EQ(same[i].first, baai[i].first);
    EXPECT_EQ(same[i].second.sizes(), baai[i].second.sizes()) << same[i].first;
  }
}

namespace {

// A tiny tokenizer (cosine codes or not) trained 2 steps in a fresh folder under /tmp and
// exported in both namings, and an input clip for it.
struct Exported {
  fs::path dir;
  config::AppConfig cfg;
  std::string baai, hf;  // model.safetensors files, BAAI and transformers names
  Tensor x;
};

Exported train_and_export(const std::string& name, bool cosine) {
  Exported e;
  e.dir = fs::temp_directory_path() / (name + "_" + std::to_string(::getpid()));
  fs::remove_all(e.dir);
  config::Node root = config::parse_yaml(R"(
model: {codebook_size: 64, embed_dim: 4, z_channels: 4, ch: 32, ch_mult: [1, 1, 1, 1],
        num_res_blocks: 1, attn_resolutions: [3], temporal_downsample_factor: 4}
data: {kind: synthetic, frames: 4, height: 16, width: 16, num_samples: 16, eval_samples: 4,
       seed: 7, workers: 1, prefetch: 1}
train: {steps: 2, batch: 2, lr: 3.0e-3, schedule: constant, warmup: 0, log_every: 1,
        eval_every: 0, checkpoint_every: 2, keep_checkpoints: 1}
output_dir: unset
)",
                                         name);
  config::apply_override(root, "output_dir=" + e.dir.string());
  config::apply_override(root, std::string("model.l2_norm_codes=") + (cosine ? "true" : "false"));
  e.cfg = config::parse_app_config(root, config::App::vqtok);
  e.baai = (e.dir / "baai" / "model.safetensors").string();
  e.hf = (e.dir / "hf" / "model.safetensors").string();
  manual_seed(11);
  e.x = rand({2, 4, 3, 16, 16}) * 2.0 - 1.0;
  comm::run_threads(1, [&](comm::Communicator& comm) {
    vqtok::TrainOptions o;
    o.quiet = true;
    vqtok::train(e.cfg, o, comm);
    vqtok::export_model(e.cfg, "", e.baai, comm, true);
    vqtok::export_model(e.cfg, "", e.hf, comm, true, vq::KeyNaming::transformers);
  });
  return e;
}

}  // namespace

TEST(VqHfKeys, TransformersExportLoadsBackThroughWeights) {
  const Exported e = train_and_export("zt_vq_hf_keys", /*cosine=*/false);
  const config::AppConfig& cfg = e.cfg;
  const fs::path& dir = e.dir;
  const std::string &baai_out = e.baai, &hf_out = e.hf;
  const Tensor& x = e.x;
  comm::run_threads(1, [&](comm::Communicator& comm) {
    // The file has exactly Emu3VQVAE's keys and shapes; config.json lies beside it.
    Keys got;
    for (const auto& [name, t] : nn::load_safetensors(hf_out)) got.emplace_back(name, t.sizes());
    expect_same_keys(got, vq::transformers_keys(cfg.model));
    EXPECT_FALSE(fs::exists(hf_out + ".baai.tmp"));
    std::ifstream f(dir / "hf" / "config.json");
    ASSERT_TRUE(f.good());
    EXPECT_EQ(nlohmann::json::parse(f), vq::transformers_config(cfg.model));
    // Exported again into that folder, its own config.json is replaced; a folder whose
    // config.json is something else's (a DeepSpeed config) is refused before anything is
    // written there.
    vqtok::export_model(cfg, "", hf_out, comm, true, vq::KeyNaming::transformers);
    const fs::path other = dir / "other";
    fs::create_directories(other);
    std::ofstream(other / "config.json") << R"({"train_batch_size": 8})";
    EXPECT_TRUE(test::throws_with(
        [&] {
          vqtok::export_model(cfg, "", (other / "model.safetensors").string(), comm, true,
                              vq::KeyNaming::transformers);
        },
        "config.json' exists and is not a config of model_type 'emu3_vqgan'"));
    EXPECT_EQ(std::distance(fs::directory_iterator(other), fs::directory_iterator()), 1);
    // Weights named config.json (or a link to it) would be replaced by the config written
    // beside them: refused before anything is written.
    const fs::path named = dir / "named";
    fs::create_directories(named);
    fs::create_symlink("config.json", named / "link.safetensors");
    for (const char* file : {"config.json", "link.safetensors"})
      EXPECT_TRUE(test::throws_with(
          [&] {
            vqtok::export_model(cfg, "", (named / file).string(), comm, true,
                                vq::KeyNaming::transformers);
          },
          "writes config.json beside the weights, which would replace them"))
          << file;
    EXPECT_FALSE(fs::exists(named / "config.json"));
    // Weights of another model: the error names the file.
    const std::string stray = (other / "stray.safetensors").string();
    nn::save_safetensors(stray, {{"decoder.conv_in.weight", zeros({2, 2})}});
    EXPECT_TRUE(test::throws_with([&] { vqtok::load_frozen_model(cfg, stray, comm); },
                                  "the weights in '" + stray + "' do not fit this model"));

    // Loaded through --weights, both files give the same model: same codes, same frames.
    auto a = vqtok::load_frozen_model(cfg, baai_out, comm);
    auto b = vqtok::load_frozen_model(cfg, hf_out, comm);
    const nn::NamedTensors sa = nn::state_dict(*a), sb = nn::state_dict(*b);
    ASSERT_EQ(sa.size(), sb.size());
    for (size_t i = 0; i < sa.size(); ++i)
      EXPECT_EQ(sa[i].second.to_vector(), sb[i].second.to_vector()) << sa[i].first;
    autograd::NoGradGuard ng;
    EXPECT_EQ(a->encode(x).codes.to_vector(), b->encode(x).codes.to_vector());
    EXPECT_EQ(a->call({x})[0].to_vector(), b->call({x})[0].to_vector());
  });
  fs::remove_all(dir);
}

// A model with cosine codes (model.l2_norm_codes) exports its codebook rows divided by
// their lengths: Emu3's and transformers' quantizers (Euclidean nearest row, then the row
// itself) then give zt's codes and frames. The exported file loaded as such a model
// (l2_norm_codes off, as transformers' Emu3VQVAE reads it) encodes and decodes as the
// trained cosine model does.
TEST(VqHfKeys, CosineCodesExportUnitRows) {
  const Exported e = train_and_export("zt_vq_cosine_export", /*cosine=*/true);
  const config::AppConfig& cfg = e.cfg;
  config::AppConfig euclidean = cfg;
  euclidean.model.l2_norm_codes = false;
  const std::string &baai_out = e.baai, &hf_out = e.hf;
  const Tensor& x = e.x;
  // Written once, from the state in memory: nothing beside the export (no intermediate
  // file a kill could leave, or that would need room of its own).
  auto entries = [](const fs::path& folder) {
    std::set<std::string> names;
    for (const auto& f : fs::directory_iterator(folder)) names.insert(f.path().filename().string());
    return names;
  };
  EXPECT_EQ(entries(fs::path(baai_out).parent_path()), std::set<std::string>{"model.safetensors"});
  EXPECT_EQ(entries(fs::path(hf_out).parent_path()),
            (std::set<std::string>{"config.json", "model.safetensors"}));
  comm::run_threads(1, [&](comm::Communicator& comm) {
    for (const std::string& file : {baai_out, hf_out}) {
      int64_t rows = 0;
      for (const auto& [name, t] : nn::load_safetensors(file))
        if (name.find("quantize") != std::string::npos && t.dim() == 2 && t.size(0) == 64) {
          const std::vector<double> norms = sqrt(sum(mul(t, t), {1})).to_vector();
          for (double n : norms) EXPECT_NEAR(n, 1.0, 1e-6) << file << " " << name;
          rows += t.size(0);
        }
      EXPECT_EQ(rows, 64) << file;
    }
    auto trained = vqtok::load_frozen_model(cfg, vqtok::checkpoint_root(cfg), comm);
    autograd::NoGradGuard ng;
    const Tensor codes = trained->encode(x).codes;
    const Tensor frames = trained->call({x})[0];
    for (const std::string& file : {baai_out, hf_out}) {
      auto as_cosine = vqtok::load_frozen_model(cfg, file, comm);
      auto as_emu3 = vqtok::load_frozen_model(euclidean, file, comm);
      EXPECT_EQ(as_cosine->encode(x).codes.to_vector(), codes.to_vector()) << file;
      EXPECT_EQ(as_emu3->encode(x).codes.to_vector(), codes.to_vector()) << file;
      EXPECT_CLOSE(as_emu3->call({x})[0], frames, 1e-4, 1e-5) << file;
    }
  });
  fs::remove_all(e.dir);
}
