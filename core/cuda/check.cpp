// Error messages for CUDA_CHECK, CUBLAS_CHECK and CUDNN_CHECK: the failed call, the
// library's description of the status, and a hint for the common causes.
#include "core/cuda/check.h"

#include <cublas_api.h>

#include <string>

#include "core/cuda/cudnn.h"
#include "core/error.h"

namespace zt::cuda::detail {

namespace {
const char* cuda_hint(cudaError_t s) {
  switch (s) {
    case cudaErrorMemoryAllocation:
      return "out of GPU memory: lower the batch size or activation memory, or release "
             "cached blocks with allocator_for(DeviceType::CUDA)->empty_cache()";
    case cudaErrorNoDevice:
    case cudaErrorInvalidDevice:
      return "no such GPU: check nvidia-smi and CUDA_VISIBLE_DEVICES, and use "
             "zt::cuda_available() before touching the GPU";
    case cudaErrorInsufficientDriver:
      return "the NVIDIA driver is missing or older than the CUDA runtime zt was built "
             "with: update the driver";
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion:
      return "zt was not compiled for this GPU: reconfigure with "
             "-DCMAKE_CUDA_ARCHITECTURES=<your compute capability, e.g. 90>";
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
      return "a kernel touched invalid memory (errors are reported asynchronously, maybe by "
             "a later call): rerun with CUDA_LAUNCH_BLOCKING=1 or compute-sanitizer";
    case cudaErrorPeerAccessUnsupported:
      return "the GPUs cannot access each other directly: copy through the host";
    default:
      return "rerun with CUDA_LAUNCH_BLOCKING=1 to find the failing call";
  }
}

const char* cublas_hint(int s) {
  switch (s) {
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "cuBLAS could not start: is a GPU visible and the driver loaded?";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "cuBLAS ran out of GPU memory for its workspace: free memory or empty the cache";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "bad GEMM arguments (sizes, leading dimensions, or an unsupported dtype mix)";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "this GPU lacks a feature the call needs (bf16 needs compute capability 8.0+)";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "this combination of types, layouts and compute mode is not supported";
    default:
      return "rerun with CUDA_LAUNCH_BLOCKING=1 to find the failing call";
  }
}

// cuDNN 9 statuses carry a category in their thousands (2xxx bad parameter, 3xxx not
// supported) and a detail in the rest.
const char* cudnn_hint(int s) {
  if (cudnn_installation_failure(s))
    return "cuDNN cannot run on this machine as installed (driver or CUDA runtime too old, "
           "wrong GPU architecture, or a missing libcudnn sub-library): check the cuDNN "
           "libraries on LD_LIBRARY_PATH against the driver";
  switch (s / 1000 * 1000) {
    case 1000:
      return "cuDNN could not start: is a GPU visible and the driver loaded?";
    case 2000:
      return "bad tensor or convolution descriptor (shapes, strides, dtype, workspace size)";
    case 3000:
      return "no cuDNN engine supports this configuration; try another dtype or layout";
    default:
      return "set CUDNN_LOGERR_DBG=1 CUDNN_LOGDEST_DBG=stderr for cuDNN's own log";
  }
}
}  // namespace

void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
  cudaGetLastError();  // clear a non-sticky error so the process can go on
  ::zt::detail::throw_error(
      file, line,
      ::zt::detail::cat("CUDA error ", cudaGetErrorName(status), " (", cudaGetErrorString(status),
                        ") in ", call, ". HINT: ", cuda_hint(status)));
}

void throw_cublas_error(int status, const char* call, const char* file, int line) {
  ::zt::detail::throw_error(
      file, line,
      ::zt::detail::cat("cuBLAS error ", cublasGetStatusName(static_cast<cublasStatus_t>(status)),
                        " (", cublasGetStatusString(static_cast<cublasStatus_t>(status)), ") in ",
                        call, ". HINT: ", cublas_hint(status)));
}

void throw_cudnn_error(int status, const char* call, const char* file, int line) {
  char detail[512] = {};
  cudnnGetLastErrorString(detail, sizeof(detail));  // cuDNN's own account of this thread's error
  ::zt::detail::throw_error(
      file, line,
      ::zt::detail::cat("cuDNN error ", cudnnGetErrorString(static_cast<cudnnStatus_t>(status)),
                        " (", status, ") in ", call, detail[0] ? ": " : "", detail,
                        ". HINT: ", cudnn_hint(status)));
}

}  // namespace zt::cuda::detail

namespace zt::cuda {
bool event_done(cudaEvent_t event) {
  const cudaError_t s = ZT_API(cudaEventQuery(event));
  if (s == cudaErrorNotReady) {
    if (cudaPeekAtLastError() == cudaErrorNotReady) (void)cudaGetLastError();
    return false;
  }
  CUDA_CHECK_STATUS(s, "cudaEventQuery(event)");
  return true;
}
}  // namespace zt::cuda
