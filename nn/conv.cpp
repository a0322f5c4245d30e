// Conv1d/2d/3d and ConvTranspose1d/2d/3d: option validation, initialization and the
// mapping onto core's arguments. The 1-D ones are 2-D ones over (N, C, 1, L) with a (1, k)
// kernel: views only, no copy.
#include "nn/conv.h"

#include <sstream>
#include <tuple>
#include <type_traits>

#include "nn/init.h"
#include "nn/layer_params.h"

namespace zt::nn {

namespace {
// "(a[0], a[1], ...)" over the first n entries, as extra_repr and errors print options.
template <typename A>
std::string tuple_str(const A& a, size_t n) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < n; ++i) os << (i ? ", " : "") << a[i];
  os << ")";
  return os.str();
}
// Errors unless x is (N, in_channels, ...) with `spatial` dims after the channels.
void check_conv_input(const std::string& type_name, const Tensor& x, size_t spatial,
                      int64_t in_channels) {
  const char* layout = spatial == 1   ? "(N, C, L)"
                       : spatial == 2 ? "(N, C, H, W)"
                                      : "(N, C, D, H, W)";
  ZT_CHECK(x.dim() == static_cast<int64_t>(spatial) + 2, type_name, ": expected a ", spatial + 2,
           "-D input ", layout, ", got ", shape_str(x.sizes()));
  ZT_CHECK(x.size(1) == in_channels, type_name, ": input ", shape_str(x.sizes()), " has ",
           x.size(1), " channels, expected ", in_channels);
}

// The options PyTorch prints only when they differ from their defaults.
template <typename Options>
void print_optional(std::ostream& os, const Options& options, size_t n) {
  auto print_unless = [&](const char* name, const auto& values, int64_t v) {
    for (size_t d = 0; d < n; ++d) {
      if (values[d] == v) continue;
      os << ", " << name << "=" << tuple_str(values, n);
      return;
    }
  };
  print_unless("dilation", options.dilation(), 1);
  if constexpr (requires { options.output_padding(); })
    print_unless("output_padding", options.output_padding(), 0);
  if (options.groups() != 1) os << ", groups=" << options.groups();
  if (!options.bias()) os << ", bias=false";
}
}  // namespace

template <size_t D>
std::array<int64_t, 2 * D> ConvOptions<D>::padding_per_side() const {
  if (explicit_padding_) return *explicit_padding_;
  std::array<int64_t, 2 * D> p{};
  for (size_t d = 0; d < D; ++d) p[2 * d] = p[2 * d + 1] = padding_[d];
  return p;
}

template <size_t D>
ConvNd<D>::ConvNd(const ConvOptions<D>& opts, const char* type_name)
    : UnaryModule(type_name), options(opts) {
  ZT_CHECK(opts.in_channels() > 0 && opts.out_channels() > 0, type_name,
           ": channel counts must be positive, got ", opts.in_channels(), " -> ",
           opts.out_channels());
  for (size_t d = 0; d < D; ++d) {
    ZT_CHECK(opts.kernel_size()[d] > 0, type_name,
             ": kernel sizes must be positive, got kernel_size=", tuple_str(opts.kernel_size(), D));
    ZT_CHECK(opts.stride()[d] > 0, type_name,
             ": strides must be positive, got stride=", tuple_str(opts.stride(), D));
    ZT_CHECK(opts.dilation()[d] > 0, type_name,
             ": dilations must be positive, got dilation=", tuple_str(opts.dilation(), D));
  }
  for (int64_t p : opts.padding_per_side())
    ZT_CHECK(p >= 0, type_name, ": padding must be non-negative, got ", p);
  const int64_t groups = opts.groups();
  ZT_CHECK(groups > 0 && opts.in_channels() % groups == 0 && opts.out_channels() % groups == 0,
           type_name, ": groups=", groups, " must be positive and divide in_channels (",
           opts.in_channels(), ") and out_channels (", opts.out_channels(), ")");
  Shape wshape{opts.out_channels(), opts.in_channels() / groups};
  for (size_t d = 0; d < D; ++d) wshape.push_back(opts.kernel_size()[d]);
  std::tie(weight, bias) = register_weight_and_bias(*this, wshape, opts.bias());
}

template <size_t D>
void ConvNd<D>::reset_parameters() {
  autograd::NoGradGuard ng;
  init::default_linear_init_(weight, bias);
}

template <size_t D>
std::string ConvNd<D>::extra_repr() const {
  std::ostringstream os;
  os << options.in_channels() << ", " << options.out_channels()
     << ", kernel_size=" << tuple_str(options.kernel_size(), D)
     << ", stride=" << tuple_str(options.stride(), D)
     << ", padding=" << tuple_str(options.padding_per_side(), 2 * D);
  print_optional(os, options, D);
  return os.str();
}

template <size_t D>
void ConvNd<D>::check_input(const Tensor& x) const {
  check_conv_input(this->type_name(), x, D, options.in_channels());
}

