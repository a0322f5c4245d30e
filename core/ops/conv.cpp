// conv1d / conv2d / conv3d and their transposes: argument checks, output allocation and
// autograd. All run the 3-D kernels of the tensors' device (core/cpu/conv.cpp, or cuDNN
// through core/cuda/conv.cu); a 2-D conv is a 3-D one with depth 1 (a 1-D one also has height 1),
// and a transposed conv runs the kernels of the conv whose input gradient it is. cuDNN pads
// symmetrically, so on the GPU an asymmetric padding that changes the output size is applied with
// pad() first. Legend: N batch, C in channels, O out channels, D/H/W spatial sizes, k kernel sizes.
#include "core/ops/conv.h"

#include "core/autograd.h"
#include "core/ops.h"
#include "core/ops/dispatch.h"

namespace zt {

namespace {

// The extent of a kernel of k taps spaced `dilation` apart.
int64_t span(int64_t k, int64_t dilation) {
  return dilation * (k - 1) + 1;
}

// Output size along one axis; error naming the op and the axis when the padded input
// is smaller than the (dilated) kernel.
int64_t out_size(const char* op, const char* axis, int64_t in, int64_t k, int64_t s, int64_t p0,
                 int64_t p1, int64_t dilation, const Tensor& x, const Tensor& w) {
  ZT_CHECK(k >= 1, op, ": kernel size along ", axis, " must be >= 1; weight ",
           shape_str(w.sizes()));
  ZT_CHECK(s >= 1, op, ": stride along ", axis, " must be >= 1, got ", s);
  ZT_CHECK(dilation >= 1, op, ": dilation along ", axis, " must be >= 1, got ", dilation);
  ZT_CHECK(p0 >= 0 && p1 >= 0, op, ": padding along ", axis, " must be >= 0, got (", p0, ", ", p1,
           "); crop with narrow() first");
  const int64_t extent = span(k, dilation);
  ZT_CHECK(in + p0 + p1 >= extent, op, ": padded input ", axis, " (", in, " + ", p0, " + ", p1,
           ") is smaller than the kernel (", extent, dilation > 1 ? " with its dilation" : "",
           "); input ", shape_str(x.sizes()), ", weight ", shape_str(w.sizes()));
  return (in + p0 + p1 - extent) / s + 1;
}

void check_conv_device(const char* op, const Tensor& x);

// The spatial axes of a `spatial`-D convolution's input and of its kernel, for messages.
const char* input_axes(int64_t spatial) {
  return spatial == 1 ? "L" : (spatial == 2 ? "H, W" : "D, H, W");
}
const char* kernel_axes(int64_t spatial) {
  return spatial == 1 ? "k" : (spatial == 2 ? "kh, kw" : "kd, kh, kw");
}

// Spatial axis i of a `spatial`-D convolution's input, for messages.
const char* axis_name(int64_t spatial, int64_t i) {
  static const char* const kNames[3] = {"D", "H", "W"};
  return spatial == 1 ? "L" : kNames[3 - spatial + i];
}

// An input empty along a spatial axis has no convolution, though padding (or a transposed
// convolution's kernel) would span a result of the bias alone: PyTorch refuses it ("Only
// zero batch or zero channel inputs are supported"), and so does zt, before either
// device's path pads anything. An empty batch runs (an empty result).
void check_spatial_not_empty(const char* op, int64_t spatial, const Tensor& x) {
  if (x.size(0) == 0) return;
  for (int64_t i = 0; i < spatial; ++i)
    ZT_CHECK(x.size(2 + i) > 0, op, ": input ", shape_str(x.sizes()), " is empty along ",
             axis_name(spatial, i),
             "; only an empty batch is supported (there is nothing to convolve, and padding "
             "alone would make the result)");
}

void check_conv_inputs(const char* op, int64_t spatial, const Tensor& x, const Tensor& weight,
                       const Tensor& bias, int64_t groups) {
  ZT_CHECK(x.defined() && weight.defined(), op, ": input and weight must be defined");
  detail::check_same(op, {x, weight, bias});
  const int64_t nd = spatial + 2;
  ZT_CHECK(x.dim() == nd, op, ": input must be ", nd, "-D (N, C, ", input_axes(spatial), "), got ",
           shape_str(x.sizes()));
  ZT_CHECK(weight.dim() == nd, op, ": weight must be ", nd, "-D (O, C, ", kernel_axes(spatial),
           "), got ", shape_str(weight.sizes()));
  ZT_CHECK(groups >= 1, op, ": groups must be >= 1, got ", groups);
  ZT_CHECK(x.size(1) % groups == 0 && weight.size(0) % groups == 0, op, ": groups=", groups,
           " must divide the input channels (", x.size(1), ") and the output channels (",
           weight.size(0), ")");
  ZT_CHECK(x.size(1) == weight.size(1) * groups, op, ": input has ", x.size(1),
           " channels but weight expects ", weight.size(1) * groups,
           groups > 1 ? " (its channels per group times groups)" : "", " (input ",
           shape_str(x.sizes()), ", weight ", shape_str(weight.sizes()), ")");
  ZT_CHECK(x.size(1) >= 1 && weight.size(0) >= 1, op,
           ": need at least one input and output "
           "channel, got input ",
           shape_str(x.sizes()), ", weight ", shape_str(weight.sizes()));
  ZT_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == weight.size(0)), op, ": bias ",
           shape_str(bias.defined() ? bias.sizes() : Shape{}), " must be (", weight.size(0),
           ") to match weight ", shape_str(weight.sizes()));
  check_spatial_not_empty(op, spatial, x);
  check_conv_device(op, x);
}

