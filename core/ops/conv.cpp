// conv2d / conv3d: argument checks, output allocation and autograd. Both run the 3-D
// kernel of the tensors' device (core/cpu/conv.cpp, or cuDNN through core/cuda/conv.cu);
// a 2-D conv is a 3-D one with depth 1. cuDNN pads symmetrically, so on the GPU an
// asymmetric padding that changes the output size is applied with pad() first.
// Legend: N batch, C in channels, O out channels, D/H/W spatial sizes, k kernel sizes.
#include "core/ops/conv.h"

#include "core/autograd.h"
#include "core/ops.h"
#include "core/ops/dispatch.h"

namespace zt {

namespace {

// Output size along one axis; error naming the op and the axis when the padded input
// is smaller than the kernel.
int64_t out_size(const char* op, const char* axis, int64_t in, int64_t k, int64_t s, int64_t p0,
                 int64_t p1, const Tensor& x, const Tensor& w) {
  ZT_CHECK(k >= 1, op, ": kernel size along ", axis, " must be >= 1; weight ",
           shape_str(w.sizes()));
  ZT_CHECK(s >= 1, op, ": stride along ", axis, " must be >= 1, got ", s);
  ZT_CHECK(p0 >= 0 && p1 >= 0, op, ": padding along ", axis, " must be >= 0, got (", p0, ", ", p1,
           "); crop with narrow() first");
  ZT_CHECK(in + p0 + p1 >= k, op, ": padded input ", axis, " (", in, " + ", p0, " + ", p1,
           ") is smaller than the kernel (", k, "); input ", shape_str(x.sizes()), ", weight ",
           shape_str(w.sizes()));
  return (in + p0 + p1 - k) / s + 1;
}

void check_conv_inputs(const char* op, int64_t spatial, const Tensor& x, const Tensor& weight,
                       const Tensor& bias) {
  ZT_CHECK(x.defined() && weight.defined(), op, ": input and weight must be defined");
  detail::check_same(op, {x, weight, bias});
  const int64_t nd = spatial + 2;
  ZT_CHECK(x.dim() == nd, op, ": input must be ", nd, "-D (N, C, ",
           spatial == 2 ? "H, W" : "D, H, W", "), got ", shape_str(x.sizes()));
  ZT_CHECK(weight.dim() == nd, op, ": weight must be ", nd, "-D (O, C, ",
           spatial == 2 ? "kh, kw" : "kd, kh, kw", "), got ", shape_str(weight.sizes()));
  ZT_CHECK(x.size(1) == weight.size(1), op, ": input has ", x.size(1),
           " channels but weight expects ", weight.size(1), " (input ", shape_str(x.sizes()),
           ", weight ", shape_str(weight.sizes()), ")");
  ZT_CHECK(x.size(1) >= 1 && weight.size(0) >= 1, op,
           ": need at least one input and output "
           "channel, got input ",
           shape_str(x.sizes()), ", weight ", shape_str(weight.sizes()));
  ZT_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == weight.size(0)), op, ": bias ",
           shape_str(bias.defined() ? bias.sizes() : Shape{}), " must be (", weight.size(0),
           ") to match weight ", shape_str(weight.sizes()));
  if (x.device().is_cuda()) {
    ZT_CHECK(is_floating(x.dtype()), op, ": supports f32, f64, bf16 and f16 on CUDA, got ",
             dtype_name(x.dtype()));
    return;
  }
  ZT_CHECK(is_floating(x.dtype()), op, ": supports f32, f64, bf16 and f16 on CPU, got ",
           dtype_name(x.dtype()));
  ZT_CHECK(x.device().is_cpu(), op, ": no kernel for ", x.device().str(),
           " yet; move the tensors to the CPU");
}

// CUDA only: padding (before, after) per spatial axis (D, H, W order) that cuDNN's
// symmetric padding cannot express is applied to x with pad() (differentiable), leaving
// `pads` symmetric. Keeps the front pad where the back pad does not change the output
// size (the extra zeros are never read). Returns x itself when nothing is needed.
Tensor pad_for_symmetric(const Tensor& x, const Tensor& w, int64_t spatial, const int64_t* strides,
                         int64_t* pads) {
  std::vector<int64_t> extra;  // pad()'s order: last dim first
  bool any = false;
  for (int64_t a = spatial - 1; a >= 0; --a) {
    int64_t in = x.size(2 + a), k = w.size(2 + a), s = strides[a];
    int64_t& p0 = pads[2 * a];
    int64_t& p1 = pads[2 * a + 1];
    int64_t e0 = 0, e1 = 0;
    const bool same_out = in + 2 * p0 >= k && (in + 2 * p0 - k) / s == (in + p0 + p1 - k) / s;
    if (in + p0 + p1 >= k && !same_out) {
      int64_t common = std::min(p0, p1);
      e0 = p0 - common;
      e1 = p1 - common;
      p0 = p1 = common;
    } else {
      p1 = p0;
    }
    extra.push_back(e0);
    extra.push_back(e1);
    any = any || e0 > 0 || e1 > 0;
  }
  return any ? pad(x, extra) : x;
}

