// The 2-D tokenizer blocks. Every child is called through its call() entry point (the
// ZeRO engine's hooks gather a module's parameters there), never through forward().
#include "apps/vqtok/model/vq_blocks.h"

#include <cmath>
#include <sstream>

namespace zt::vq {

namespace {

// Re-initializes every conv weight as it is registered, then hands the registration to
// the observer that was active before (a zero::Init scope, say). nn's convs draw
// PyTorch's default init before registering; the released model then overwrites the
// weight with kaiming normal. Doing that inside the registration keeps the rule that a
// partitioning scope only ever sees the final initial value.
class ReleasedConvInit : public nn::RegistrationObserver {
 public:
  explicit ReleasedConvInit(double gain)
      : gain_(gain), outer_(nn::current_registration_observer()) {
    nn::push_registration_observer(this);
  }
  ~ReleasedConvInit() override { nn::pop_registration_observer(this); }
  ReleasedConvInit(const ReleasedConvInit&) = delete;
  ReleasedConvInit& operator=(const ReleasedConvInit&) = delete;

  void on_parameter(nn::Module& owner, const std::string& name, const Tensor& p) override {
    if (name == "weight") {
      autograd::NoGradGuard ng;
      nn::init::kaiming_normal_(p, 0.0, "fan_out", "relu");
      if (gain_ != 1.0) p.copy_(p * gain_);
    }
    if (outer_) outer_->on_parameter(owner, name, p);
  }
  void on_buffer(nn::Module& owner, const std::string& name, const Tensor& b) override {
    if (outer_) outer_->on_buffer(owner, name, b);
  }

