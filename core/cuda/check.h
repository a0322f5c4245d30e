// Status-code checks for the CUDA runtime, cuBLAS and cuDNN. Each call counts and is timed at
// its site under an ApiProfile (core/api_profile.h). Each macro turns a failed
// status into zt::Error (with file:line under ZT_DEBUG=1) naming the call, the library's own
// message and a HINT on what to do about it. cuBLAS and cuDNN statuses are passed as integers so
// that this header needs only the CUDA runtime.
#pragma once

#include <cuda_runtime_api.h>

#include "core/api_profile.h"
#include "core/work_counts.h"

namespace zt::cuda::detail {
[[noreturn]] void throw_cuda_error(cudaError_t status, const char* call, const char* file,
                                   int line);
[[noreturn]] void throw_cublas_error(int status, const char* call, const char* file, int line);
[[noreturn]] void throw_cudnn_error(int status, const char* call, const char* file, int line);
}  // namespace zt::cuda::detail

namespace zt::cuda {
/// Whether the work before `event` has finished (cudaEventQuery). "Not ready" is an answer,
/// not a failure: it is cleared from the runtime's last-error state, so that the next
/// launch check (CUDA_CHECK_LAUNCH) does not report it. Any other status throws.
bool event_done(cudaEvent_t event);
}  // namespace zt::cuda

/// The checks of a status already returned (by a call counted at its own site through
/// ZT_API): `what` names the call in the error. No call is counted here.
#define ZT_STATUS_CHECK_(type, status, what, thrower)                                            \
  do {                                                                                           \
    const type zt_status_ = static_cast<type>(status);                                           \
    if (zt_status_ != type{}) ::zt::cuda::detail::thrower(zt_status_, what, __FILE__, __LINE__); \
  } while (0)
#define CUDA_CHECK_STATUS(status, what) \
  ZT_STATUS_CHECK_(cudaError_t, status, what, throw_cuda_error)
#define CUBLAS_CHECK_STATUS(status, what) ZT_STATUS_CHECK_(int, status, what, throw_cublas_error)
#define CUDNN_CHECK_STATUS(status, what) ZT_STATUS_CHECK_(int, status, what, throw_cudnn_error)

/// Throws zt::Error unless the CUDA runtime call returns cudaSuccess.
#define CUDA_CHECK(call) CUDA_CHECK_STATUS(ZT_API(call), #call)
/// Throws zt::Error unless the cuBLAS / cuBLASLt call returns CUBLAS_STATUS_SUCCESS.
#define CUBLAS_CHECK(call) CUBLAS_CHECK_STATUS(ZT_API(call), #call)
/// Throws zt::Error unless the cuDNN call returns CUDNN_STATUS_SUCCESS.
#define CUDNN_CHECK(call) CUDNN_CHECK_STATUS(ZT_API(call), #call)

/// Checks the launch of the kernel just issued (bad configuration, missing sm_90 code)
/// and counts it (core/work_counts.h).
#define CUDA_CHECK_LAUNCH()                        \
  do {                                             \
    ++::zt::detail::thread_work_counts().launches; \
    CUDA_CHECK(cudaGetLastError());                \
  } while (0)
