// VqModel: encode (encoder, quant_conv, quantize), decode (post_quant_conv, decoder) and
// the image conveniences. The key listing without a model lives in vq_keys.cpp.
#include "apps/vqtok/model/vq_model.h"

namespace zt::vq {

// (B, T', C, h, w) <-> (B, C, T', h, w): the 2-D code works frame-major, the causal
// convs time-inside-channels.
static Tensor swap_time_channels(const Tensor& x) {
  return x.permute({0, 2, 1, 3, 4});
}

std::vector<std::string> recomputed_block_types() {
  return {"ResnetBlock", "AttnBlock", "TemporalResBlock"};
}

VqModel::VqModel(const config::ModelConfig& cfg) : nn::Module("VqModel"), cfg_(cfg) {
  validate(cfg);
  encoder = register_module("encoder", std::make_shared<Encoder>(cfg));
  decoder = register_module("decoder", std::make_shared<Decoder>(cfg));
  quantize = register_module(
      "quantize",
      std::make_shared<Quantizer>(cfg.codebook_size, cfg.embed_dim, 0.25, cfg.l2_norm_codes));
  // Mixes time only: kernel (3, 1, 1).
  quant_conv = register_module("quant_conv",
                               std::make_shared<CausalConv3d>(cfg.z_channels, cfg.embed_dim,
                                                              std::array<int64_t, 3>{3, 1, 1}));
  post_quant_conv = register_module(
      "post_quant_conv", std::make_shared<CausalConv3d>(cfg.embed_dim, cfg.z_channels,
                                                        std::array<int64_t, 3>{3, 1, 1}));
}

EncodeResult VqModel::encode(const Tensor& video) {
  ZT_CHECK(video.dim() == 4 || video.dim() == 5,
           "VqModel::encode: expected a video (B, T, C, H, W) or an image (B, C, H, W), got ",
           shape_str(video.sizes()));
  const bool image = video.dim() == 4;
  // An empty batch would reach the quantizer's nearest-code search with no latents.
  const char* axes = image ? "BCHW" : "BTCHW";
  for (int64_t d = 0; d < video.dim(); ++d)
    ZT_CHECK(video.size(d) > 0, "VqModel::encode: the batch ", shape_str(video.sizes()),
             " is empty (", axes[d], " = 0): there is nothing to encode; give at least one ",
             image ? "image of at least 1x1 pixels" : "clip of at least one frame of 1x1 pixels");
  Tensor x = video;
  if (image) {
    ZT_CHECK(video.size(1) == cfg_.in_channels, "VqModel::encode: image ", shape_str(video.sizes()),
             " should have ", cfg_.in_channels, " channels");
    // A still image is a clip of f identical frames.
    x = repeat(video.unsqueeze(1), {1, cfg_.temporal_downsample_factor, 1, 1, 1});
  } else if (video.size(1) == 1) {  // a one-frame clip (data.frames: 1) is an image too
    x = repeat(video, {1, cfg_.temporal_downsample_factor, 1, 1, 1});
  }
  Tensor h = (*encoder)(x);                                             // (B, T', Z, h, w)
  Tensor z = swap_time_channels((*quant_conv)(swap_time_channels(h)));  // (B, T', E, h, w)
  std::vector<Tensor> q = quantize->call({z});
  EncodeResult r;
  r.z = z;
  r.zq = q[0];
  r.codes = image ? q[1].select(1, 0) : q[1];
  r.loss_vq = q[2];
  r.loss_commit = q[3];
  r.loss_codebook = q[4];
  r.error = q[5];
  return r;
}

EncodeResult VqModel::encode_image(const Tensor& image) {
  ZT_CHECK(image.dim() == 4, "VqModel::encode_image: expected an image (B, C, H, W), got ",
           shape_str(image.sizes()));
  return encode(image);
}

Tensor VqModel::decode_latents(const Tensor& zq) {
  ZT_CHECK(zq.dim() == 5 && zq.size(2) == cfg_.embed_dim,
           "VqModel::decode_latents: expected zq (B, T', ", cfg_.embed_dim, ", h, w), got ",
           shape_str(zq.sizes()));
  Tensor z = swap_time_channels((*post_quant_conv)(swap_time_channels(zq)));  // (B,T',Z,h,w)
  return (*decoder)(z, zq);                                                   // (B,T,C,H,W)
}

Tensor VqModel::decode_codes(const Tensor& codes) {
  ZT_CHECK(codes.dim() == 3 || codes.dim() == 4,
           "VqModel::decode_codes: expected codes (B, T', h, w) or image codes (B, h, w), got ",
           shape_str(codes.sizes()));
  if (codes.dim() == 3) return decode_codes(codes.unsqueeze(1)).select(1, 0);
  return decode_latents(quantize->lookup(codes));
}

Tensor VqModel::decode_image(const Tensor& codes) {
  ZT_CHECK(codes.dim() == 3, "VqModel::decode_image: expected image codes (B, h, w), got ",
           shape_str(codes.sizes()));
  return decode_codes(codes);
}

ForwardResult VqModel::forward_train(const Tensor& video) {
  std::vector<Tensor> out = call({video});
  return {out[0], out[1], out[2], out[3], out[4]};
}

std::vector<Tensor> VqModel::forward(const std::vector<Tensor>& inputs) {
  ZT_CHECK(inputs.size() == 1, "VqModel takes {video}, got ", inputs.size(), " inputs");
  EncodeResult e = encode(inputs[0]);
  Tensor recon = decode_latents(e.zq);  // (B, T, C, H, W)
  if (inputs[0].dim() == 4) recon = recon.select(1, 0);
  if (inputs[0].dim() == 5 && inputs[0].size(1) == 1) recon = recon.narrow(1, 0, 1);
  std::vector<Tensor> out = {recon, e.codes, e.loss_vq, e.loss_commit, e.loss_codebook};
  if (!autograd::grad_mode_enabled()) {  // evaluation: item_errors, summed in f64
    Tensor d = e.error.to(DType::f64).reshape({e.error.size(0), -1});
    out.push_back(mul(sum(d * d, {1}), 1.0 / static_cast<double>(d.size(1))));
  }
  return out;
}

}  // namespace zt::vq
