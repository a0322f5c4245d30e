// cuBLAS access for CUDA kernels: one handle per thread and device, bound to the
// thread's current stream on every use, and the TF32 switch for f32 GEMMs.
// cuda::gemm itself is declared in core/kernels.h.
#pragma once

#include <cublas_v2.h>

namespace zt::cuda {

/// This thread's cuBLAS handle for the current device, bound to current_stream().
cublasHandle_t cublas_handle();

/// Lets f32 GEMMs use TF32 tensor cores (about 1e-3 relative error, much faster).
/// Off by default, so f32 matmuls match the CPU to float rounding. Process-wide.
void set_allow_tf32(bool allow);
/// Whether f32 GEMMs may use TF32.
bool allow_tf32();

}  // namespace zt::cuda
