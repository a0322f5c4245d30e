// cuBLAS access for CUDA kernels: one handle per thread and device, bound to the
// thread's current stream on every use, and the TF32 switch for f32 GEMMs.
// cuda::gemm itself is declared in core/kernels.h.
#pragma once

#include <cublas_v2.h>

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "core/tensor.h"

namespace zt::cuda {

/// This thread's cuBLAS handle for the current device, bound to current_stream() with a
/// workspace of cublas_workspace_bytes() for that stream (outside graph captures).
cublasHandle_t cublas_handle();

/// The workspace cuBLAS gets on each stream of `device`: NVIDIA's recommendation, 32 MiB
/// from Hopper (compute capability 9) on and 4 MiB before, unless the environment
/// variable ZT_CUBLAS_WORKSPACE gives a size ("16MiB"; 0: the library's own pool).
size_t cublas_workspace_bytes(int device);

/// The cuBLAS data and compute types of a non-f64 GEMM in one dtype.
struct GemmTypes {
  cudaDataType_t type;
  cublasComputeType_t compute;
};
/// f32 (CUBLAS_COMPUTE_32F_FAST_TF32 when tf32().matmul), bf16 and f16, the 16-bit
/// types with fp32 accumulation; any other dtype is an error naming `op`.
GemmTypes gemm_types(DType dt, const char* op);

/// cuda::gemm of a non-f64 dtype through cuBLASLt with timed candidates, as gemm() runs it
/// under gemm_benchmark() (core/algo_policy.h; core/cuda/gemm_lt.cpp); the device is
/// current. False when cuBLASLt offers no algorithm for the problem or refuses its own at
/// run time (nothing was written): cuBLAS runs it then.
bool gemm_lt(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
             const Tensor& a, int64_t lda, const Tensor& b, int64_t ldb, float beta,
             const Tensor& c, int64_t ldc);

}  // namespace zt::cuda
