// VqModel::expected_keys and count_parameters: the checkpoint's state-dict layout written
// out from the config alone (no tensors), so the real model's 270,740,287 parameters can
// be checked without allocating a gigabyte, and so a built model can be compared, key by
// key, with an independent description of the architecture.
#include "apps/vqtok/model/vq_model.h"

namespace zt::vq {

namespace {

// One state-dict entry; buffers are BatchNorm running statistics.
struct Entry {
  std::string name;
  Shape shape;
  bool buffer;
};

// Appends entries in state-dict order (own tensors, then children in registration order).
class KeyWriter {
 public:
  explicit KeyWriter(int64_t zq_channels) : zq_(zq_channels) {}

  void param(const std::string& name, Shape shape) {
    out.push_back({name, std::move(shape), false});
  }
  void buffer(const std::string& name, Shape shape) {
    out.push_back({name, std::move(shape), true});
  }

  void conv2d(const std::string& p, int64_t in, int64_t o, int64_t k) {
    param(p + ".weight", {o, in, k, k});
    param(p + ".bias", {o});
  }
  void causal_conv(const std::string& p, int64_t in, int64_t o, int64_t kt, int64_t ks) {
    param(p + ".conv.weight", {o, in, kt, ks, ks});
    param(p + ".conv.bias", {o});
  }
  void affine(const std::string& p, int64_t c) {
    param(p + ".weight", {c});
    param(p + ".bias", {c});
  }
  // GroupNorm in the encoder (zq == false), SpatialNorm in the decoder.
  void norm(const std::string& p, int64_t c, bool zq) {
    if (!zq) return affine(p, c);
    affine(p + ".norm_layer", c);
    conv2d(p + ".conv_y", zq_, c, 1);
    conv2d(p + ".conv_b", zq_, c, 1);
  }
  void resnet(const std::string& p, int64_t in, int64_t o, bool zq) {
    norm(p + ".norm1", in, zq);
    conv2d(p + ".conv1", in, o, 3);
    norm(p + ".norm2", o, zq);
    conv2d(p + ".conv2", o, o, 3);
    if (in != o) conv2d(p + ".nin_shortcut", in, o, 1);
  }
  void attn(const std::string& p, int64_t c, bool zq) {
    norm(p + ".norm", c, zq);
    for (const char* n : {".q", ".k", ".v", ".proj_out"}) conv2d(p + n, c, c, 1);
  }
  void mid(const std::string& p, int64_t c, bool zq) {
    resnet(p + ".block_1", c, c, zq);
    attn(p + ".attn_1", c, zq);
    resnet(p + ".block_2", c, c, zq);
  }
  void batch_norm(const std::string& p, int64_t c) {
    affine(p, c);
    buffer(p + ".running_mean", {c});
    buffer(p + ".running_var", {c});
    buffer(p + ".num_batches_tracked", {});
  }
  void time_res_stack(const std::string& p, int64_t blocks, int64_t c) {
    for (int64_t i = 0; i < blocks; ++i) {
      const std::string b = p + "." + std::to_string(i);
      batch_norm(b + ".norm1", c);
      causal_conv(b + ".conv1", c, c, 3, 3);
      batch_norm(b + ".norm2", c);
      causal_conv(b + ".conv2", c, c, 3, 3);
    }
  }

  std::vector<Entry> out;

