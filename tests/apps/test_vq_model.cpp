// The Emu3-style VQ tokenizer (apps/vqtok/model/vq_*.h). What these tests pin down:
//  1. the state dict is the real checkpoint's: exact key names and shapes, 4,288,735
//     parameters for the tiny config and 270,740,287 for the real one;
//  2. shapes: video (B, 4, 3, 32, 32) <-> codes (B, 1, 4, 4); image (B, 3, 32, 32) <->
//     codes (B, 4, 4);
//  3. the quantizer's nearest codes, straight-through gradient and VQ loss;
//  4. causality of the temporal convs;
//  5. a training step reaches every parameter, and every module holding parameters is
//     entered through call() (where the ZeRO engine gathers);
//  6. the released initialization and the error messages for bad inputs.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
#include <set>

#include "apps/vqtok/model/vq_model.h"
#include "common/test_util.h"

using namespace zt;

namespace {

config::ModelConfig tiny() {
  return config::ModelConfig{};
}  // the defaults are the tiny model

config::ModelConfig real() {
  config::ModelConfig c;
  c.codebook_size = 32768;
  c.ch = 256;
  return c;
}

std::map<std::string, Shape> shapes_of(const nn::Module& m) {
  std::map<std::string, Shape> out;
  for (const auto& [n, t] : nn::state_dict(m)) out[n] = t.sizes();
  return out;
}

double std_of(const Tensor& t) {
  return std::sqrt(var(t).item());
}

}  // namespace

TEST(VqModel, TinyStateDictIsTheCheckpointLayout) {
  manual_seed(0);
  vq::VqModel model(tiny());
  EXPECT_EQ(model.num_parameters(), 4288735);
  EXPECT_EQ(vq::VqModel::count_parameters(tiny()), 4288735);
  EXPECT_EQ(model.named_parameters().size(), 471u);
  EXPECT_EQ(model.named_buffers().size(), 24u);
  auto dict = nn::state_dict(model);
  ASSERT_EQ(dict.size(), 495u);

  // The built model equals the independent listing, key by key and in order.
  auto expected = vq::VqModel::expected_keys(tiny());
  ASSERT_EQ(expected.size(), dict.size());
  for (size_t i = 0; i < dict.size(); ++i) {
    EXPECT_EQ(dict[i].first, expected[i].first) << "entry " << i;
    EXPECT_EQ(dict[i].second.sizes(), expected[i].second) << dict[i].first;
  }

  auto s = shapes_of(model);
  const std::map<std::string, Shape> sample = {
      {"quantize.embedding.weight", {1024, 4}},
      {"quant_conv.conv.weight", {4, 4, 3, 1, 1}},
      {"post_quant_conv.conv.bias", {4}},
      {"encoder.conv_in.weight", {32, 3, 3, 3}},
      {"encoder.down.0.downsample.conv.weight", {32, 32, 3, 3}},
      {"encoder.down.1.block.0.nin_shortcut.weight", {64, 32, 1, 1}},
      {"encoder.down.3.attn.0.q.weight", {128, 128, 1, 1}},
      {"encoder.down.3.attn.1.norm.weight", {128}},
      {"encoder.mid.attn_1.proj_out.weight", {128, 128, 1, 1}},
      {"encoder.conv_out.weight", {4, 128, 3, 3}},
      {"encoder.time_conv.0.conv.conv.weight", {4, 4, 4, 3, 3}},
      {"encoder.time_res_stack.1.norm2.running_var", {4}},
      {"encoder.time_res_stack.0.norm1.num_batches_tracked", {}},
      {"encoder.time_res_stack.0.conv1.conv.weight", {4, 4, 3, 3, 3}},
      {"decoder.time_res_stack.1.conv2.conv.weight", {4, 4, 3, 3, 3}},
      {"decoder.time_conv.0.conv.conv.weight", {4, 4, 3, 3, 3}},
      {"decoder.time_conv.1.conv.conv.bias", {4}},
      {"decoder.conv_in.weight", {128, 4, 3, 3}},
      {"decoder.mid.block_1.norm1.conv_y.weight", {128, 4, 1, 1}},
      {"decoder.mid.block_1.norm1.norm_layer.weight", {128}},
      {"decoder.mid.attn_1.norm.conv_b.weight", {128, 4, 1, 1}},
      {"decoder.up.3.block.2.conv2.weight", {128, 128, 3, 3}},  // up.3 is the widest
      {"decoder.up.3.attn.2.proj_out.weight", {128, 128, 1, 1}},
      {"decoder.up.3.upsample.conv.weight", {128, 128, 3, 3}},
      {"decoder.up.2.block.0.nin_shortcut.weight", {64, 128, 1, 1}},
      {"decoder.up.0.block.0.nin_shortcut.weight", {32, 64, 1, 1}},
      {"decoder.up.0.block.2.norm2.conv_b.bias", {32}},
      {"decoder.norm_out.conv_y.weight", {32, 4, 1, 1}},
      {"decoder.conv_out.weight", {3, 32, 3, 3}},
  };
  for (const auto& [name, shape] : sample) {
    ASSERT_TRUE(s.count(name)) << "missing key " << name;
    EXPECT_EQ(s[name], shape) << name;
  }
  for (const char* absent :
       {"encoder.down.3.downsample.conv.weight", "decoder.up.0.upsample.conv.weight",
        "encoder.down.0.block.0.nin_shortcut.weight", "decoder.up.1.block.0.nin_shortcut.weight",
        "encoder.down.2.attn.0.q.weight", "decoder.up.3.block.3.conv1.weight"})
    EXPECT_FALSE(s.count(absent)) << "unexpected key " << absent;
}

