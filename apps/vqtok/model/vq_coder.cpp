// Encoder, Decoder and their levels. The order of registration follows the original
// model's construction, so state dicts list keys in the checkpoint's order.
#include "apps/vqtok/model/vq_coder.h"

namespace zt::vq {

void validate(const config::ModelConfig& cfg) {
  ZT_CHECK(cfg.codebook_size > 0, "model.codebook_size must be positive, got ", cfg.codebook_size);
  ZT_CHECK(cfg.z_channels > 0 && cfg.embed_dim == cfg.z_channels,
           "model.embed_dim must equal model.z_channels (> 0), got embed_dim ", cfg.embed_dim,
           " and z_channels ", cfg.z_channels);
  ZT_CHECK(cfg.in_channels > 0 && cfg.out_channels > 0,
           "model.in_channels and model.out_channels must be positive");
  const int64_t f = cfg.temporal_downsample_factor;
  ZT_CHECK(f >= 1 && (f & (f - 1)) == 0,
           "model.temporal_downsample_factor must be a power of two, got ", f);
  ZT_CHECK(cfg.ch > 0 && cfg.ch % kNormGroups == 0, "model.ch must be a positive multiple of ",
           kNormGroups, " (GroupNorm(32)), got ", cfg.ch);
  ZT_CHECK(!cfg.ch_mult.empty(), "model.ch_mult must not be empty");
  for (int64_t m : cfg.ch_mult) ZT_CHECK(m > 0, "model.ch_mult entries must be positive, got ", m);
  ZT_CHECK(cfg.num_res_blocks >= 1, "model.num_res_blocks must be >= 1, got ", cfg.num_res_blocks);
  const int64_t levels = static_cast<int64_t>(cfg.ch_mult.size());
  for (int64_t a : cfg.attn_resolutions)
    ZT_CHECK(a >= 0 && a < levels, "model.attn_resolutions holds level indices in [0, ", levels,
             "), got ", a);
  ZT_CHECK(cfg.dropout >= 0 && cfg.dropout < 1, "model.dropout must be in [0, 1), got ",
           cfg.dropout);
}

static bool has_attention(const config::ModelConfig& cfg, int64_t level) {
  for (int64_t a : cfg.attn_resolutions)
    if (a == level) return true;
  return false;
}

// ---- Level

Level::Level(int64_t in_channels, int64_t out_channels, int64_t blocks, bool attention,
             const std::string& resample_kind, double dropout, int64_t zq_channels, double out_init)
    : nn::Module("Level") {
  block = register_module("block", std::make_shared<nn::ModuleList>());
  attn = register_module("attn", std::make_shared<nn::ModuleList>());
  for (int64_t j = 0; j < blocks; ++j) {
    block->push_back(std::make_shared<ResnetBlock>(j == 0 ? in_channels : out_channels,
                                                   out_channels, dropout, zq_channels, out_init));
    if (attention)
      attn->push_back(std::make_shared<AttnBlock>(out_channels, zq_channels, out_init));
  }
  if (resample_kind == "downsample")
    resample = register_module("downsample", std::make_shared<Downsample>(out_channels));
  else if (resample_kind == "upsample")
    resample = register_module("upsample", std::make_shared<Upsample>(out_channels));
  else
    ZT_CHECK(resample_kind.empty(), "Level: unknown resample '", resample_kind, "'");
}

std::vector<Tensor> Level::forward(const std::vector<Tensor>& inputs) {
  ZT_CHECK(inputs.size() == 1 || inputs.size() == 2, "Level takes {x} or {x, zq}, got ",
           inputs.size(), " inputs");
  Tensor x = inputs[0];
  // The conditioning map at the level's size once, for all of its SpatialNorms (each
  // would resize it again, forward and back).
  const Tensor zq = inputs.size() == 2 ? resized_like(inputs[1], x) : Tensor();
  for (size_t j = 0; j < block->size(); ++j) {
    x = call_conditioned(*(*block)[j], x, zq);
    if (attn->size() > 0) x = call_conditioned(*(*attn)[j], x, zq);
  }
  if (resample) x = (*resample)(x);
  return {x};
}

// ---- MidBlock

MidBlock::MidBlock(int64_t channels, double dropout, int64_t zq_channels, double out_init)
    : nn::Module("MidBlock") {
  block_1 = register_module(
      "block_1", std::make_shared<ResnetBlock>(channels, channels, dropout, zq_channels, out_init));
  attn_1 = register_module("attn_1", std::make_shared<AttnBlock>(channels, zq_channels, out_init));
  block_2 = register_module(
      "block_2", std::make_shared<ResnetBlock>(channels, channels, dropout, zq_channels, out_init));
}

std::vector<Tensor> MidBlock::forward(const std::vector<Tensor>& inputs) {
  ZT_CHECK(inputs.size() == 1 || inputs.size() == 2, "MidBlock takes {x} or {x, zq}, got ",
           inputs.size(), " inputs");
  Tensor zq = inputs.size() == 2 ? inputs[1] : Tensor();
  Tensor x = call_conditioned(*block_1, inputs[0], zq);
  x = call_conditioned(*attn_1, x, zq);
  return {call_conditioned(*block_2, x, zq)};
}

// ---- Encoder

static std::shared_ptr<nn::Sequential> make_time_res_stack(const config::ModelConfig& cfg) {
  auto stack = std::make_shared<nn::Sequential>();
  for (int64_t i = 0; i < cfg.num_res_blocks; ++i)
    stack->push_back(std::make_shared<TemporalResBlock>(cfg.z_channels, cfg.dropout));
  return stack;
}

Encoder::Encoder(const config::ModelConfig& cfg) : nn::UnaryModule("Encoder"), cfg_(cfg) {
  validate(cfg);
  const int64_t levels = static_cast<int64_t>(cfg.ch_mult.size());
  conv_in = register_module("conv_in",
                            make_conv2d(nn::Conv2dOptions(cfg.in_channels, cfg.ch, 3).padding(1)));
  down = register_module("down", std::make_shared<nn::ModuleList>());
  int64_t block_in = cfg.ch;  // in multipliers are (1, ch_mult...)
  for (int64_t i = 0; i < levels; ++i) {
    const int64_t block_out = cfg.ch * cfg.ch_mult[i];
    down->push_back(std::make_shared<Level>(
        block_in, block_out, cfg.num_res_blocks, has_attention(cfg, i),
        i + 1 < levels ? "downsample" : "", cfg.dropout, 0, cfg.out_init_scale));
    block_in = block_out;
  }
  mid = register_module("mid",
                        std::make_shared<MidBlock>(block_in, cfg.dropout, 0, cfg.out_init_scale));
  norm_out = register_module("norm_out", make_group_norm(block_in, "Encoder.norm_out", true));
  conv_out = register_module(
      "conv_out", make_conv2d(nn::Conv2dOptions(block_in, cfg.z_channels, 3).padding(1)));
  time_conv = register_module("time_conv", std::make_shared<nn::ModuleList>());
  for (int64_t i = 0; i < cfg.temporal_layers(); ++i)
    time_conv->push_back(std::make_shared<TemporalDownsample>(cfg.z_channels, cfg.z_channels));
  time_res_stack = register_module("time_res_stack", make_time_res_stack(cfg));
}

Tensor Encoder::forward(const Tensor& x) {
  const int64_t s = cfg_.spatial_factor(), f = cfg_.temporal_downsample_factor;
  ZT_CHECK(x.dim() == 5 && x.size(2) == cfg_.in_channels, "Encoder: expected video (B, T, ",
           cfg_.in_channels, ", H, W), got ", shape_str(x.sizes()));
  const int64_t b = x.size(0), t = x.size(1);
  // VqModel::encode has repeated an image (T = 1) to f frames by now.
  ZT_CHECK(t % f == 0, "Encoder: T = ", t,
           " frames: a clip needs 1 frame (an image) or a multiple of "
           "model.temporal_downsample_factor (",
           f, ") frames; pad or trim clips (data.frames)");
  ZT_CHECK(x.size(3) % s == 0 && x.size(4) % s == 0, "Encoder: H, W = ", x.size(3), ", ", x.size(4),
           " must be multiples of the spatial factor ", s,
           " = 2^(len(model.ch_mult) - 1); resize frames (data.height, data.width)");
  Tensor h = (*conv_in)(x.reshape({b * t, x.size(2), x.size(3), x.size(4)}));  // (B*T, ch, H, W)
  for (const auto& level : *down) h = (*level)(h);
  h = (*mid)(h);
  h = (*conv_out)((*norm_out)(h));  // SiLU in the norm; (B*T, Z, h, w)
  h = h.reshape({b, t, h.size(1), h.size(2), h.size(3)}).permute({0, 2, 1, 3, 4});  // (B,Z,T,h,w)
  for (const auto& tc : *time_conv) h = silu((*tc)(h));  // T halves each time
  h = (*time_res_stack)(h);                              // (B, Z, T', h, w)
  return h.permute({0, 2, 1, 3, 4});                     // (B, T', Z, h, w)
}

// ---- Decoder

Decoder::Decoder(const config::ModelConfig& cfg) : nn::Module("Decoder"), cfg_(cfg) {
  validate(cfg);
  const int64_t levels = static_cast<int64_t>(cfg.ch_mult.size());
  const int64_t zq_ch = cfg.embed_dim;
  time_res_stack = register_module("time_res_stack", make_time_res_stack(cfg));
  time_conv = register_module("time_conv", std::make_shared<nn::ModuleList>());
  for (int64_t i = 0; i < cfg.temporal_layers(); ++i)
    time_conv->push_back(std::make_shared<TemporalUpsample>(cfg.z_channels, cfg.z_channels));
  int64_t block_in = cfg.ch * cfg.ch_mult.back();
  conv_in = register_module("conv_in",
                            make_conv2d(nn::Conv2dOptions(cfg.z_channels, block_in, 3).padding(1)));
  mid = register_module(
      "mid", std::make_shared<MidBlock>(block_in, cfg.dropout, zq_ch, cfg.out_init_scale));
  // Built widest first (the order data flows), stored so that up.{i} is level i.
  std::vector<std::shared_ptr<Level>> built(static_cast<size_t>(levels));
  for (int64_t i = levels - 1; i >= 0; --i) {
    const int64_t block_out = cfg.ch * cfg.ch_mult[i];
    built[static_cast<size_t>(i)] =
        std::make_shared<Level>(block_in, block_out, cfg.num_res_blocks + 1, has_attention(cfg, i),
                                i != 0 ? "upsample" : "", cfg.dropout, zq_ch, cfg.out_init_scale);
    block_in = block_out;
  }
  up = register_module("up", std::make_shared<nn::ModuleList>());
  for (auto& level : built) up->push_back(level);
  norm_out = register_module("norm_out", std::make_shared<SpatialNorm>(block_in, zq_ch, true));
  conv_out = register_module(
      "conv_out",
      make_conv2d(nn::Conv2dOptions(block_in, cfg.out_channels, 3).padding(1), cfg.out_init_scale));
}

std::vector<Tensor> Decoder::forward(const std::vector<Tensor>& inputs) {
  ZT_CHECK(inputs.size() == 2, "Decoder takes {z, quant}, got ", inputs.size(), " inputs");
  const Tensor& z = inputs[0];
  const Tensor& quant = inputs[1];
  ZT_CHECK(z.dim() == 5 && z.size(2) == cfg_.z_channels && z.sizes() == quant.sizes(),
           "Decoder: expected z and quant both (B, T', ", cfg_.z_channels, ", h, w), got z ",
           shape_str(z.sizes()), " and quant ", shape_str(quant.sizes()));
  const int64_t b = z.size(0), c = z.size(2), hh = z.size(3), ww = z.size(4);
  // Both streams share the temporal layers (and, in training, the BatchNorm statistics
  // of the stacked 2B batch).
  Tensor zz = cat({z, quant}, 0).permute({0, 2, 1, 3, 4});  // (2B, Z, T', h, w)
  zz = (*time_res_stack)(zz);
  for (const auto& tc : *time_conv) zz = silu((*tc)(zz));  // T doubles each time
  zz = zz.permute({0, 2, 1, 3, 4});                        // (2B, T, Z, h, w)
  const int64_t t = zz.size(1);
  Tensor h = zz.narrow(0, 0, b).reshape({b * t, c, hh, ww});
  // Contiguous once here: every SpatialNorm's convolutions read zq (at the latent size
  // without interpolating), and each would copy a strided view again, forward and back.
  Tensor zq = zz.narrow(0, b, b).reshape({b * t, c, hh, ww}).contiguous();
  h = (*conv_in)(h);
  h = (*mid)(h, zq);
  for (int64_t i = static_cast<int64_t>(up->size()) - 1; i >= 0; --i)
    h = (*(*up)[static_cast<size_t>(i)])(h, zq);
  h = (*conv_out)((*norm_out)(h, resized_like(zq, h)));  // SiLU in the norm; (B*T, C_out, H, W)
  return {h.reshape({b, t, h.size(1), h.size(2), h.size(3)})};
}

}  // namespace zt::vq
