// zt-bench ops: forward and forward+backward time of the ops the tiny Emu3-style
// tokenizer spends its time in, at its shapes (batch 8 x 4 frames of 32x32 = 32 images,
// ch 32, ch_mult [1, 2, 2, 4]; docs/EMU3_TOKENIZER.md), plus a depthwise and a transposed
// convolution at the same sizes. One JSON object per (op, shape):
//   fwd_ms      forward only;  fwd_bwd_ms  forward + backward (median of --reps)
//   gflops      (forward + backward FLOPs) / fwd_bwd time. Convolutions and linear
//               count 2 FLOPs per multiply-add, backward = 2x forward (input and weight
//               gradients). Norms and softmax are memory-bound; they count 8 FLOPs per
//               element forward and 10 backward, and also report gbps, the bytes of the
//               tensors read and written once per pass over the fwd_bwd time.
// Options: --threads N (kernel and BLAS threads), --device cpu|cuda, --reps, --dtype,
// --filter SUBSTRING (only cases whose "op shape" contains it, e.g. "conv2d 32x128").
// A case that fails prints its error in its line ("error"); the others still run, and the
// exit status is then 1.
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "apps/bench/bench.h"
#include "apps/common/cli_checks.h"
#include "apps/common/train_util.h"
#include "core/ops.h"

namespace {

using zt::Device;
using zt::DType;
using zt::Shape;
using zt::Tensor;

struct Setup {
  Device device;
  DType dtype;
  int reps;
  int threads;
};

// One benchmark case: leaves (the inputs and parameters that receive gradients) and the
// forward function producing the output.
struct Case {
  std::string op;
  std::string shape;
  double fwd_flops;
  double bwd_flops;
  double bytes;  // 0 for compute-bound ops
  std::vector<Tensor> leaves;
  std::function<Tensor()> forward;
};

Tensor make_leaf(const Shape& s, const Setup& st, zt::Generator& g, bool grad = true) {
  Tensor t = zt::randn(s, g, st.dtype).to(st.device).detach();
  if (grad) t.set_requires_grad(true);
  return t;
}

// Times one case and prints its line; false when it failed (its line holds the error).
bool run_case(const Case& c, const Setup& st) {
  double fwd = 0, fwd_bwd = 0;
  std::string error;
  try {
    Tensor probe;
    {
      zt::autograd::NoGradGuard ng;
      probe = c.forward();
    }
    zt::Generator g(7);
    Tensor gy = zt::randn(probe.sizes(), g, st.dtype).to(st.device);
    fwd = zt::bench::time_per_call(
        [&] {
          zt::autograd::NoGradGuard ng;
          zt::bench::sync(c.forward());
        },
        2, st.reps);
    fwd_bwd = zt::bench::time_per_call(
        [&] {
          for (const Tensor& l : c.leaves) l.set_grad(Tensor());
          c.forward().backward(gy);
          zt::bench::sync(c.leaves.front().grad());
        },
        2, st.reps);
  } catch (const std::exception& e) {
    error = e.what();
    for (char& ch : error)
      if (ch == '"' || ch == '\\' || ch == '\n') ch = '\'';
  }
  std::printf(
      "{\"bench\":\"ops\",\"op\":\"%s\",\"shape\":\"%s\",\"device\":\"%s\",\"dtype\":\"%s\","
      "\"threads\":%d,%s",
      c.op.c_str(), c.shape.c_str(), st.device.str().c_str(), zt::dtype_name(st.dtype), st.threads,
      zt::bench::gpu_math_json().c_str());
  if (!error.empty()) {
    std::printf(",\"error\":\"%s\"}\n", error.c_str());
  } else {
    std::printf(",\"fwd_ms\":%.4f,\"fwd_bwd_ms\":%.4f,\"gflops\":%.2f", fwd * 1e3, fwd_bwd * 1e3,
                (c.fwd_flops + c.bwd_flops) / fwd_bwd / 1e9);
    if (c.bytes > 0) std::printf(",\"gbps\":%.2f", c.bytes / fwd_bwd / 1e9);
    std::printf("}\n");
  }
  std::fflush(stdout);
  return error.empty();
}

std::string dims(const Shape& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "x" : "") + std::to_string(s[i]);
  return out;
}

