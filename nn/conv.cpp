// Conv1d/2d/3d: option validation, initialization and the mapping onto core's
// per-side padding arguments. Conv1d is a 2-D convolution over (N, C, 1, L) with a
// (1, k) kernel: views only, no copy.
#include "nn/conv.h"

#include <sstream>
#include <tuple>

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
  }
  for (int64_t p : opts.padding_per_side())
    ZT_CHECK(p >= 0, type_name, ": padding must be non-negative, got ", p);
  // The kernels below convolve densely over all input channels.
  for (size_t d = 0; d < D; ++d)
    ZT_CHECK(opts.dilation()[d] == 1, type_name, ": dilation=", tuple_str(opts.dilation(), D),
             " is not supported (only 1)");
  ZT_CHECK(opts.groups() == 1, type_name, ": groups=", opts.groups(), " is not supported (only 1)");
  Shape wshape{opts.out_channels(), opts.in_channels()};
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
  if (!options.bias()) os << ", bias=false";
  return os.str();
}

template <size_t D>
void ConvNd<D>::check_input(const Tensor& x) const {
  const char* layout = D == 1 ? "(N, C, L)" : D == 2 ? "(N, C, H, W)" : "(N, C, D, H, W)";
  ZT_CHECK(x.dim() == static_cast<int64_t>(D) + 2, this->type_name(), ": expected a ", D + 2,
           "-D input ", layout, ", got ", shape_str(x.sizes()));
  ZT_CHECK(x.size(1) == options.in_channels(), this->type_name(), ": input ", shape_str(x.sizes()),
           " has ", x.size(1), " channels, expected ", options.in_channels());
}

template class ConvNd<1>;
template class ConvNd<2>;
template class ConvNd<3>;
template struct ConvOptions<1>;
template struct ConvOptions<2>;
template struct ConvOptions<3>;

Tensor Conv1d::forward(const Tensor& x) {
  check_input(x);
  const std::array<int64_t, 2> pad = options.padding_per_side();
  Conv2dArgs args;
  args.stride = {1, options.stride()[0]};
  args.padding = {0, 0, pad[0], pad[1]};
  return conv2d(x.unsqueeze(2), weight.unsqueeze(2), bias, args).squeeze(2);
}

Tensor Conv2d::forward(const Tensor& x) {
  check_input(x);
  Conv2dArgs args;
  args.stride = options.stride().values;
  args.padding = options.padding_per_side();
  return conv2d(x, weight, bias, args);
}

Tensor Conv3d::forward(const Tensor& x) {
  check_input(x);
  Conv3dArgs args;
  args.stride = options.stride().values;
  args.padding = options.padding_per_side();
  return conv3d(x, weight, bias, args);
}

}  // namespace zt::nn
