// cuDNN handles and descriptors (see cudnn.h). Handles are created lazily, one per
// thread and device, like the cuBLAS ones in gemm.cpp: a cuDNN handle must not be used
// by two threads at once, and binding it to the caller's stream on each use keeps
// cuDNN's work ordered with zt's other kernels (and the caching allocator's reuse).
#include "core/cuda/cudnn.h"

#include <cstdint>

#include "core/cuda/check.h"
#include "core/cuda/stream.h"
#include "core/error.h"

namespace zt::cuda {

std::vector<int> packed_strides(const std::vector<int>& dims) {
  std::vector<int> s(dims.size(), 1);
  int64_t stride = 1;
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i) {
    stride *= dims[static_cast<size_t>(i) + 1];
    ZT_CHECK(stride <= INT32_MAX, "cuDNN: a tensor of ", dims.size(),
             " dimensions has a stride of ", stride,
             " elements, past cuDNN's 32-bit strides: split the batch or the volume");
    s[static_cast<size_t>(i)] = static_cast<int>(stride);
  }
  return s;
}

cudnnHandle_t cudnn_handle() {
  const int dev = current_device();
  cudnnHandle_t h = thread_handle<cudnnHandle_t>(
      dev,
      [] {
        cudnnHandle_t made = nullptr;
        CUDNN_CHECK(cudnnCreate(&made));
        return made;
      },
      [](cudnnHandle_t made) { cudnnDestroy(made); });
  bind_stream(h, dev, current_stream(dev),
              [](cudnnHandle_t made, cudaStream_t s) { CUDNN_CHECK(cudnnSetStream(made, s)); });
  return h;
}

cudnnDataType_t cudnn_dtype(DType t) {
  switch (t) {
    case DType::f32:
      return CUDNN_DATA_FLOAT;
    case DType::f64:
      return CUDNN_DATA_DOUBLE;
    case DType::bf16:
      return CUDNN_DATA_BFLOAT16;
    case DType::f16:
      return CUDNN_DATA_HALF;
    default:
      ZT_FAIL("cuDNN: no data type for ", dtype_name(t), "; convert to a floating dtype");
  }
}

TensorDescriptor::TensorDescriptor(DType dtype, const std::vector<int>& dims) {
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&desc_));
  std::vector<int> strides = packed_strides(dims);
  CUDNN_CHECK(cudnnSetTensorNdDescriptor(desc_, cudnn_dtype(dtype), static_cast<int>(dims.size()),
                                         dims.data(), strides.data()));
}
TensorDescriptor::~TensorDescriptor() {
  cudnnDestroyTensorDescriptor(desc_);
}

FilterDescriptor::FilterDescriptor(DType dtype, const std::vector<int>& dims) {
  CUDNN_CHECK(cudnnCreateFilterDescriptor(&desc_));
  CUDNN_CHECK(cudnnSetFilterNdDescriptor(desc_, cudnn_dtype(dtype), CUDNN_TENSOR_NCHW,
                                         static_cast<int>(dims.size()), dims.data()));
}
FilterDescriptor::~FilterDescriptor() {
  cudnnDestroyFilterDescriptor(desc_);
}

ConvolutionDescriptor::ConvolutionDescriptor(const std::vector<int>& pads,
                                             const std::vector<int>& strides,
                                             const std::vector<int>& dilations, int groups,
                                             cudnnDataType_t compute) {
  CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&desc_));
  CUDNN_CHECK(cudnnSetConvolutionNdDescriptor(desc_, static_cast<int>(pads.size()), pads.data(),
                                              strides.data(), dilations.data(),
                                              CUDNN_CROSS_CORRELATION, compute));
  if (groups != 1) CUDNN_CHECK(cudnnSetConvolutionGroupCount(desc_, groups));
}
ConvolutionDescriptor::~ConvolutionDescriptor() {
  cudnnDestroyConvolutionDescriptor(desc_);
}
void ConvolutionDescriptor::set_math(cudnnMathType_t math) {
  if (math == math_) return;
  CUDNN_CHECK(cudnnSetConvolutionMathType(desc_, math));
  math_ = math;
}

}  // namespace zt::cuda