TEST(VqModel, RealConfigCountsWithoutAllocating) {
  EXPECT_EQ(vq::VqModel::count_parameters(real()), 270740287);
  auto keys = vq::VqModel::expected_keys(real());
  EXPECT_EQ(keys.size(), 495u);
  std::map<std::string, Shape> s(keys.begin(), keys.end());
  EXPECT_EQ(s["quantize.embedding.weight"], (Shape{32768, 4}));
  EXPECT_EQ(s["decoder.up.3.block.0.conv1.weight"], (Shape{1024, 1024, 3, 3}));
  EXPECT_EQ(s["encoder.mid.attn_1.q.weight"], (Shape{1024, 1024, 1, 1}));
}

TEST(VqModel, VideoAndImageShapes) {
  manual_seed(1);
  vq::VqModel model(tiny());
  model.eval();
  autograd::NoGradGuard ng;
  Tensor video = rand({2, 4, 3, 32, 32}) * 2.0 - 1.0;
  auto enc = model.encode(video);
  EXPECT_EQ(enc.codes.sizes(), (Shape{2, 1, 4, 4}));
  EXPECT_EQ(enc.codes.dtype(), DType::i64);
  EXPECT_EQ(enc.z.sizes(), (Shape{2, 1, 4, 4, 4}));
  EXPECT_EQ(enc.zq.sizes(), (Shape{2, 1, 4, 4, 4}));
  EXPECT_GE(min(enc.codes).item(), 0);
  EXPECT_LT(max(enc.codes).item(), 1024);
  EXPECT_TRUE(std::isfinite(enc.loss_vq.item()));
  EXPECT_EQ(model.decode_codes(enc.codes).sizes(), (Shape{2, 4, 3, 32, 32}));

  Tensor image = rand({2, 3, 32, 32}) * 2.0 - 1.0;
  auto ienc = model.encode_image(image);
  EXPECT_EQ(ienc.codes.sizes(), (Shape{2, 4, 4}));
  EXPECT_EQ(model.decode_image(ienc.codes).sizes(), (Shape{2, 3, 32, 32}));
}