// Floating dtypes on the CPU or a GPU.
void check_conv_device(const char* op, const Tensor& x) {
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
// size (the extra zeros are never read). Returns x itself when nothing is needed, or when
// some axis has no convolution (a kernel size, stride, dilation or padding out of range, a
// padded input shorter than the kernel): conv_geometry then refuses the arguments as given,
// with the axis's name, as on the CPU.
Tensor pad_for_symmetric(const Tensor& x, const Tensor& w, int64_t spatial, const int64_t* strides,
                         const int64_t* dilations, int64_t* pads) {
  for (int64_t a = 0; a < spatial; ++a)
    if (w.size(2 + a) < 1 || strides[a] < 1 || dilations[a] < 1 || pads[2 * a] < 0 ||
        pads[2 * a + 1] < 0 ||
        x.size(2 + a) + pads[2 * a] + pads[2 * a + 1] < span(w.size(2 + a), dilations[a]))
      return x;
  std::vector<int64_t> extra;  // pad()'s order: last dim first
  bool any = false;
  for (int64_t a = spatial - 1; a >= 0; --a) {
    int64_t in = x.size(2 + a), k = span(w.size(2 + a), dilations[a]), s = strides[a];
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
    // weight's storage between forward and backward, so read it only here. The kernel
    // reads x only for the weight's gradient; for the input's alone, x is not kept and
    // that gradient's buffer stands in for it (x and weight share dtype and device).
    const Tensor kept_x = gw || !gx ? x : Tensor();
    autograd::record(
        op, {x, weight, bias}, {out},
        [g, x = kept_x, xs = x.sizes(), weight, gx, gw, gb](const std::vector<Tensor>& grads) {
          if (!grads[0].defined()) return std::vector<Tensor>(3);
          Tensor go = kernel_operand(grads[0]);
          Tensor wd = kernel_operand(weight);
          Tensor dx = gx ? kernel_result(xs, weight) : Tensor();
          Tensor dw = gw ? kernel_result(wd.sizes(), weight) : Tensor();
          Tensor db = gb ? kernel_result({g.o}, weight) : Tensor();
          Tensor xd = x.defined() ? kernel_operand(x) : dx;
          ZT_DISPATCH(go.device(), conv_backward, g, go, xd, wd, dx, dw, db);
          return std::vector<Tensor>{from_kernel(dx, weight), from_kernel(dw, weight),
                                     from_kernel(db, weight)};
        },
        {kept_x, weight});
  }
  return out;
}

// The fields of the i-th of `dims` spatial axes of a geometry: the last `dims` of D, H, W
// (a 1-D convolution's is W, named L).
struct Axis {
  int64_t *in, *kernel, *stride, *pad, *dilation, *out;
  const char* name;
};
Axis axis(ConvGeometry& g, int dims, int i) {
  const int a = 3 - dims + i;
  if (a == 0) return {&g.d, &g.kd, &g.sd, &g.pad_d, &g.dd, &g.od, "D"};
  if (a == 1) return {&g.h, &g.kh, &g.sh, &g.pad_h, &g.dh, &g.oh, "H"};
  return {&g.w, &g.kw, &g.sw, &g.pad_w, &g.dw, &g.ow, dims == 1 ? "L" : "W"};
}

// The geometry of a convolution over `dims` (1, 2 or 3) spatial axes; a 2-D one has
// D = kd = 1, a 1-D one also H = kh = 1. stride and dilation have one entry per axis, padding two
// (front, back).
template <typename Args>
ConvGeometry conv_geometry(const char* op, int dims, const Tensor& x, const Tensor& weight,
                           const Args& args) {
  ConvGeometry g;
  g.n = x.size(0);
  g.c = x.size(1);
  g.o = weight.size(0);
  g.groups = args.groups;
  for (int i = 0; i < dims; ++i) {
    const Axis a = axis(g, dims, i);
    *a.in = x.size(2 + i);
    *a.kernel = weight.size(2 + i);
    *a.stride = args.stride[i];
    *a.pad = args.padding[2 * i];
    *a.dilation = args.dilation[i];
    *a.out = out_size(op, a.name, *a.in, *a.kernel, args.stride[i], args.padding[2 * i],
                      args.padding[2 * i + 1], args.dilation[i], x, weight);
  }
  return g;
}

// conv1d / conv2d / conv3d: `dims` spatial axes, Args their Conv*dArgs.
template <typename Args>
Tensor conv_nd(const char* op, int dims, const Tensor& x, const Tensor& weight, const Tensor& bias,
               const Args& args) {
  check_conv_inputs(op, dims, x, weight, bias, args.groups);
  if (x.device().is_cuda()) {
    Args sym = args;
    Tensor xp = pad_for_symmetric(x, weight, dims, sym.stride.data(), sym.dilation.data(),
                                  sym.padding.data());
    if (!xp.same(x)) return conv_nd(op, dims, xp, weight, bias, sym);
  }
  ConvGeometry g = conv_geometry(op, dims, x, weight, args);
  Shape out_shape{g.n, g.o};
  for (int i = 0; i < dims; ++i) out_shape.push_back(*axis(g, dims, i).out);
  return conv_apply(op, g, out_shape, x, weight, bias);
}

}  // namespace

Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv1dArgs& args) {
  return conv_nd("conv1d", 1, x, weight, bias, args);
}

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv2dArgs& args) {
  return conv_nd("conv2d", 2, x, weight, bias, args);
}

