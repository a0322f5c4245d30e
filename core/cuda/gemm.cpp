// cuda::gemm through cuBLAS. zt is row-major and cuBLAS column-major: a row-major
// (m, n) matrix is the column-major (n, m) one with the same leading dimension, so
//   C = op(A) op(B)   (row-major)   <=>   C^T = op(B)^T op(A)^T   (column-major),
// i.e. the same call with the operands (and m, n) swapped. f32 uses exact fp32 math
// unless TF32 is allowed; bf16/f16 multiply on tensor cores with fp32 accumulation.
// gemm_batched is one cublasGemmStridedBatchedEx (cublasDgemmStridedBatched for f64)
// with the same choices. cuBLAS gets a workspace of its own on each stream it runs on
// (cublas_workspace_bytes), as NVIDIA recommends. Under gemm_benchmark() the non-f64 gemm
// runs through cuBLASLt's timed candidates instead (gemm_lt, core/cuda/gemm_lt.cpp).
#include "core/cuda/gemm.h"

#include <array>
#include <atomic>
#include <cstdlib>
#include <limits>
#include <map>
#include <utility>

#include "core/algo_policy.h"
#include "core/cuda/allocator.h"
#include "core/cuda/check.h"
#include "core/cuda/stream.h"
#include "core/kernels.h"

namespace zt::cuda {

namespace {

int as_int(int64_t v, const char* what) {
  ZT_CHECK(v >= 0 && v <= std::numeric_limits<int>::max(), "gemm: ", what, " = ", v,
           " does not fit cuBLAS's 32-bit sizes; split the product");
  return static_cast<int>(v);
}

// Binds the handle to `stream` and gives it this thread's workspace on (device, stream),
// made on first use from the caching allocator (cublasSetStream puts the library's own
// pool back, so every bind sets it again). Inside a graph capture a workspace made before
// it is bound; none is made (nothing is allocated while work is being recorded), and then
// the library's pool stays and false says so: the next use outside the capture binds again.
bool bind_with_workspace(cublasHandle_t h, int dev, cudaStream_t stream) {
  CUBLAS_CHECK(cublasSetStream(h, stream));
  const size_t bytes = cublas_workspace_bytes(dev);
  if (bytes == 0) return true;
  // Kept for the thread's life: a graph captured on a stream may hold its workspace, and a
  // thread binds few streams (a stream made again at a freed one's address reuses its
  // entry: the caching allocator hands a freed block out again only in its stream's order).
  thread_local std::map<std::pair<int, cudaStream_t>, Tensor> workspaces;
  auto ws = workspaces.find({dev, stream});
  if (ws == workspaces.end()) {
    // Not made inside a capture (the graph would own the allocation); the stream's
    // workspace from the warm-up steps is bound again, as cublasSetStream dropped it.
    if (graph_capturing()) return false;
    MemTagScope tag(MemTag::kOther);  // neither a model's state nor an activation
    ws = workspaces.emplace(std::pair{dev, stream}, device_bytes(bytes, Device::cuda(dev))).first;
  }
  CUBLAS_CHECK(cublasSetWorkspace(h, ws->second.data_ptr(), bytes));
  return true;
}

}  // namespace

size_t cublas_workspace_bytes(int device) {
  static const int64_t from_env = [] {
    const char* v = std::getenv("ZT_CUBLAS_WORKSPACE");
    return v && *v ? parse_byte_size(v, "ZT_CUBLAS_WORKSPACE") : int64_t{-1};
  }();
  if (from_env >= 0) return static_cast<size_t>(from_env);
  static std::array<std::atomic<int>, kMaxCudaDevices> majors{};  // 0: not asked yet
  std::atomic<int>& major = majors[static_cast<size_t>(device)];
  if (major.load(std::memory_order_relaxed) == 0) {
    int m = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&m, cudaDevAttrComputeCapabilityMajor, device));
    major.store(m, std::memory_order_relaxed);
  }
  return (major.load(std::memory_order_relaxed) >= 9 ? size_t{32} : size_t{4}) << 20;
}