TEST(VqModel, ImageIsAClipOfFourEqualFrames) {
  manual_seed(7);
  vq::VqModel model(tiny());
  model.eval();
  autograd::NoGradGuard ng;
  Tensor image = rand({1, 3, 16, 16}) * 2.0 - 1.0;
  auto ienc = model.encode_image(image);
  auto venc = model.encode(repeat(image.unsqueeze(1), {1, 4, 1, 1, 1}));
  EXPECT_CLOSE(ienc.codes.reshape({1, 1, 2, 2}).to(DType::f32), venc.codes.to(DType::f32));
  // Decoding image codes gives frame 0 of the clip; decoding codes equals decoding zq.
  Tensor clip = model.decode_codes(venc.codes);
  EXPECT_EQ(clip.sizes(), (Shape{1, 4, 3, 16, 16}));
  EXPECT_CLOSE(model.decode_image(ienc.codes), clip.select(1, 0), 1e-4, 1e-5);
  EXPECT_CLOSE(model.decode_latents(venc.zq), clip, 1e-4, 1e-5);
}

// data.frames: 1 feeds one-frame clips (B, 1, C, H, W): each is the image it holds.
TEST(VqModel, OneFrameClipIsAnImage) {
  manual_seed(8);
  vq::VqModel model(tiny());
  model.eval();
  autograd::NoGradGuard ng;
  Tensor image = rand({2, 3, 16, 16}) * 2.0 - 1.0;
  const std::vector<Tensor> as_image = model.call({image});
  const std::vector<Tensor> as_clip = model.call({image.unsqueeze(1)});
  EXPECT_EQ(as_clip[0].sizes(), (Shape{2, 1, 3, 16, 16}));
  EXPECT_EQ(as_clip[1].sizes(), (Shape{2, 1, 2, 2}));
  EXPECT_CLOSE(as_clip[0], as_image[0].unsqueeze(1), 0, 0);
  EXPECT_CLOSE(as_clip[1].to(DType::f32), as_image[1].unsqueeze(1).to(DType::f32), 0, 0);
}

TEST(VqQuantizer, NearestCodeStraightThroughAndLoss) {
  vq::Quantizer q(3, 2);
  {
    autograd::NoGradGuard ng;
    q.embedding->weight.copy_(from_vector({0, 0, 1, 0, 0, 2}, {3, 2}));
  }
  // z (B=1, T'=1, E=2, h=1, w=2): positions (0.9, 0.1) -> code 1, (0.2, 1.5) -> code 2.
  Tensor z = from_vector({0.9, 0.2, 0.1, 1.5}, {1, 1, 2, 1, 2}).set_requires_grad();
  auto out = q.call({z});
  EXPECT_TRUE(zt::test::values_are(out[1].to(DType::f32), {1, 2}));
  EXPECT_TRUE(zt::test::values_are(out[0], {1, 0, 0, 2}));  // zq = chosen codes, (E, h, w)
  // Both terms have the value mean((zq - z)^2); loss_vq = 1.25 of it.
  double mse = (0.01 + 0.04 + 0.01 + 0.25) / 4;
  EXPECT_NEAR(out[3].item(), mse, 1e-6);
  EXPECT_NEAR(out[4].item(), mse, 1e-6);
  EXPECT_NEAR(out[2].item(), 1.25 * mse, 1e-6);

  // Straight-through: d zq / d z is the identity. The codebook term pulls the used codes
  // with weight 1, the commitment term pulls z with weight 0.25.
  (sum(out[0]) + out[2]).backward();
  std::vector<double> zv = {0.9, 0.2, 0.1, 1.5}, ev = {1, 0, 0, 2};
  std::vector<double> gz, gw = {0, 0, 0, 0, 0, 0};
  for (size_t i = 0; i < 4; ++i) gz.push_back(1.0 + 0.25 * 2.0 * (zv[i] - ev[i]) / 4);
  // code 1 = (1, 0) at position 0 (dims 0 and 2 of z's flat layout); code 2 at position 1.
  gw[2] = 2 * (1 - 0.9) / 4;
  gw[3] = 2 * (0 - 0.1) / 4;
  gw[4] = 2 * (0 - 0.2) / 4;
  gw[5] = 2 * (2 - 1.5) / 4;
  EXPECT_TRUE(zt::test::values_are(z.grad(), gz));
  EXPECT_TRUE(zt::test::values_are(q.embedding->weight.grad(), gw));

  // Lookup of codes (B, T', h, w) gives (B, T', E, h, w).
  Tensor codes = from_vector({2, 0}, {1, 1, 1, 2}, DType::i64);
  EXPECT_TRUE(zt::test::values_are(q.lookup(codes), {0, 0, 2, 0}));
}

