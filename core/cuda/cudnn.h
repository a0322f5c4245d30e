// cuDNN access for CUDA kernels: one handle per thread and device, bound to the
// thread's current stream on every use, and owned descriptors (RAII) for tensors,
// filters and convolutions. Only core/cuda/ includes this header.
#pragma once

#include <cudnn.h>

#include <vector>

#include "core/dtype.h"

namespace zt::cuda {

/// This thread's cuDNN handle for the current device, bound to current_stream().
cudnnHandle_t cudnn_handle();

/// Whether `status` says that cuDNN cannot run as installed (driver or CUDA runtime too
/// old, another GPU architecture, a missing prerequisite or sub-library), not that it
/// refuses one call: cuDNN 9 files these under "not supported" (3005-3009).
inline bool cudnn_installation_failure(int status) {
  return status >= CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER &&
         status <= CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE;
}

/// cuDNN's data type for a zt dtype (floating types only; others are an error).
cudnnDataType_t cudnn_dtype(DType t);

/// Packed strides of `dims` (innermost last), for cuDNN's int strides: an error when one
/// passes INT32_MAX (each dimension fitting is not enough: a sample of 2^31 elements or
/// more would wrap its batch stride).
std::vector<int> packed_strides(const std::vector<int>& dims);

/// An owned tensor descriptor: fully packed (contiguous) NC* layout.
class TensorDescriptor {
 public:
  /// dims: N, C, then 2 or 3 spatial sizes.
  TensorDescriptor(DType dtype, const std::vector<int>& dims);
  ~TensorDescriptor();
  TensorDescriptor(const TensorDescriptor&) = delete;
  TensorDescriptor& operator=(const TensorDescriptor&) = delete;
  cudnnTensorDescriptor_t get() const { return desc_; }

 private:
  cudnnTensorDescriptor_t desc_ = nullptr;
};

/// An owned filter descriptor: (O, C, k...) contiguous.
class FilterDescriptor {
 public:
  FilterDescriptor(DType dtype, const std::vector<int>& dims);
  ~FilterDescriptor();
  FilterDescriptor(const FilterDescriptor&) = delete;
  FilterDescriptor& operator=(const FilterDescriptor&) = delete;
  cudnnFilterDescriptor_t get() const { return desc_; }

 private:
  cudnnFilterDescriptor_t desc_ = nullptr;
};

/// An owned convolution descriptor: symmetric zero padding, strides, dilations and the
/// channel groups, cross-correlation (what zt's conv computes).
class ConvolutionDescriptor {
 public:
  ConvolutionDescriptor(const std::vector<int>& pads, const std::vector<int>& strides,
                        const std::vector<int>& dilations, int groups, cudnnDataType_t compute);
  ~ConvolutionDescriptor();
  ConvolutionDescriptor(const ConvolutionDescriptor&) = delete;
  ConvolutionDescriptor& operator=(const ConvolutionDescriptor&) = delete;
  cudnnConvolutionDescriptor_t get() const { return desc_; }
  /// Tensor cores (TF32 for f32), FMA only, or cuDNN's default; a call that changes
  /// nothing makes no cuDNN call.
  void set_math(cudnnMathType_t math);

 private:
  cudnnConvolutionDescriptor_t desc_ = nullptr;
  cudnnMathType_t math_ = CUDNN_DEFAULT_MATH;  // a new descriptor's
};

}  // namespace zt::cuda
