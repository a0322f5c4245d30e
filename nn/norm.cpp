// Normalization layers. BatchNorm's plain path is core's fused batch_norm; with a
// stats_reducer it is composed from differentiable ops over (possibly global) sums:
//   mean = sum / n,  var = sum_sq / n - mean^2  (biased, used to normalize),
//   running_var uses var * n / (n - 1)          (unbiased, as PyTorch).
// E[x^2] - E[x]^2 loses precision when |mean| >> std; it is what synchronized BatchNorm
// implementations do to need only one reduction, and var is clamped at 0.
#include "nn/norm.h"

#include <algorithm>
#include <limits>
#include <sstream>

namespace zt::nn {

BatchNorm::BatchNorm(const BatchNormOptions& opts, int64_t spatial_dims, const char* type_name)
    : UnaryModule(type_name), options(opts), spatial_dims_(spatial_dims) {
  const int64_t c = opts.num_features();
  ZT_CHECK(c > 0, type_name, ": num_features must be positive, got ", c);
  ZT_CHECK(opts.eps() > 0, type_name, ": eps must be positive, got ", opts.eps());
  if (opts.affine()) {
    weight = register_parameter("weight", ones({c}));
    bias = register_parameter("bias", zeros({c}));
  }
  if (opts.track_running_stats()) {
    running_mean = register_buffer("running_mean", zeros({c}));
    running_var = register_buffer("running_var", ones({c}));
    num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, DType::i64));
  }
}

void BatchNorm::reset_running_stats() {
  if (!options.track_running_stats()) return;
  running_mean.fill_(0.0);
  running_var.fill_(1.0);
  num_batches_tracked.fill_(0.0);
}

void BatchNorm::reset_parameters() {
  autograd::NoGradGuard ng;  // in-place writes to parameters that require grad
  reset_running_stats();
  if (options.affine()) {
    weight.fill_(1.0);
    bias.fill_(0.0);
  }
}

std::string BatchNorm::extra_repr() const {
  std::ostringstream os;
  os << options.num_features() << ", eps=" << options.eps() << ", momentum=";
  if (options.momentum())
    os << *options.momentum();
  else
    os << "None";
  os << ", affine=" << (options.affine() ? "true" : "false")
     << ", track_running_stats=" << (options.track_running_stats() ? "true" : "false");
  return os.str();
}

// A checkpoint's recomputation of a training forward has updated them already.
bool BatchNorm::updates_running_stats() const {
  return is_training() && options.track_running_stats() && !autograd::in_recompute();
}

Tensor BatchNorm::forward(const Tensor& x) {
  if (spatial_dims_ == 1) {  // BatchNorm1d: a length dim is optional, as PyTorch's
    ZT_CHECK(x.dim() == 2 || x.dim() == 3, type_name(),
             ": expected a 2-D or 3-D input (N, C) or (N, C, L), got ", shape_str(x.sizes()));
  } else {
    ZT_CHECK(x.dim() == spatial_dims_ + 2, type_name(), ": expected a ", spatial_dims_ + 2,
             "-D input (N, C, ", spatial_dims_ == 3 ? "D, " : "", "H, W), got ",
             shape_str(x.sizes()));
  }
  ZT_CHECK(x.size(1) == options.num_features(), type_name(), ": input ", shape_str(x.sizes()),
           " has ", x.size(1), " channels, expected ", options.num_features());
  const bool track = options.track_running_stats();
  const bool batch_stats = is_training() || !track;
  const bool update = updates_running_stats();
  double factor = 0.0;
  if (update) {
    autograd::NoGradGuard ng;
    if (options.momentum()) {
      // Counted where the counter lives: reading it back would make every training forward
      // on a GPU wait for the device. batch_norm's statistics kernel adds the one; the
      // synchronized statistics' path adds it here (exact in f64).
      if (stats_reducer) num_batches_tracked.copy_(add(num_batches_tracked.to(DType::f64), 1.0));
      factor = *options.momentum();
    } else {  // a cumulative average weighs this batch by 1 / count: read the count
      const double n = num_batches_tracked.item() + 1;
      num_batches_tracked.fill_(n);
      factor = 1.0 / n;
    }
  }
  // Only training statistics are shared: an eval without running statistics normalizes
  // by its own batch (as PyTorch's SyncBatchNorm), so ranks may evaluate unevenly.
  if (is_training() && stats_reducer) return forward_reduced(x, factor);
  return batch_norm(x, (update || !batch_stats) ? running_mean : Tensor(),
                    (update || !batch_stats) ? running_var : Tensor(), weight, bias, batch_stats,
                    factor, options.eps(),
                    update && options.momentum() ? num_batches_tracked : Tensor());
}