std::vector<Case> make_cases(const Setup& st) {
  zt::Generator g(1);
  std::vector<Case> cases;
  const double esz = static_cast<double>(zt::dtype_size(st.dtype));
  // Encoder levels of the default small tokenizer (vqtok-step's): (N, C, H, W) for N = 8
  // clips x 4 frames.
  const std::vector<Shape> levels = {
      {32, 32, 32, 32}, {32, 64, 16, 16}, {32, 64, 8, 8}, {32, 128, 4, 4}};
  for (const Shape& s : levels) {
    const int64_t N = s[0], C = s[1], H = s[2], W = s[3];
    Tensor x = make_leaf(s, st, g), w = make_leaf({C, C, 3, 3}, st, g), b = make_leaf({C}, st, g);
    zt::Conv2dArgs a;
    a.padding = {1, 1, 1, 1};
    double f = 2.0 * N * C * H * W * C * 9;
    cases.push_back(
        {"conv2d", dims(s) + " k3x3 p1 O" + std::to_string(C), f, 2 * f, 0, {x, w, b}, [=] {
           return zt::conv2d(x, w, b, a);
         }});
  }
  {
    // CausalConv3d k=(3,3,3) of the temporal res blocks: (B, z, T, h, w) = (8, 4, 4, 4, 4),
    // time padded 2 in front, 1 on each spatial side.
    Shape s{8, 4, 4, 4, 4};
    Tensor x = make_leaf(s, st, g), w = make_leaf({4, 4, 3, 3, 3}, st, g),
           b = make_leaf({4}, st, g);
    zt::Conv3dArgs a;
    a.padding = {2, 0, 1, 1, 1, 1};
    double f = 2.0 * 8 * 4 * 4 * 4 * 4 * 4 * 27;
    cases.push_back({"conv3d", dims(s) + " k3x3x3 causal O4", f, 2 * f, 0, {x, w, b}, [=] {
                       return zt::conv3d(x, w, b, a);
                     }});
  }
  {
    // A depthwise 7x7 convolution (ConvNeXt's) and a k4 s2 p1 transposed convolution that
    // doubles H and W (a decoder's upsampling), at the 16x16 level.
    Tensor x = make_leaf({32, 64, 16, 16}, st, g), w = make_leaf({64, 1, 7, 7}, st, g),
           b = make_leaf({64}, st, g);
    zt::Conv2dArgs a;
    a.padding = {3, 3, 3, 3};
    a.groups = 64;
    double f = 2.0 * 32 * 64 * 16 * 16 * 49;
    cases.push_back({"conv2d", "32x64x16x16 k7x7 p3 depthwise", f, 2 * f, 0, {x, w, b}, [=] {
                       return zt::conv2d(x, w, b, a);
                     }});
    Tensor xt = make_leaf({32, 64, 8, 8}, st, g), wt = make_leaf({64, 64, 4, 4}, st, g);
    zt::ConvTranspose2dArgs t;
    t.stride = {2, 2};
    t.padding = {1, 1};
    double ft = 2.0 * 32 * 64 * 8 * 8 * 64 * 16;
    cases.push_back(
        {"conv_transpose2d", "32x64x8x8 k4x4 s2 p1 O64", ft, 2 * ft, 0, {xt, wt, b}, [=] {
           return zt::conv_transpose2d(xt, wt, b, t);
         }});
  }
  {
    Tensor x = make_leaf({1024, 512}, st, g), w = make_leaf({512, 512}, st, g),
           b = make_leaf({512}, st, g);
    double f = 2.0 * 1024 * 512 * 512;
    cases.push_back(
        {"linear", "1024x512 -> 512", f, 2 * f, 0, {x, w, b}, [=] { return zt::linear(x, w, b); }});
  }
  auto norm_case = [&](const char* op, const Shape& s,
                       std::function<Tensor(Tensor, Tensor, Tensor)> fn) {
    const int64_t C = s[1];
    const double n = static_cast<double>(zt::shape_numel(s));
    Tensor x = make_leaf(s, st, g), w = make_leaf({C}, st, g), b = make_leaf({C}, st, g);
    // Forward reads x, writes y; backward reads x and dy, writes dx.
    cases.push_back(
        {op, dims(s), 8 * n, 10 * n, 5 * n * esz, {x, w, b}, [=] { return fn(x, w, b); }});
  };
  for (const Shape& s : levels) {
    norm_case("group_norm", s,
              [](Tensor x, Tensor w, Tensor b) { return zt::group_norm(x, 32, w, b, 1e-6); });
  }
  std::vector<Shape> bn_shapes = levels;
  bn_shapes.push_back({8, 4, 4, 4, 4});   // encoder time_res_stack
  bn_shapes.push_back({16, 4, 4, 4, 4});  // decoder: z and quant stacked (2B)
  for (const Shape& s : bn_shapes) {
    const int64_t C = s[1];
    Tensor rm = zt::zeros({C}, st.dtype, st.device), rv = zt::ones({C}, st.dtype, st.device);
    norm_case("batch_norm", s, [rm, rv](Tensor x, Tensor w, Tensor b) {
      return zt::batch_norm(x, rm, rv, w, b, true, 0.1, 1e-5);
    });
  }
  {
    // Attention at the last level: per frame, softmax over the 4x4 = 16 positions.
    Shape s{32, 16, 16};
    const double n = static_cast<double>(zt::shape_numel(s));
    Tensor x = make_leaf(s, st, g);
    cases.push_back({"softmax", dims(s) + " dim -1", 8 * n, 10 * n, 5 * n * esz, {x}, [=] {
                       return zt::softmax(x, -1);
                     }});
  }
  return cases;
}

}  // namespace