// The chosen code is the exact nearest one, as a double-precision search over the same
// values finds it: for latents far from codes that lie close together (the codebook's
// init spread, 1/K), where distances rounded at the scale of |z|^2 would swap near-equal
// codes; and for a bf16 codebook and latents (the search runs in f64, not bf16).
TEST(VqQuantizer, NearestCodeIsExact) {
  auto wrong_ids = [](DType dt, double scale, double offset) {
    manual_seed(5);
    vq::Codebook cb(64, 4);
    cb.to(dt);
    Generator g(6);
    const Tensor z = (randn({512, 4}, g) * scale + offset).to(dt);
    const std::vector<Tensor> out = cb.call({z});
    const std::vector<double> zv = z.to(DType::f64).to_vector(),
                              ev = cb.weight.to(DType::f64).to_vector(),
                              ids = out[0].to(DType::f64).to_vector();
    int wrong = 0;
    for (int m = 0; m < 512; ++m) {
      int best = 0;
      double best_d = 0.0;
      for (int k = 0; k < 64; ++k) {
        double d = 0.0;
        for (int j = 0; j < 4; ++j) {
          const double diff = zv[4 * m + j] - ev[4 * k + j];
          d += diff * diff;
        }
        if (k == 0 || d < best_d) best = k, best_d = d;
      }
      wrong += ids[m] != best;
    }
    return wrong;
  };
  EXPECT_EQ(wrong_ids(DType::f32, 20.0, 200.0), 0) << "of 512 far f32 latents";
  EXPECT_EQ(wrong_ids(DType::bf16, 0.02, 0.0), 0) << "of 512 bf16 latents";
}

TEST(VqTemporal, CausalConvSeesNoFuture) {
  manual_seed(2);
  vq::CausalConv3d conv(2, 3, {3, 3, 3});
  vq::TemporalDownsample down(2, 2);
  vq::TemporalUpsample up(2, 2);
  autograd::NoGradGuard ng;
  Tensor x = randn({1, 2, 4, 5, 5});
  Tensor y = conv(x);
  EXPECT_EQ(y.sizes(), (Shape{1, 3, 4, 5, 5}));
  EXPECT_EQ(down(x).sizes(), (Shape{1, 2, 2, 5, 5}));
  EXPECT_EQ(up(x).sizes(), (Shape{1, 2, 8, 5, 5}));
  // Changing the last frame changes only the last output frame.
  Tensor x2 = x.clone();
  x2.narrow(2, 3, 1).fill_(7.0);
  Tensor y2 = conv(x2);
  EXPECT_CLOSE(y2.narrow(2, 0, 3), y.narrow(2, 0, 3));
  EXPECT_GT(max(abs(y2.narrow(2, 3, 1) - y.narrow(2, 3, 1))).item(), 1e-3);
  // Spatial pad (1, 1) for k 3; stride-1 (3,1,1) keeps every size.
  vq::CausalConv3d tconv(2, 2, {3, 1, 1});
  EXPECT_EQ(tconv(x).sizes(), x.sizes());
}

TEST(VqModel, TrainingStepReachesEveryParameterThroughCall) {
  manual_seed(3);
  auto model_ptr = std::make_shared<vq::VqModel>(tiny());  // named_modules() needs a shared owner
  vq::VqModel& model = *model_ptr;
  // Record which modules holding parameters are entered through call().
  std::set<const nn::Module*> entered;
  for (auto& [name, m] : model.named_modules())
    m->add_forward_pre_hook(
        [&entered](nn::Module& self, std::vector<Tensor>&) { entered.insert(&self); });
  Tensor video = rand({1, 4, 3, 16, 16}) * 2.0 - 1.0;
  auto out = model.forward_train(video);
  EXPECT_EQ(out.recon.sizes(), video.sizes());
  EXPECT_EQ(out.codes.sizes(), (Shape{1, 1, 2, 2}));
  ASSERT_TRUE(std::isfinite(out.loss_vq.item()));
  (mse_loss(out.recon, video) + out.loss_vq).backward();
  for (auto& [name, m] : model.named_modules()) {
    if (!m->local_parameters().empty()) {
      EXPECT_TRUE(entered.count(m.get())) << name << " was not entered through call()";
    }
  }
  for (auto& [name, p] : model.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name << " got no gradient";
    EXPECT_TRUE(std::isfinite(sum(abs(p.grad())).item())) << name;
  }
  // Training mode updated the BatchNorm statistics (one batch tracked).
  for (auto& [name, b] : model.named_buffers()) {
    if (name.find("num_batches_tracked") != std::string::npos) {
      EXPECT_EQ(b.item(), 1) << name;
    }
  }
}