Tensor BatchNorm::forward_reduced(const Tensor& input, double factor) {
  // The statistics are sums of x and x^2 in f64 (what the reducer adds up over ranks): in
  // one pass, E[x^2] - E[x]^2 in f32 (or bf16) cancels away the variance of a channel whose
  // mean is large beside its spread. The affine runs in f32 for 16-bit inputs.
  const DType io = input.dtype();
  const bool narrow = is_16bit_float(io);
  const DType affine = narrow ? DType::f32 : io;
  const Tensor x64 = input.to(DType::f64);
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < input.dim(); ++d) dims.push_back(d);
  BatchNormStats local;
  local.sum = sum(x64, dims);
  local.sum_sq = sum(mul(x64, x64), dims);
  local.count = static_cast<double>(input.numel() / input.size(1));
  BatchNormStats global = stats_reducer(local);
  const int64_t c = options.num_features();
  ZT_CHECK(global.sum.defined() && global.sum_sq.defined() && global.sum.numel() == c &&
               global.sum_sq.numel() == c,
           type_name(), ": stats_reducer must return sum and sum_sq of ", c, " elements");
  // A batch empty on every rank (count 0) is taken, as PyTorch's: its output is empty and
  // it leaves the running statistics (its mean and variance read 0, not 0 / 0).
  ZT_CHECK(global.count != 1 || !is_training(), type_name(),
           ": expected more than 1 value per channel when training, got ", global.count,
           " (use a larger batch or eval())");
  const double inv_count = global.count > 0 ? 1.0 / global.count : 0.0;
  Tensor mean = mul(global.sum, inv_count);
  Tensor var = clamp(sub(mul(global.sum_sq, inv_count), mul(mean, mean)), 0.0,
                     std::numeric_limits<double>::infinity());
  if (updates_running_stats() && global.count > 0) {
    autograd::NoGradGuard ng;
    // In f64 and rounded once into the buffers' dtype, as batch_norm's fused update: in a
    // bf16 (or f32) buffer each multiply and the add would round on their own.
    const double n = global.count, unbias = n / (n - 1);
    running_mean.copy_(
        add(mul(running_mean.to(DType::f64), 1.0 - factor), mul(mean.detach(), factor)));
    running_var.copy_(
        add(mul(running_var.to(DType::f64), 1.0 - factor), mul(var.detach(), factor * unbias)));
  }
  Shape bshape(input.dim(), 1);
  bshape[1] = c;
  // Centered in f64 too: x - mean rounded to f32 would be off by ulp(mean) / std.
  Tensor y = mul(sub(x64, mean.reshape(bshape)), rsqrt(add(var, options.eps())).reshape(bshape))
                 .to(affine);
  if (weight.defined())
    y = add(mul(y, weight.reshape(bshape).to(y.dtype())), bias.reshape(bshape).to(y.dtype()));
  return narrow ? y.to(io) : y;
}

GroupNorm::GroupNorm(const GroupNormOptions& opts) : UnaryModule("GroupNorm"), options(opts) {
  ZT_CHECK(opts.num_groups() > 0 && opts.num_channels() > 0 &&
               opts.num_channels() % opts.num_groups() == 0,
           "GroupNorm: num_channels (", opts.num_channels(),
           ") must be a positive multiple of num_groups (", opts.num_groups(), ")");
  if (opts.affine()) {
    weight = register_parameter("weight", ones({opts.num_channels()}));
    bias = register_parameter("bias", zeros({opts.num_channels()}));
  }
}

std::string GroupNorm::extra_repr() const {
  std::ostringstream os;
  os << options.num_groups() << ", " << options.num_channels() << ", eps=" << options.eps()
     << ", affine=" << (options.affine() ? "true" : "false");
  if (options.silu()) os << ", silu";
  return os.str();
}

Tensor GroupNorm::forward(const Tensor& x) {
  return forward(std::vector<Tensor>{x})[0];
}

std::vector<Tensor> GroupNorm::forward(const std::vector<Tensor>& inputs) {
  ZT_CHECK(inputs.size() == 1 || inputs.size() == 3,
           "GroupNorm takes {x} or {x, scale, shift}, got ", inputs.size(), " inputs");
  const Tensor& x = inputs[0];
  ZT_CHECK(x.dim() >= 2 && x.size(1) == options.num_channels(), "GroupNorm: input ",
           shape_str(x.sizes()), " must be (N, ", options.num_channels(), ", *)");
  GroupNormEpilogue epilogue;
  epilogue.silu = options.silu();
  if (inputs.size() == 3) {
    epilogue.scale = inputs[1];
    epilogue.shift = inputs[2];
  }
  return {group_norm(x, options.num_groups(), weight, bias, options.eps(), epilogue)};
}