 private:
  int64_t zq_;
};

bool attention_at(const config::ModelConfig& cfg, int64_t level) {
  for (int64_t a : cfg.attn_resolutions)
    if (a == level) return true;
  return false;
}

void write_encoder(KeyWriter& w, const config::ModelConfig& cfg) {
  const int64_t levels = static_cast<int64_t>(cfg.ch_mult.size());
  w.conv2d("encoder.conv_in", cfg.in_channels, cfg.ch, 3);
  int64_t in = cfg.ch;
  for (int64_t i = 0; i < levels; ++i) {
    const std::string p = "encoder.down." + std::to_string(i);
    const int64_t out = cfg.ch * cfg.ch_mult[i];
    for (int64_t j = 0; j < cfg.num_res_blocks; ++j)
      w.resnet(p + ".block." + std::to_string(j), j == 0 ? in : out, out, false);
    if (attention_at(cfg, i))
      for (int64_t j = 0; j < cfg.num_res_blocks; ++j)
        w.attn(p + ".attn." + std::to_string(j), out, false);
    if (i + 1 < levels) w.conv2d(p + ".downsample.conv", out, out, 3);
    in = out;
  }
  w.mid("encoder.mid", in, false);
  w.affine("encoder.norm_out", in);
  w.conv2d("encoder.conv_out", in, cfg.z_channels, 3);
  for (int64_t i = 0; i < cfg.temporal_layers(); ++i)
    w.causal_conv("encoder.time_conv." + std::to_string(i) + ".conv", cfg.z_channels,
                  cfg.z_channels, 4, 3);
  w.time_res_stack("encoder.time_res_stack", cfg.num_res_blocks, cfg.z_channels);
}

void write_decoder(KeyWriter& w, const config::ModelConfig& cfg) {
  const int64_t levels = static_cast<int64_t>(cfg.ch_mult.size());
  w.time_res_stack("decoder.time_res_stack", cfg.num_res_blocks, cfg.z_channels);
  for (int64_t i = 0; i < cfg.temporal_layers(); ++i)
    w.causal_conv("decoder.time_conv." + std::to_string(i) + ".conv", cfg.z_channels,
                  cfg.z_channels, 3, 3);
  const int64_t top = cfg.ch * cfg.ch_mult.back();
  w.conv2d("decoder.conv_in", cfg.z_channels, top, 3);
  w.mid("decoder.mid", top, true);
  // up.{i} is listed in index order; its input width is level i+1's output (or the top).
  for (int64_t i = 0; i < levels; ++i) {
    const std::string p = "decoder.up." + std::to_string(i);
    const int64_t out = cfg.ch * cfg.ch_mult[i];
    const int64_t in = i + 1 < levels ? cfg.ch * cfg.ch_mult[i + 1] : top;
    for (int64_t j = 0; j <= cfg.num_res_blocks; ++j)
      w.resnet(p + ".block." + std::to_string(j), j == 0 ? in : out, out, true);
    if (attention_at(cfg, i))
      for (int64_t j = 0; j <= cfg.num_res_blocks; ++j)
        w.attn(p + ".attn." + std::to_string(j), out, true);
    if (i != 0) w.conv2d(p + ".upsample.conv", out, out, 3);
  }
  const int64_t bottom = cfg.ch * cfg.ch_mult.front();
  w.norm("decoder.norm_out", bottom, true);
  w.conv2d("decoder.conv_out", bottom, cfg.out_channels, 3);
}

std::vector<Entry> all_entries(const config::ModelConfig& cfg) {
  validate(cfg);
  KeyWriter w(cfg.embed_dim);
  write_encoder(w, cfg);
  write_decoder(w, cfg);
  w.param("quantize.embedding.weight", {cfg.codebook_size, cfg.embed_dim});
  w.causal_conv("quant_conv", cfg.z_channels, cfg.embed_dim, 3, 1);
  w.causal_conv("post_quant_conv", cfg.embed_dim, cfg.z_channels, 3, 1);
  return std::move(w.out);
}

}  // namespace

std::vector<std::pair<std::string, Shape>> VqModel::expected_keys(const config::ModelConfig& cfg) {
  std::vector<std::pair<std::string, Shape>> keys;
  for (auto& e : all_entries(cfg)) keys.emplace_back(std::move(e.name), std::move(e.shape));
  return keys;
}

int64_t VqModel::count_parameters(const config::ModelConfig& cfg) {
  int64_t n = 0;
  for (const auto& e : all_entries(cfg))
    if (!e.buffer) n += shape_numel(e.shape);
  return n;
}

}  // namespace zt::vq