ZT_BENCH(ops, "forward/backward time of conv, linear and norm ops at the tokenizer's shapes") {
  zt::bench::Cli app("ops");
  int threads = zt::num_threads(), reps = 5;
  std::string device = "cpu", dtype = "f32", filter;
  app.add_option("--threads", threads, "kernel and BLAS threads (default: all cores)")
      ->check(zt::app::whole_number(1));
  app.add_option("--device", device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--dtype", dtype, "f32 or f64")->check(CLI::IsMember({"f32", "f64"}));
  app.add_option("--reps", reps, "timed repetitions per case (median reported)")
      ->check(zt::app::whole_number(1));
  app.add_option("--filter", filter, "only cases whose \"op shape\" contains this");
  app.add_gpu_math_options();
  if (int rc = 0; !app.parse_args(args, &rc)) return rc;
  Setup st{Device::parse(device), dtype == "f64" ? DType::f64 : DType::f32, reps, threads};
  if (const std::string why = st.device.is_cuda() ? zt::app::cuda_missing() : ""; !why.empty()) {
    std::fprintf(stderr, "zt-bench ops: --device cuda %s\n", why.c_str());
    return 1;
  }
  zt::set_num_threads(st.threads);
  std::vector<Case> cases = make_cases(st);
  std::erase_if(cases, [&](const Case& c) {
    return !filter.empty() && (c.op + " " + c.shape).find(filter) == std::string::npos;
  });
  if (cases.empty()) {
    std::fprintf(stderr,
                 "zt-bench ops: no case matches --filter '%s' (a part of \"op shape\", "
                 "e.g. 'conv2d' or 'linear')\n",
                 filter.c_str());
    return 1;
  }
  // Every case runs; one that failed makes the run fail, so that a script that checks exit
  // codes (tools/gpu_check.sh) does not count it as passed.
  size_t failed = 0;
  for (const Case& c : cases) failed += run_case(c, st) ? 0 : 1;
  if (failed > 0) {
    std::fprintf(stderr, "zt-bench ops: %zu of %zu cases failed (their lines say why)\n", failed,
                 cases.size());
    return 1;
  }
  return 0;
}