// train.activation_checkpointing's blocks take the quantized latents as a second input
// (the decoder's spatial norms), so the latents' gradient is summed per block before it
// is summed over blocks: the same gradients up to rounding (compared in f64), and the
// BatchNorm statistics move once.
TEST(VqModel, RecomputedBlocksGiveThePlainGradients) {
  std::vector<std::vector<std::pair<std::string, Tensor>>> grads;
  int64_t recomputed = 0;
  std::vector<int64_t> block_calls;  // forward runs of the checkpointed blocks
  for (bool on : {false, true}) {
    manual_seed(3);
    auto model = std::make_shared<vq::VqModel>(tiny());
    model->to(DType::f64);
    int64_t calls = 0;
    for (auto& [name, m] : model->named_modules()) {
      const auto types = vq::recomputed_block_types();
      if (std::find(types.begin(), types.end(), m->type_name()) == types.end()) continue;
      m->add_forward_pre_hook([&calls](nn::Module&, std::vector<Tensor>&) { ++calls; });
      if (on) {
        m->set_checkpointing(true);
        ++recomputed;
      }
    }
    Generator g(4);
    Tensor video = rand({2, 4, 3, 16, 16}, g, DType::f64) * 2.0 - 1.0;
    manual_seed(5);
    auto out = model->forward_train(video);
    (mse_loss(out.recon, video) + out.loss_vq).backward();
    block_calls.push_back(calls);
    grads.emplace_back();
    for (auto& [name, p] : model->named_parameters()) grads.back().emplace_back(name, p.grad());
    for (auto& [name, b] : model->named_buffers()) {
      if (name.find("num_batches_tracked") != std::string::npos) {
        EXPECT_EQ(b.item(), 1) << name;
      }
    }
  }
  EXPECT_GT(recomputed, 10);
  EXPECT_EQ(block_calls[1], 2 * block_calls[0]) << "each block ran again in backward";
  ASSERT_EQ(grads[0].size(), grads[1].size());
  for (size_t i = 0; i < grads[0].size(); ++i)
    EXPECT_CLOSE(grads[1][i].second, grads[0][i].second, 1e-9, 1e-12) << grads[0][i].first;
}

TEST(VqModel, ReleasedInitialization) {
  manual_seed(4);
  vq::VqModel model(tiny());
  auto params = model.named_parameters();
  std::map<std::string, Tensor> p(params.begin(), params.end());
  // Kaiming normal, fan_out, relu gain: std = sqrt(2 / (out * k * k)).
  EXPECT_NEAR(std_of(p["decoder.up.3.block.0.conv1.weight"]), std::sqrt(2.0 / (128 * 9)), 2e-3);
  EXPECT_NEAR(std_of(p["encoder.down.3.attn.0.q.weight"]), std::sqrt(2.0 / 128), 4e-3);
  // Conv biases keep the default U(+-1/sqrt(fan_in)).
  EXPECT_LE(max(abs(p["decoder.up.3.block.0.conv1.bias"])).item(), 1.0 / std::sqrt(128 * 9));
  const double k = 1.0 / 1024;
  EXPECT_LE(max(abs(p["quantize.embedding.weight"])).item(), k);
  EXPECT_GT(max(abs(p["quantize.embedding.weight"])).item(), 0.9 * k);
  EXPECT_TRUE(zt::test::all_close(p["encoder.norm_out.weight"], ones({128})));
  EXPECT_TRUE(zt::test::all_close(p["decoder.time_res_stack.0.norm1.bias"], zeros({4})));
  // Same seed, same draws.
  manual_seed(4);
  vq::ResnetBlock a(32, 64, 0.0, 4);
  manual_seed(4);
  vq::ResnetBlock b(32, 64, 0.0, 4);
  EXPECT_CLOSE(a.conv1->weight, b.conv1->weight, 0, 0);
  EXPECT_CLOSE(a.nin_shortcut->bias, b.nin_shortcut->bias, 0, 0);
}