template class ConvNd<1>;
template class ConvNd<2>;
template class ConvNd<3>;
template struct ConvOptions<1>;
template struct ConvOptions<2>;
template struct ConvOptions<3>;

Tensor Conv1d::forward(const Tensor& x) {
  check_input(x);
  Conv1dArgs args;
  args.stride = options.stride().values;
  args.padding = options.padding_per_side();
  args.dilation = options.dilation().values;
  args.groups = options.groups();
  return conv1d(x, weight, bias, args);
}

Tensor Conv2d::forward(const Tensor& x) {
  check_input(x);
  Conv2dArgs args;
  args.stride = options.stride().values;
  args.padding = options.padding_per_side();
  args.dilation = options.dilation().values;
  args.groups = options.groups();
  return conv2d(x, weight, bias, args);
}

Tensor Conv3d::forward(const Tensor& x) {
  check_input(x);
  Conv3dArgs args;
  args.stride = options.stride().values;
  args.padding = options.padding_per_side();
  args.dilation = options.dilation().values;
  args.groups = options.groups();
  return conv3d(x, weight, bias, args);
}

template <size_t D>
ConvTransposeNd<D>::ConvTransposeNd(const ConvTransposeOptions<D>& opts, const char* type_name)
    : UnaryModule(type_name), options(opts) {
  const int64_t groups = opts.groups();
  ZT_CHECK(opts.in_channels() > 0 && opts.out_channels() > 0, type_name,
           ": channel counts must be positive, got ", opts.in_channels(), " -> ",
           opts.out_channels());
  ZT_CHECK(groups > 0 && opts.in_channels() % groups == 0 && opts.out_channels() % groups == 0,
           type_name, ": groups=", groups, " must be positive and divide in_channels (",
           opts.in_channels(), ") and out_channels (", opts.out_channels(), ")");
  for (size_t d = 0; d < D; ++d) {
    ZT_CHECK(opts.kernel_size()[d] > 0 && opts.stride()[d] > 0 && opts.dilation()[d] > 0, type_name,
             ": kernel sizes, strides and dilations must be positive, got kernel_size=",
             tuple_str(opts.kernel_size(), D), ", stride=", tuple_str(opts.stride(), D),
             ", dilation=", tuple_str(opts.dilation(), D));
    ZT_CHECK(opts.padding()[d] >= 0, type_name,
             ": padding must be non-negative, got padding=", tuple_str(opts.padding(), D));
    // PyTorch's bound: below the stride or below the dilation, per dim.
    const int64_t e = opts.output_padding()[d];
    ZT_CHECK(e >= 0 && (e < opts.stride()[d] || e < opts.dilation()[d]), type_name,
             ": output_padding=", tuple_str(opts.output_padding(), D),
             " must be non-negative and smaller than the stride or the dilation in each dim; dim ",
             d, " has output_padding ", e, ", stride ", opts.stride()[d], ", dilation ",
             opts.dilation()[d]);
  }
  Shape wshape{opts.in_channels(), opts.out_channels() / groups};
  for (size_t d = 0; d < D; ++d) wshape.push_back(opts.kernel_size()[d]);
  std::tie(weight, bias) =
      register_weight_and_bias(*this, wshape, opts.bias(), opts.out_channels());
}

template <size_t D>
void ConvTransposeNd<D>::reset_parameters() {
  autograd::NoGradGuard ng;
  init::default_linear_init_(weight, bias);
}

template <size_t D>
std::string ConvTransposeNd<D>::extra_repr() const {
  std::ostringstream os;
  os << options.in_channels() << ", " << options.out_channels()
     << ", kernel_size=" << tuple_str(options.kernel_size(), D)
     << ", stride=" << tuple_str(options.stride(), D)
     << ", padding=" << tuple_str(options.padding(), D);
  print_optional(os, options, D);
  return os.str();
}

template <size_t D>
Tensor ConvTransposeNd<D>::forward(const Tensor& x) {
  check_conv_input(this->type_name(), x, D, options.in_channels());
  using Args =
      std::conditional_t<D == 1, ConvTranspose1dArgs,
                         std::conditional_t<D == 2, ConvTranspose2dArgs, ConvTranspose3dArgs>>;
  Args args;
  args.stride = options.stride().values;
  args.padding = options.padding().values;
  args.output_padding = options.output_padding().values;
  args.dilation = options.dilation().values;
  args.groups = options.groups();
  if constexpr (D == 1) return conv_transpose1d(x, weight, bias, args);
  if constexpr (D == 2) return conv_transpose2d(x, weight, bias, args);
  if constexpr (D == 3) return conv_transpose3d(x, weight, bias, args);
}

template class ConvTransposeNd<1>;
template class ConvTransposeNd<2>;
template class ConvTransposeNd<3>;
template struct ConvTransposeOptions<1>;
template struct ConvTransposeOptions<2>;
template struct ConvTransposeOptions<3>;

}  // namespace zt::nn
