// zt-bench attention: the fused attention kernels (core/cuda/flash_tiles.h) at every tile
// shape they are built with (flash::tile_shapes), by default at GPT-2 small's attention
// (batch 8, 12 heads, 1024 tokens, head dim 64, causal, bf16). One JSON object per pass and
// shape: the forward under each forward shape (the backward at its default), then the
// backward (dq and dk / dv) under each backward shape (the forward at its default), split
// ("backward") and atomic ("backward_atomic", flash::Backward::atomic):
//   ms        median time of the pass (backward: forward + backward minus forward)
//   tflops    the pass's FLOPs per second, counted as FlashAttention counts them: forward
//             4 B H Tq Tk D (q k^T and p v), backward 2.5x that (five products; zt's
//             split backward computes seven), half of each under the causal mask
//   rel_err   output (forward) or the largest of dq, dk, dv (backward) against the
//             default shape's (split), relative in the 2-norm: 0 where the bits are kept;
//             against a reference of zeros alone (dq and dk of one causal token, whose
//             softmax is 1 whatever q and k), the difference's own 2-norm
// A number that is not finite prints as null, and so do the tflops of a pass timed at 0 ms
// or less (a backward's time is a difference of two): every line is JSON.
// The last line names the fastest forward and backward shapes. On the CPU the kernels run
// on their warp emulation (core/cpu/flash_host.h): a check that every shape runs, not a
// speed; use a small --batch/--heads/--seq there.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "apps/bench/bench.h"
#include "apps/common/cli_checks.h"
#include "apps/common/train_util.h"
#include "core/cuda/flash_shapes.h"
#include "core/ops.h"