// The CPU kernels compute in f32 or f64: 16-bit tensors (mixed precision) are converted
// to f32 for the kernel (f32 accumulation, as on GPUs) and the results back.
bool cpu_low_precision(const Tensor& t) {
  return t.device().is_cpu() && is_16bit_float(t.dtype());
}
Tensor kernel_operand(const Tensor& t) {
  Tensor c = t.detach().contiguous();
  return cpu_low_precision(c) ? c.to(DType::f32) : c;
}
Tensor kernel_result(const Shape& sizes, const Tensor& like) {
  return Tensor::empty(sizes, cpu_low_precision(like) ? DType::f32 : like.dtype(), like.device());
}
Tensor from_kernel(const Tensor& r, const Tensor& like) {
  return r.defined() && r.dtype() != like.dtype() ? r.to(like.dtype()) : r;
}

// Shared forward + autograd for both ranks; `g` is complete, `out_shape` its output.
Tensor conv_apply(const char* op, const ConvGeometry& g, const Shape& out_shape, const Tensor& x,
                  const Tensor& weight, const Tensor& bias) {
  Tensor xc = kernel_operand(x);
  Tensor wc = kernel_operand(weight);
  Tensor bc = bias.defined() ? kernel_operand(bias) : Tensor();
  Tensor out = kernel_result(out_shape, x);
  ZT_DISPATCH(x.device(), conv_forward, g, out, xc, wc, bc);
  out = from_kernel(out, x);
  if (autograd::needs_grad({x, weight, bias})) {
    const bool gx = x.requires_grad(), gw = weight.requires_grad();
    const bool gb = bias.defined() && bias.requires_grad();
    // Save x and weight themselves (not views or copies): a ZeRO engine swaps the
    // weight's storage between forward and backward, so read it only here.
    autograd::record(op, {x, weight, bias}, {out},
                     [g, x, weight, gx, gw, gb](const std::vector<Tensor>& grads) {
                       if (!grads[0].defined()) return std::vector<Tensor>(3);
                       Tensor go = kernel_operand(grads[0]);
                       Tensor xd = kernel_operand(x);
                       Tensor wd = kernel_operand(weight);
                       Tensor dx = gx ? kernel_result(xd.sizes(), x) : Tensor();
                       Tensor dw = gw ? kernel_result(wd.sizes(), weight) : Tensor();
                       Tensor db = gb ? kernel_result({g.o}, weight) : Tensor();
                       ZT_DISPATCH(xd.device(), conv_backward, g, go, xd, wd, dx, dw, db);
                       return std::vector<Tensor>{from_kernel(dx, x), from_kernel(dw, weight),
                                                  from_kernel(db, weight)};
                     },
                     {x, weight});
  }
  return out;
}

// The geometry of a convolution over `dims` (2 or 3) spatial axes; a 2-D one has
// D = kd = 1. stride has one entry per axis, padding two (front, back) per axis.
ConvGeometry conv_geometry(const char* op, int dims, const Tensor& x, const Tensor& weight,
                           const int64_t* stride, const int64_t* padding) {
  ConvGeometry g;
  g.n = x.size(0);
  g.c = x.size(1);
  g.o = weight.size(0);
  int64_t* in[3] = {&g.d, &g.h, &g.w};
  int64_t* kernel[3] = {&g.kd, &g.kh, &g.kw};
  int64_t* step[3] = {&g.sd, &g.sh, &g.sw};
  int64_t* pad[3] = {&g.pad_d, &g.pad_h, &g.pad_w};
  int64_t* out[3] = {&g.od, &g.oh, &g.ow};
  const char* names[3] = {"D", "H", "W"};
  for (int i = 0; i < dims; ++i) {
    const int a = 3 - dims + i;
    *in[a] = x.size(2 + i);
    *kernel[a] = weight.size(2 + i);
    *step[a] = stride[i];
    *pad[a] = padding[2 * i];
    *out[a] = out_size(op, names[a], *in[a], *kernel[a], stride[i], padding[2 * i],
                       padding[2 * i + 1], x, weight);
  }
  return g;
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv2dArgs& args) {
  check_conv_inputs("conv2d", 2, x, weight, bias);
  if (x.device().is_cuda()) {
    Conv2dArgs sym = args;
    Tensor xp = pad_for_symmetric(x, weight, 2, sym.stride.data(), sym.padding.data());
    if (!xp.same(x)) return conv2d(xp, weight, bias, sym);
  }
  const ConvGeometry g =
      conv_geometry("conv2d", 2, x, weight, args.stride.data(), args.padding.data());
  return conv_apply("conv2d", g, {g.n, g.o, g.oh, g.ow}, x, weight, bias);
}

Tensor conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv3dArgs& args) {
  check_conv_inputs("conv3d", 3, x, weight, bias);
  if (x.device().is_cuda()) {
    Conv3dArgs sym = args;
    Tensor xp = pad_for_symmetric(x, weight, 3, sym.stride.data(), sym.padding.data());
    if (!xp.same(x)) return conv3d(xp, weight, bias, sym);
  }
  const ConvGeometry g =
      conv_geometry("conv3d", 3, x, weight, args.stride.data(), args.padding.data());
  return conv_apply("conv3d", g, {g.n, g.o, g.od, g.oh, g.ow}, x, weight, bias);
}

}  // namespace zt