 private:
  double gain_;
  nn::RegistrationObserver* outer_;
};

}  // namespace

std::shared_ptr<nn::Conv2d> make_conv2d(const nn::Conv2dOptions& options, double init_gain) {
  ReleasedConvInit scope(init_gain);
  return std::make_shared<nn::Conv2d>(options);
}

std::shared_ptr<nn::Conv3d> make_conv3d(const nn::Conv3dOptions& options) {
  ReleasedConvInit scope(1.0);
  return std::make_shared<nn::Conv3d>(options);
}

std::shared_ptr<nn::GroupNorm> make_group_norm(int64_t channels, const char* where, bool silu) {
  ZT_CHECK(channels % kNormGroups == 0, where, ": GroupNorm(", kNormGroups, ") needs a channel ",
           "count that is a multiple of ", kNormGroups, ", got ", channels,
           " (choose model.ch as a multiple of 32)");
  return std::make_shared<nn::GroupNorm>(
      nn::GroupNormOptions(kNormGroups, channels).eps(kNormEps).silu(silu));
}

Tensor resized_like(const Tensor& zq, const Tensor& x) {
  if (zq.size(2) == x.size(2) && zq.size(3) == x.size(3)) return zq;
  return interpolate_nearest(zq, {x.size(2), x.size(3)});
}

Tensor call_conditioned(nn::Module& m, const Tensor& x, const Tensor& zq) {
  return zq.defined() ? m(x, zq) : m(x);
}

// Splits {x} / {x, zq} inputs, checking the count against whether the block is
// conditioned.
static std::pair<Tensor, Tensor> unpack(const std::vector<Tensor>& inputs, bool conditioned,
                                        const std::string& who) {
  if (conditioned) {
    ZT_CHECK(inputs.size() == 2, who, " (decoder block, SpatialNorm) takes {x, zq}, got ",
             inputs.size(), " inputs");
    return {inputs[0], inputs[1]};
  }
  ZT_CHECK(inputs.size() == 1, who, " (encoder block, GroupNorm) takes {x}, got ", inputs.size(),
           " inputs");
  return {inputs[0], Tensor()};
}

static void check_image(const Tensor& x, int64_t channels, const std::string& who) {
  ZT_CHECK(x.dim() == 4 && x.size(1) == channels, who, ": expected x (N, ", channels,
           ", H, W), got ", shape_str(x.sizes()));
}

// ---- SpatialNorm

SpatialNorm::SpatialNorm(int64_t channels, int64_t zq_channels, bool silu)
    : nn::Module("SpatialNorm") {
  ZT_CHECK(zq_channels > 0, "SpatialNorm: zq channels must be positive, got ", zq_channels);
  norm_layer = register_module("norm_layer", make_group_norm(channels, "SpatialNorm", silu));
  conv_y = register_module("conv_y", make_conv2d(nn::Conv2dOptions(zq_channels, channels, 1)));
  conv_b = register_module("conv_b", make_conv2d(nn::Conv2dOptions(zq_channels, channels, 1)));
}

std::string SpatialNorm::extra_repr() const {
  std::ostringstream os;
  os << norm_layer->options.num_channels() << ", zq_channels=" << conv_y->options.in_channels();
  if (norm_layer->options.silu()) os << ", silu";
  return os.str();
}

std::vector<Tensor> SpatialNorm::forward(const std::vector<Tensor>& inputs) {
  ZT_CHECK(inputs.size() == 2, "SpatialNorm takes {x, zq}, got ", inputs.size(), " inputs");
  const Tensor& x = inputs[0];
  const Tensor& zq = inputs[1];
  check_image(x, norm_layer->options.num_channels(), "SpatialNorm");
  ZT_CHECK(zq.dim() == 4 && zq.size(0) == x.size(0) && zq.size(1) == conv_y->options.in_channels(),
           "SpatialNorm: zq ", shape_str(zq.sizes()), " does not match x ", shape_str(x.sizes()),
           " (expected (N, ", conv_y->options.in_channels(), ", h, w) with the same N)");
  const Tensor z = resized_like(zq, x);
  // GN(x) * y + b (then silu) in the norm's kernels; b's convolution runs first (the
  // order this model has always run them in).
  Tensor b = (*conv_b)(z);
  return {(*norm_layer)(x, (*conv_y)(z), b)};
}

// ---- ResnetBlock

static std::shared_ptr<nn::Module> make_norm(int64_t channels, int64_t zq_channels,
                                             const char* where, bool silu) {
  if (zq_channels > 0) return std::make_shared<SpatialNorm>(channels, zq_channels, silu);
  return make_group_norm(channels, where, silu);
}

ResnetBlock::ResnetBlock(int64_t in_channels, int64_t out_channels, double dropout,
                         int64_t zq_channels, double out_init)
    : nn::Module("ResnetBlock"),
      in_channels_(in_channels),
      out_channels_(out_channels),
      dropout_(dropout),
      conditioned_(zq_channels > 0) {
  ZT_CHECK(dropout >= 0 && dropout < 1, "ResnetBlock: dropout must be in [0, 1), got ", dropout);
  auto conv3x3 = [](int64_t i, int64_t o) {
    return make_conv2d(nn::Conv2dOptions(i, o, 3).padding(1));
  };
  // Registration order = the checkpoint's key order.
  norm1 = register_module("norm1", make_norm(in_channels, zq_channels, "ResnetBlock.norm1", true));
  conv1 = register_module("conv1", conv3x3(in_channels, out_channels));
  norm2 = register_module("norm2", make_norm(out_channels, zq_channels, "ResnetBlock.norm2", true));
  conv2 = register_module(
      "conv2", make_conv2d(nn::Conv2dOptions(out_channels, out_channels, 3).padding(1), out_init));
  if (in_channels != out_channels)
    nin_shortcut = register_module("nin_shortcut",
                                   make_conv2d(nn::Conv2dOptions(in_channels, out_channels, 1)));
}

std::string ResnetBlock::extra_repr() const {
  std::ostringstream os;
  os << in_channels_ << " -> " << out_channels_;
  if (dropout_ > 0) os << ", dropout=" << dropout_;
  return os.str();
}

std::vector<Tensor> ResnetBlock::forward(const std::vector<Tensor>& inputs) {
  auto [x, zq] = unpack(inputs, conditioned_, "ResnetBlock");
  check_image(x, in_channels_, "ResnetBlock");
  Tensor h = (*conv1)(call_conditioned(*norm1, x, zq));  // the norms apply the SiLU
  h = call_conditioned(*norm2, h, zq);
  if (dropout_ > 0) h = dropout(h, dropout_, is_training());
  h = (*conv2)(h);
  return {(nin_shortcut ? (*nin_shortcut)(x) : x) + h};
}

// ---- AttnBlock

AttnBlock::AttnBlock(int64_t channels, int64_t zq_channels, double out_init)
    : nn::Module("AttnBlock"), channels_(channels), conditioned_(zq_channels > 0) {
  auto conv1x1 = [channels] { return make_conv2d(nn::Conv2dOptions(channels, channels, 1)); };
  norm = register_module("norm", make_norm(channels, zq_channels, "AttnBlock.norm", false));
  q = register_module("q", conv1x1());
  k = register_module("k", conv1x1());
  v = register_module("v", conv1x1());
  proj_out =
      register_module("proj_out", make_conv2d(nn::Conv2dOptions(channels, channels, 1), out_init));
}

std::string AttnBlock::extra_repr() const {
  return std::to_string(channels_);
}

std::vector<Tensor> AttnBlock::forward(const std::vector<Tensor>& inputs) {
  auto [x, zq] = unpack(inputs, conditioned_, "AttnBlock");
  check_image(x, channels_, "AttnBlock");
  const int64_t n = x.size(0), c = channels_, hw = x.size(2) * x.size(3);
  Tensor h = call_conditioned(*norm, x, zq);
  // Positions as tokens: (N, HW, C) views of the (N, C, HW) maps, read in place.
  auto tokens = [&](const Tensor& y) { return y.reshape({n, c, hw}).permute({0, 2, 1}); };
  // out_i = sum_j w[i, j] v_j with w[i, j] = softmax_j(q_i . k_j / sqrt(C)) over the keys
  // j of the same frame.
  Tensor attn = scaled_dot_product_attention(tokens((*q)(h)), tokens((*k)(h)), tokens((*v)(h)));
  Tensor out = attn.permute({0, 2, 1});  // (N, C, HW)
  return {x + (*proj_out)(out.reshape(x.sizes()))};
}

// ---- Downsample / Upsample

Downsample::Downsample(int64_t channels) : nn::UnaryModule("Downsample") {
  // The right/bottom zero pad is folded into the conv's explicit padding.
  conv = register_module(
      "conv",
      make_conv2d(
          nn::Conv2dOptions(channels, channels, 3).stride(2).explicit_padding({0, 1, 0, 1})));
}

Tensor Downsample::forward(const Tensor& x) {
  check_image(x, conv->options.in_channels(), "Downsample");
  ZT_CHECK(x.size(2) % 2 == 0 && x.size(3) % 2 == 0, "Downsample: H and W must be even, got ",
           shape_str(x.sizes()), " (input H, W must be multiples of the spatial factor)");
  return (*conv)(x);
}

Upsample::Upsample(int64_t channels) : nn::UnaryModule("Upsample") {
  conv = register_module("conv", make_conv2d(nn::Conv2dOptions(channels, channels, 3).padding(1)));
}

Tensor Upsample::forward(const Tensor& x) {
  check_image(x, conv->options.in_channels(), "Upsample");
  return (*conv)(interpolate_nearest(x, {2 * x.size(2), 2 * x.size(3)}));
}

}  // namespace zt::vq