namespace {

using namespace zt;

struct Run {
  Tensor out, dq, dk, dv;
};

// |a - b| / |b| in the 2-norm; |a - b| where b is all zeros (0 when a is too).
double relative_error(const Tensor& a, const Tensor& b) {
  const Tensor a64 = a.to(Device::cpu()).to(DType::f64), b64 = b.to(Device::cpu()).to(DType::f64);
  const double diff = sum_squares(sub(a64, b64)).item(), ref = sum_squares(b64).item();
  return std::sqrt(ref > 0 ? diff / ref : diff);
}

// `v` as a JSON number in printf's `format`, or null when it is not finite.
std::string json_number(const char* format, double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

}  // namespace

ZT_BENCH(attention, "fused attention kernels at every tile shape: ms and TFLOP/s per pass") {
  bench::Cli app("attention");
  int64_t batch = 8, heads = 12, seq = 1024, dim = 64;
  int reps = 20;
  bool causal = true;
  std::string device_name = "cuda", dtype_name_ = "bf16";
  app.add_option("--device", device_name, "cuda (or cpu: the kernels' warp emulation)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--dtype", dtype_name_, "bf16 or f16")->check(CLI::IsMember({"bf16", "f16"}));
  app.add_option("--batch", batch, "batch size")->check(zt::app::whole_number(1));
  app.add_option("--heads", heads, "heads")->check(zt::app::whole_number(1));
  app.add_option("--seq", seq, "tokens (queries and keys)")->check(zt::app::whole_number(1));
  app.add_option("--dim", dim, "head dim: 32, 64, 96 or 128")
      ->check(CLI::IsMember({32, 64, 96, 128}));
  app.add_option("--causal", causal, "causal mask (true or false)");
  app.add_option("--reps", reps, "timed repetitions per shape (median reported)")
      ->check(zt::app::whole_number(1));
  if (int rc = 0; !app.parse_args(args, &rc)) return rc;
  const Device device = Device::parse(device_name);
  if (const std::string why = device.is_cuda() ? zt::app::cuda_missing() : ""; !why.empty()) {
    std::fprintf(stderr, "zt-bench attention: --device cuda %s\n", why.c_str());
    return 1;
  }
  const DType dt = dtype_name_ == "bf16" ? DType::bf16 : DType::f16;
  Generator g(1);
  auto leaf = [&] {
    Tensor t = randn({batch, heads, seq, dim}, g, DType::f32).to(dt).to(device).detach();
    t.set_requires_grad(true);
    return t;
  };
  const Tensor q = leaf(), k = leaf(), v = leaf();
  const Tensor up = randn({batch, heads, seq, dim}, g, DType::f32).to(dt).to(device);
  set_attention_kernel(AttentionKernel::flash);
  auto forward = [&] { return scaled_dot_product_attention(q, k, v, causal); };
  auto step = [&] {
    for (const Tensor& t : {q, k, v}) t.set_grad(Tensor());
    Tensor out = forward();
    out.backward(up);
    return Run{out.detach(), q.grad(), k.grad(), v.grad()};
  };
  const double fwd_flops = 4.0 * static_cast<double>(batch * heads * seq) *
                           static_cast<double>(seq * dim) * (causal ? 0.5 : 1.0);
  auto time_forward = [&] {
    return bench::time_per_call(
        [&] {
          autograd::NoGradGuard ng;
          bench::sync(forward());
        },
        2, reps);
  };
  auto time_backward = [&] {
    const double both = bench::time_per_call([&] { bench::sync(step().dv); }, 2, reps);
    return both - time_forward();
  };
  auto print = [&](const char* pass, const flash::TileShape& s, bool is_default, double sec,
                   double flops, double err) {
    std::printf(
        "{\"bench\":\"attention\",\"device\":\"%s\",\"dtype\":\"%s\",\"batch\":%lld,"
        "\"heads\":%lld,\"seq\":%lld,\"dim\":%lld,\"causal\":%s,\"pass\":\"%s\",\"tiles\":\"%s\","
        "\"default\":%s,\"ms\":%s,\"tflops\":%s,\"rel_err\":%s}\n",
        device.str().c_str(), dtype_name_.c_str(), static_cast<long long>(batch),
        static_cast<long long>(heads), static_cast<long long>(seq), static_cast<long long>(dim),
        causal ? "true" : "false", pass, s.str().c_str(), is_default ? "true" : "false",
        json_number("%.4f", sec * 1e3).c_str(),
        json_number("%.4g", sec > 0 ? flops / sec / 1e12 : NAN).c_str(),
        json_number("%.3g", err).c_str());
    std::fflush(stdout);
  };
  using flash::Pass;
  const flash::Backward way = flash::backward();
  flash::set_backward(flash::Backward::split);
  const Run base = step();
  std::string best_forward, best_backward;
  double best_forward_s = INFINITY, best_backward_s = INFINITY;
  const std::vector<flash::TileShape> forward_shapes = flash::tile_shapes(Pass::forward, dim);
  for (const flash::TileShape& s : forward_shapes) {
    flash::set_tile_shape(Pass::forward, s);
    const double err = relative_error(step().out, base.out), sec = time_forward();
    print("forward", s, s == forward_shapes.front(), sec, fwd_flops, err);
    if (sec < best_forward_s) best_forward_s = sec, best_forward = s.str();
  }
  flash::set_tile_shape(Pass::forward, {});
  const std::vector<flash::TileShape> backward_shapes = flash::tile_shapes(Pass::dq, dim);
  for (flash::Backward b : {flash::Backward::split, flash::Backward::atomic}) {
    flash::set_backward(b);
    const std::string pass = b == flash::Backward::split ? "backward" : "backward_atomic";
    for (const flash::TileShape& s : backward_shapes) {
      flash::set_tile_shape(Pass::dq, s);
      flash::set_tile_shape(Pass::dkdv, s);
      const Run r = step();
      const double err = std::max({relative_error(r.dq, base.dq), relative_error(r.dk, base.dk),
                                   relative_error(r.dv, base.dv)});
      const double sec = time_backward();
      print(pass.c_str(), s, s == backward_shapes.front(), sec, 2.5 * fwd_flops, err);
      if (sec < best_backward_s) best_backward_s = sec, best_backward = pass + " " + s.str();
    }
  }
  flash::set_backward(way);
  flash::set_tile_shape(Pass::dq, {});
  flash::set_tile_shape(Pass::dkdv, {});
  std::printf("{\"bench\":\"attention\",\"fastest_forward\":\"%s\",\"fastest_backward\":\"%s\"}\n",
              best_forward.c_str(), best_backward.c_str());
  return 0;
}