Tensor conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv3dArgs& args) {
  return conv_nd("conv3d", 3, x, weight, bias, args);
}

namespace {

template <typename Args>
Tensor conv_transpose(const char* op, int dims, const Tensor& x, const Tensor& weight,
                      const Tensor& bias, const Args& args);

// y (N, O, spatial...) + bias (O) broadcast over the spatial axes; y when bias is undefined.
Tensor add_channel_bias(const Tensor& y, const Tensor& bias) {
  if (!bias.defined()) return y;
  Shape bshape(static_cast<size_t>(y.dim()), 1);
  bshape[1] = bias.size(0);
  return y + bias.view(bshape);
}

// An output_padding e at least the stride s (allowed when below the dilation) gives a result
// whose convolution, padded p on both sides, has more than x's L positions: cuDNN, which pads
// symmetrically, refuses that geometry. The result is positions [p, p + size) of the uncropped
// transposed convolution F (length (L - 1) * s + dilation * (k - 1) + 1), zeros past F's end;
// so run it with padding max(p - e, 0) and no output_padding, then crop the front and zero-pad
// the back with pad(). The CPU takes the same route, so one path serves both devices.
// Returns an undefined tensor (no bias added) when every axis has e < s.
template <typename Args>
Tensor crop_output_padding(const char* op, int dims, const Tensor& x, const Tensor& weight,
                           const Args& args) {
  Args inner = args;
  std::vector<int64_t> pads(2 * static_cast<size_t>(dims), 0);  // pad()'s order: last dim first
  bool any = false;
  for (int i = 0; i < dims; ++i) {
    const int64_t p = args.padding[i], e = args.output_padding[i];
    if (e < args.stride[i]) continue;
    any = true;
    inner.padding[i] = std::max<int64_t>(p - e, 0);
    inner.output_padding[i] = 0;
    const size_t at = 2 * static_cast<size_t>(dims - 1 - i);
    pads[at] = inner.padding[i] - p;          // crops the front
    pads[at + 1] = e - p + inner.padding[i];  // zeros past the uncropped end
  }
  if (!any) return Tensor();
  return pad(conv_transpose(op, dims, x, weight, Tensor(), inner), pads);
}

// The transposed convolution of x (N, C, spatial...) is the input gradient of the
// convolution `g` whose input is the result (N, O, out...) and whose output is x, with
// the weight (C, O/G, k...) as that convolution's weight: conv_backward computes it,
// conv_forward its input gradient, and conv_backward's weight gradient (the convolution's
// input being the upstream gradient, its output gradient x) its weight gradient. The
// padding is that convolution's (the front pad; the back pad is padding -
// output_padding, which the kernels derive from the sizes).
template <typename Args>
Tensor conv_transpose(const char* op, int dims, const Tensor& x, const Tensor& weight,
                      const Tensor& bias, const Args& args) {
  ZT_CHECK(x.defined() && weight.defined(), op, ": input and weight must be defined");
  detail::check_same(op, {x, weight, bias});
  ZT_CHECK(x.dim() == dims + 2 && weight.dim() == dims + 2, op, ": input and weight must be ",
           dims + 2, "-D (N, C, ", input_axes(dims), ") and (C, O/groups, ", kernel_axes(dims),
           "), got ", shape_str(x.sizes()), " and ", shape_str(weight.sizes()));
  const int64_t groups = args.groups;
  ZT_CHECK(groups >= 1 && x.size(1) % groups == 0, op, ": groups=", groups,
           " must be >= 1 and divide the input channels (", x.size(1), ")");
  ZT_CHECK(x.size(1) == weight.size(0), op, ": input has ", x.size(1),
           " channels but weight expects ", weight.size(0), " (input ", shape_str(x.sizes()),
           ", weight ", shape_str(weight.sizes()), ", which is (C, O/groups, k...))");
  ZT_CHECK(x.size(1) >= 1 && weight.size(1) >= 1, op, ": need at least one input and output ",
           "channel, got weight ", shape_str(weight.sizes()));
  ConvGeometry g;
  g.n = x.size(0);
  g.o = x.size(1);
  g.c = weight.size(1) * groups;
  g.groups = groups;
  ZT_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == g.c), op, ": bias ",
           shape_str(bias.defined() ? bias.sizes() : Shape{}), " must be (", g.c,
           ") to match weight ", shape_str(weight.sizes()), " and groups=", groups);
  check_spatial_not_empty(op, dims, x);
  check_conv_device(op, x);
  Shape out_shape{g.n, g.c};
  for (int i = 0; i < dims; ++i) {
    const Axis a = axis(g, dims, i);
    const int64_t s = args.stride[i], p = args.padding[i], extra = args.output_padding[i];
    const int64_t k = weight.size(2 + i), dl = args.dilation[i];
    ZT_CHECK(s >= 1 && dl >= 1 && k >= 1, op, ": stride, dilation and kernel size along ", a.name,
             " must be >= 1, got ", s, ", ", dl, " and ", k);
    ZT_CHECK(p >= 0, op, ": padding along ", a.name, " must be >= 0, got ", p);
    // PyTorch's bound: below the stride or below the dilation.
    ZT_CHECK(extra >= 0 && (extra < s || extra < dl), op, ": output_padding along ", a.name, " (",
             extra, ") must be >= 0 and smaller than the stride (", s, ") or the dilation (", dl,
             ")");
    const int64_t size = (x.size(2 + i) - 1) * s - 2 * p + span(k, dl) + extra;
    ZT_CHECK(size >= 1, op, ": the output ", a.name, " would be ", size, " (input ",
             shape_str(x.sizes()), ", weight ", shape_str(weight.sizes()), ", padding ", p, ")");
    *a.in = size;
    *a.kernel = k;
    *a.stride = s;
    *a.pad = p;
    *a.dilation = dl;
    *a.out = x.size(2 + i);
    out_shape.push_back(size);
  }
  if (Tensor y = crop_output_padding(op, dims, x, weight, args); y.defined()) {
    return add_channel_bias(y, bias);
  }
  Tensor xc = kernel_operand(x), wc = kernel_operand(weight);
  Tensor y = kernel_result(out_shape, x);
  // conv_backward reads its x only for a weight gradient: the result stands in for it.
  ZT_DISPATCH(x.device(), conv_backward, g, xc, y, wc, y, Tensor(), Tensor());
  y = from_kernel(y, x);
  if (autograd::needs_grad({x, weight})) {
    const bool gx = x.requires_grad(), gw = weight.requires_grad();
    // x is kept only for the weight's gradient (x and weight share dtype and device).
    const Tensor kept_x = gw ? x : Tensor();
    autograd::record(
        op, {x, weight}, {y},
        [g, x = kept_x, xs = x.sizes(), weight, gx, gw](const std::vector<Tensor>& grads) {
          if (!grads[0].defined()) return std::vector<Tensor>(2);
          Tensor go = kernel_operand(grads[0]);
          Tensor wd = kernel_operand(weight);
          Tensor dx = gx ? kernel_result(xs, weight) : Tensor();
          Tensor dw = gw ? kernel_result(wd.sizes(), weight) : Tensor();
          if (gx) ZT_DISPATCH(go.device(), conv_forward, g, dx, go, wd, Tensor());
          if (gw) {
            ZT_DISPATCH(go.device(), conv_backward, g, kernel_operand(x), go, wd, Tensor(), dw,
                        Tensor());
          }
          return std::vector<Tensor>{from_kernel(dx, weight), from_kernel(dw, weight)};
        },
        {kept_x, weight});
  }
  return add_channel_bias(y, bias);
}

}  // namespace

Tensor conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        const ConvTranspose1dArgs& args) {
  return conv_transpose("conv_transpose1d", 1, x, weight, bias, args);
}

Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        const ConvTranspose2dArgs& args) {
  return conv_transpose("conv_transpose2d", 2, x, weight, bias, args);
}

Tensor conv_transpose3d(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        const ConvTranspose3dArgs& args) {
  return conv_transpose("conv_transpose3d", 3, x, weight, bias, args);
}

}  // namespace zt