TEST(VqModel, ActionableErrors) {
  manual_seed(5);
  auto bad = tiny();
  bad.ch = 48;
  EXPECT_TRUE(
      test::throws_with([&] { vq::VqModel{bad}; },
                        "model.ch must be a positive multiple of 32 (GroupNorm(32)), got 48"));
  bad = tiny();
  bad.embed_dim = 8;
  EXPECT_TRUE(
      test::throws_with([&] { vq::VqModel::count_parameters(bad); },
                        "model.embed_dim must equal model.z_channels (> 0), got embed_dim 8"));
  bad = tiny();
  bad.attn_resolutions = {4};
  EXPECT_TRUE(test::throws_with([&] { vq::VqModel{bad}; },
                                "model.attn_resolutions holds level indices in [0, "));

  vq::VqModel model(tiny());
  model.eval();
  autograd::NoGradGuard ng;
  EXPECT_TRUE(test::throws_with(
      [&] {
        model.encode(zeros({1, 3, 3, 16, 16}));
      },
      "T = 3 frames: a clip needs 1 frame (an image) or a multiple of "
      "model.temporal_downsample_factor (4)"));
  // The sizes name the config keys that set them.
  EXPECT_TRUE(test::throws_with(
      [&] {
        model.encode(zeros({1, 4, 3, 12, 16}));
      },
      "H, W = 12, 16 must be multiples of the spatial factor 8 = 2^(len(model.ch_mult) - 1)"));
  EXPECT_TRUE(test::throws_with(
      [&] {
        model.encode(zeros({1, 3, 12, 16}));
      },
      "H, W = 12, 16 must be multiples of the spatial factor 8 = 2^(len(model.ch_mult) - 1)"));
  EXPECT_TRUE(test::throws_with(
      [&] {
        model.encode(zeros({1, 4, 1, 16, 16}));
      },
      "expected video (B, T, 3, H, W), got"));
  EXPECT_TRUE(test::throws_with(
      [&] {
        model.decode_codes(zeros({2, 2}, DType::i64));
      },
      "expected codes (B, T', h, w) or image codes (B, h, w), got"));
}

// An empty batch (no clips, or clips of no frames or no pixels) is refused by encode by
// name, not deep inside the quantizer's nearest-code search ("cat: needs at least one
// tensor") or a convolution's view of the repeated frames.
TEST(VqModel, AnEmptyBatchIsRefusedByName) {
  manual_seed(6);
  vq::VqModel model(tiny());
  model.eval();
  autograd::NoGradGuard ng;
  const std::vector<std::pair<Shape, std::string>> empties = {{{0, 4, 3, 16, 16}, "B = 0"},
                                                              {{0, 3, 16, 16}, "B = 0"},
                                                              {{2, 0, 3, 16, 16}, "T = 0"},
                                                              {{1, 4, 3, 0, 16}, "H = 0"},
                                                              {{1, 3, 16, 0}, "W = 0"}};
  for (const auto& [shape, which] : empties)
    EXPECT_TRUE(test::throws_with(
        [&] { model.encode(zeros(shape)); },
        "VqModel::encode: the batch " + shape_str(shape) + " is empty (" + which + ")"));
  EXPECT_TRUE(test::throws_with(
      [&] {
        model.call({zeros({0, 4, 3, 16, 16})});
      },
      "VqModel::encode: the batch [0, 4, 3, 16, 16] is empty (B = 0)"));
}
