// The tokenizer's gradients against central finite differences, in f64, in training mode
// (BatchNorm on batch statistics). The straight-through estimator is a surrogate, not the
// derivative of the reconstruction (the codes are piecewise constant in the encoder's
// output), and the VQ loss stops gradients by design; so each part is checked through a
// loss that is differentiable where it is checked:
//   - the encoder and quant_conv through a fixed linear function of the latents z;
//   - the decoder and post_quant_conv through the reconstruction error of fixed latents
//     (and the latents' own gradient: the SpatialNorm conditioning and the stacked batch);
//   - the codebook through loss_codebook, mean((zq - stopgrad(z))^2), with cosine codes
//     (the rows' normalization is in its gradient).
// A few elements of one tensor of each kind of layer are checked, so a wrong backward of
// any layer the model uses shows.
#include <cmath>
#include <functional>
#include <map>

#include "apps/vqtok/model/vq_model.h"
#include "common/test_util.h"

using namespace zt;

namespace {

// Small enough to run the many forwards quickly; every kind of layer is still there
// (attention at level 1, a channel change, both temporal layers, SpatialNorm).
config::ModelConfig small_config() {
  config::ModelConfig c;
  c.codebook_size = 16;
  c.ch_mult = {1, 2};
  c.num_res_blocks = 1;
  c.attn_resolutions = {1};
  c.temporal_downsample_factor = 2;
  return c;
}

// Compares t's gradient (from `backward`, run once) with central differences of `loss` at
// `count` spread elements of t.
void expect_fd_gradient(const std::string& name, const Tensor& t,
                        const std::function<Tensor()>& loss, int64_t count = 3) {
  ASSERT_TRUE(t.grad().defined()) << name << " got no gradient";
  const Tensor grad = t.grad().contiguous();
  const double eps = 1e-6;
  const int64_t n = t.numel();
  Tensor flat = t.detach().view({n});  // t's storage: contiguous parameters and inputs
  for (int64_t k = 0; k < count; ++k) {
    const int64_t i = (k * 7919 + 13) % n;
    autograd::NoGradGuard ng;
    const double v = flat.select(0, i).item();
    flat.select(0, i).fill_(v + eps);
    const double up = loss().item();
    flat.select(0, i).fill_(v - eps);
    const double down = loss().item();
    flat.select(0, i).fill_(v);
    const double fd = (up - down) / (2 * eps);
    const double analytic = grad.view({n}).select(0, i).item();
    EXPECT_NEAR(analytic, fd, 1e-7 + 1e-5 * std::abs(fd)) << name << " element " << i;
  }
}

std::map<std::string, Tensor> params_of(vq::VqModel& m) {
  auto p = m.named_parameters();
  return {p.begin(), p.end()};
}

}  // namespace

TEST(VqModelGrad, EncoderMatchesFiniteDifferences) {
  manual_seed(21);
  vq::VqModel model(small_config());
  model.to(DType::f64);
  model.train();
  Generator g(22);
  const Tensor video = rand({2, 2, 3, 8, 8}, g, DType::f64) * 2.0 - 1.0;
  const Tensor r = randn({2, 1, 4, 4, 4}, g, DType::f64);  // z: (B, T', E, h, w)
  auto loss = [&] { return sum(model.encode(video).z * r); };
  loss().backward();
  auto p = params_of(model);
  for (const char* name :
       {"encoder.conv_in.weight", "encoder.down.0.block.0.norm1.weight",
        "encoder.down.0.block.0.conv2.weight", "encoder.down.0.downsample.conv.weight",
        "encoder.down.1.block.0.nin_shortcut.weight", "encoder.down.1.attn.0.norm.bias",
        "encoder.down.1.attn.0.q.weight", "encoder.down.1.attn.0.v.bias",
        "encoder.mid.attn_1.proj_out.weight", "encoder.norm_out.weight", "encoder.conv_out.bias",
        "encoder.time_conv.0.conv.conv.weight", "encoder.time_res_stack.0.norm1.weight",
        "encoder.time_res_stack.0.conv2.conv.weight", "quant_conv.conv.weight"}) {
    ASSERT_TRUE(p.count(name)) << name;
    expect_fd_gradient(name, p[name], loss);
  }
}

TEST(VqModelGrad, DecoderMatchesFiniteDifferences) {
  manual_seed(23);
  vq::VqModel model(small_config());
  model.to(DType::f64);
  model.train();
  Generator g(24);
  const Tensor zq = randn({2, 1, 4, 4, 4}, g, DType::f64).set_requires_grad();
  const Tensor target = rand({2, 2, 3, 8, 8}, g, DType::f64) * 2.0 - 1.0;
  auto loss = [&] { return mse_loss(model.decode_latents(zq), target); };
  loss().backward();
  auto p = params_of(model);
  for (const char* name :
       {"post_quant_conv.conv.weight", "decoder.time_res_stack.0.norm2.bias",
        "decoder.time_res_stack.0.conv1.conv.weight", "decoder.time_conv.0.conv.conv.bias",
        "decoder.conv_in.weight", "decoder.mid.block_1.norm1.conv_y.weight",
        "decoder.mid.block_1.norm1.norm_layer.weight", "decoder.mid.attn_1.norm.conv_b.bias",
        "decoder.mid.attn_1.k.weight", "decoder.up.1.attn.0.proj_out.weight",
        "decoder.up.1.upsample.conv.weight", "decoder.up.0.block.0.nin_shortcut.weight",
        "decoder.up.0.block.1.conv2.weight", "decoder.norm_out.conv_y.bias",
        "decoder.conv_out.weight"}) {
    ASSERT_TRUE(p.count(name)) << name;
    expect_fd_gradient(name, p[name], loss);
  }
  expect_fd_gradient("zq", zq, loss, 6);
}

TEST(VqModelGrad, CosineCodebookMatchesFiniteDifferences) {
  manual_seed(25);
  config::ModelConfig c = small_config();
  c.l2_norm_codes = true;
  vq::VqModel model(c);
  model.to(DType::f64);
  Generator g(26);
  {
    autograd::NoGradGuard ng;  // rows of different lengths, so the normalization matters
    model.quantize->embedding->weight.copy_(randn({16, 4}, g, DType::f64));
  }
  const Tensor z = randn({2, 1, 4, 4, 4}, g, DType::f64);
  auto loss = [&] { return model.quantize->call({z})[4]; };  // loss_codebook
  loss().backward();
  expect_fd_gradient("quantize.embedding.weight", model.quantize->embedding->weight, loss, 12);
}