InstanceNorm::InstanceNorm(const InstanceNormOptions& opts, int64_t spatial_dims,
                           const char* type_name)
    : UnaryModule(type_name), options(opts), spatial_dims_(spatial_dims) {
  ZT_CHECK(opts.num_features() > 0, type_name, ": num_features must be positive, got ",
           opts.num_features());
  ZT_CHECK(!opts.track_running_stats(), type_name,
           ": track_running_stats=true is not supported; each sample is normalized by its own "
           "statistics (PyTorch's default)");
  if (opts.affine()) {
    weight = register_parameter("weight", ones({opts.num_features()}));
    bias = register_parameter("bias", zeros({opts.num_features()}));
  }
}

std::string InstanceNorm::extra_repr() const {
  std::ostringstream os;
  os << options.num_features() << ", eps=" << options.eps()
     << ", affine=" << (options.affine() ? "true" : "false");
  return os.str();
}

Tensor InstanceNorm::forward(const Tensor& x) {
  const int64_t c = options.num_features();
  ZT_CHECK(x.dim() == spatial_dims_ + 2 && x.size(1) == c, type_name(), ": input ",
           shape_str(x.sizes()), " must be (N, ", c, ", ", spatial_dims_ == 1 ? "L" : "",
           spatial_dims_ == 2 ? "H, W" : "", spatial_dims_ == 3 ? "D, H, W" : "", ")");
  // As PyTorch: one element per channel has no variance to normalize by.
  ZT_CHECK(x.numel() == 0 || x.numel() / (x.size(0) * c) > 1, type_name(),
           ": expected more than one spatial element per channel, got input ",
           shape_str(x.sizes()));
  return group_norm(x, c, weight, bias, options.eps());
}

// Every size positive: a negative pair multiplies to a positive numel, and a layer
// without affine parameters would be built that no input can pass.
static void check_normalized_shape(const char* type, const Shape& ns) {
  ZT_CHECK(!ns.empty() && std::all_of(ns.begin(), ns.end(), [](int64_t d) { return d > 0; }), type,
           ": normalized_shape must be non-empty with positive sizes, got ", shape_str(ns));
}

static void check_trailing(const char* type, const Tensor& x, const Shape& ns) {
  bool ok = x.dim() >= static_cast<int64_t>(ns.size());
  for (size_t i = 0; ok && i < ns.size(); ++i)
    ok = x.size(x.dim() - static_cast<int64_t>(ns.size()) + static_cast<int64_t>(i)) == ns[i];
  ZT_CHECK(ok, type, ": input ", shape_str(x.sizes()), " must end in normalized_shape ",
           shape_str(ns));
}

LayerNorm::LayerNorm(const LayerNormOptions& opts) : UnaryModule("LayerNorm"), options(opts) {
  check_normalized_shape("LayerNorm", opts.normalized_shape());
  if (opts.elementwise_affine()) {
    weight = register_parameter("weight", ones(opts.normalized_shape()));
    if (opts.bias()) bias = register_parameter("bias", zeros(opts.normalized_shape()));
  }
}

std::string LayerNorm::extra_repr() const {
  std::ostringstream os;
  os << shape_str(options.normalized_shape()) << ", eps=" << options.eps()
     << ", elementwise_affine=" << (options.elementwise_affine() ? "true" : "false");
  return os.str();
}

Tensor LayerNorm::forward(const Tensor& x) {
  check_trailing("LayerNorm", x, options.normalized_shape());
  return layer_norm(x, options.normalized_shape(), weight, bias, options.eps());
}

RMSNorm::RMSNorm(const RMSNormOptions& opts) : UnaryModule("RMSNorm"), options(opts) {
  check_normalized_shape("RMSNorm", opts.normalized_shape());
  if (opts.elementwise_affine())
    weight = register_parameter("weight", ones(opts.normalized_shape()));
}

std::string RMSNorm::extra_repr() const {
  std::ostringstream os;
  os << shape_str(options.normalized_shape()) << ", eps=";
  if (options.eps())
    os << *options.eps();
  else
    os << "None";
  os << ", elementwise_affine=" << (options.elementwise_affine() ? "true" : "false");
  return os.str();
}

Tensor RMSNorm::forward(const Tensor& x) {
  check_trailing("RMSNorm", x, options.normalized_shape());
  // The default eps is that of the dtype it normalizes in: f32 for 16-bit inputs.
  const DType computes_in = is_16bit_float(x.dtype()) ? DType::f32 : x.dtype();
  return rms_norm(x, options.normalized_shape(), weight,
                  options.eps().value_or(machine_epsilon(computes_in)));
}

}  // namespace zt::nn