cublasHandle_t cublas_handle() {
  const int dev = current_device();
  cublasHandle_t h = thread_handle<cublasHandle_t>(
      dev,
      [] {
        cublasHandle_t made = nullptr;
        CUBLAS_CHECK(cublasCreate(&made));
        // 16-bit GEMMs accumulate in f32 (kernel_list.h): no split-K kernel may add its
        // partial sums in the 16-bit output type.
        CUBLAS_CHECK(cublasSetMathMode(
            made, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH |
                                            CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
        return made;
      },
      [](cublasHandle_t made) { cublasDestroy(made); });
  bind_stream(h, dev, current_stream(dev), [dev](cublasHandle_t made, cudaStream_t s) {
    return bind_with_workspace(made, dev, s);
  });
  return h;
}

GemmTypes gemm_types(DType dt, const char* op) {
  switch (dt) {
    case DType::f32:
      return {CUDA_R_32F, tf32().matmul ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F};
    case DType::bf16:
      return {CUDA_R_16BF, CUBLAS_COMPUTE_32F};
    case DType::f16:
      return {CUDA_R_16F, CUBLAS_COMPUTE_32F};
    default:
      ZT_FAIL(op, " on CUDA supports f32, f64, bf16 and f16, got ", dtype_name(dt));
  }
}

namespace {

// One call's sizes as cuBLAS's ints (an error names any that does not fit) and its
// operations.
struct GemmShape {
  int m, n, k, lda, ldb, ldc;
  cublasOperation_t op_a, op_b;
};
GemmShape gemm_shape(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, int64_t lda,
                     int64_t ldb, int64_t ldc) {
  return {as_int(m, "m"),
          as_int(n, "n"),
          as_int(k, "k"),
          as_int(lda, "lda"),
          as_int(ldb, "ldb"),
          as_int(ldc, "ldc"),
          trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
          trans_b ? CUBLAS_OP_T : CUBLAS_OP_N};
}

void check_operands(const char* op, const Tensor& a, const Tensor& b, const Tensor& c) {
  ZT_CHECK(a.device() == c.device() && b.device() == c.device(), op, ": operands on ",
           a.device().str(), ", ", b.device().str(), " and ", c.device().str());
  ZT_CHECK(a.dtype() == c.dtype() && b.dtype() == c.dtype(), op,
           ": operands of one dtype expected, got a ", a.str(), ", b ", b.str(), " and c ",
           c.str());
}

}  // namespace

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
          const Tensor& a, int64_t lda, const Tensor& b, int64_t ldb, double beta, const Tensor& c,
          int64_t ldc) {
  check_operands("gemm", a, b, c);
  if (m == 0 || n == 0) return;
  const GemmShape sh = gemm_shape(trans_a, trans_b, m, n, k, lda, ldb, ldc);
  DeviceGuard g(c.device().index);
  if (c.dtype() != DType::f64 && gemm_benchmark() &&
      gemm_lt(trans_a, trans_b, m, n, k, static_cast<float>(alpha), a, lda, b, ldb,
              static_cast<float>(beta), c, ldc))
    return;
  cublasHandle_t h = cublas_handle();
  ++::zt::detail::thread_work_counts().launches;
  const void* pa = a.data_ptr();
  const void* pb = b.data_ptr();
  void* pc = c.data_ptr();

  if (c.dtype() == DType::f64) {
    CUBLAS_CHECK(cublasDgemm(h, sh.op_b, sh.op_a, sh.n, sh.m, sh.k, &alpha,
                             static_cast<const double*>(pb), sh.ldb, static_cast<const double*>(pa),
                             sh.lda, &beta, static_cast<double*>(pc), sh.ldc));
    return;
  }
  const GemmTypes t = gemm_types(c.dtype(), "gemm");
  float fa = static_cast<float>(alpha), fb = static_cast<float>(beta);  // fp32 scaling
  CUBLAS_CHECK(cublasGemmEx(h, sh.op_b, sh.op_a, sh.n, sh.m, sh.k, &fa, pb, t.type, sh.ldb, pa,
                            t.type, sh.lda, &fb, pc, t.type, sh.ldc, t.compute,
                            CUBLAS_GEMM_DEFAULT));
}

void gemm_batched(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                  const Tensor& a, int64_t lda, int64_t stride_a, const Tensor& b, int64_t ldb,
                  int64_t stride_b, double beta, const Tensor& c, int64_t ldc, int64_t stride_c,
                  int64_t batch) {
  check_operands("gemm_batched", a, b, c);
  if (m == 0 || n == 0 || batch == 0) return;
  ZT_CHECK(stride_a >= 0 && stride_b >= 0 && stride_c >= 0,
           "gemm_batched: negative batch strides (", stride_a, ", ", stride_b, ", ", stride_c,
           "); pass contiguous operands");
  const GemmShape sh = gemm_shape(trans_a, trans_b, m, n, k, lda, ldb, ldc);
  int ibatch = as_int(batch, "batch");
  DeviceGuard g(c.device().index);
  cublasHandle_t h = cublas_handle();
  ++::zt::detail::thread_work_counts().launches;
  const void* pa = a.data_ptr();
  const void* pb = b.data_ptr();
  void* pc = c.data_ptr();

  // Row-major C_i = op(A_i) op(B_i) is column-major C_i^T = op(B_i)^T op(A_i)^T, as in gemm.
  if (c.dtype() == DType::f64) {
    CUBLAS_CHECK(cublasDgemmStridedBatched(h, sh.op_b, sh.op_a, sh.n, sh.m, sh.k, &alpha,
                                           static_cast<const double*>(pb), sh.ldb, stride_b,
                                           static_cast<const double*>(pa), sh.lda, stride_a, &beta,
                                           static_cast<double*>(pc), sh.ldc, stride_c, ibatch));
    return;
  }
  const GemmTypes t = gemm_types(c.dtype(), "gemm_batched");
  float fa = static_cast<float>(alpha), fb = static_cast<float>(beta);  // fp32 scaling
  CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      h, sh.op_b, sh.op_a, sh.n, sh.m, sh.k, &fa, pb, t.type, sh.ldb, stride_b, pa, t.type, sh.lda,
      stride_a, &fb, pc, t.type, sh.ldc, stride_c, ibatch, t.compute, CUBLAS_GEMM_DEFAULT));
}

}  // namespace zt::cuda
