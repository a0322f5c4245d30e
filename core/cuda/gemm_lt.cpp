// cuda::gemm_epilogue through cuBLASLt: one cublasLtMatmul whose epilogue adds the bias
// and applies the tanh-approximation GELU (storing its input in aux) on the fp32
// accumulator before the single rounding to the output type. As in gemm.cpp, row-major
// C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, so cuBLASLt's A is our B and its
// (n, m) result's row vector of n biases, broadcast over the m columns, is our bias (n)
// broadcast over the rows. The matmul descriptor, the matrix layouts and the heuristic's
// algorithm are cached per thread for each problem (dtype, compute type, operations,
// sizes, epilogue and the operands' pointer alignments). f64, f32 GELU (cuBLASLt's GELU is
// an approximation of its own), GELU with n not a multiple of 8 (the aux leading dimension
// must be), bias or aux pointers not 16-byte aligned, and problems for which cuBLASLt
// offers no algorithm or refuses its algorithm at run time (said once on stderr) run gemm
// with the bias preloaded and then the copy and unary kernels instead: the same function,
// with the pre-activation rounded before GELU.
#include <cublasLt.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>

#include "core/cuda/allocator.h"
#include "core/cuda/check.h"
#include "core/cuda/gemm.h"
#include "core/cuda/stream.h"
#include "core/kernels.h"

namespace zt::cuda {

namespace {

// The most workspace an algorithm may ask for (NVIDIA's suggestion for Hopper); each
// call takes only what its algorithm needs, from the caching allocator.
constexpr uint64_t kMaxWorkspaceBytes = uint64_t{32} << 20;

// This thread's cuBLASLt handle on `dev`.
cublasLtHandle_t lt_handle(int dev) {
  return thread_handle<cublasLtHandle_t>(
      dev,
      [] {
        cublasLtHandle_t made = nullptr;
        CUBLAS_CHECK(cublasLtCreate(&made));
        return made;
      },
      [](cublasLtHandle_t made) { cublasLtDestroy(made); });
}

// The largest power of two, at most 256, that divides the address (nullptr: 256).
int64_t alignment(const void* p) {
  const auto v = reinterpret_cast<uintptr_t>(p);
  int64_t a = 256;
  while (a > 1 && v % static_cast<uintptr_t>(a) != 0) a /= 2;
  return a;
}

template <typename T>
void set_desc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const T& value) {
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value)));
}

// One problem's descriptor, layouts, heuristic preference and chosen algorithm
// (found = false: cuBLASLt offered none); owns the cuBLASLt objects.
struct LtPlan {
  LtPlan() = default;
  ~LtPlan() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
  LtPlan(const LtPlan&) = delete;
  LtPlan& operator=(const LtPlan&) = delete;

  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;  // cuBLASLt's A, B, C = D
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;
  bool found = false;
};

// The row-major problem of one call, in cuBLASLt's column-major terms.
struct LtProblem {
  bool ta, tb;
  int64_t m, n, k, lda, ldb;
  GemmTypes types;
  cublasLtEpilogue_t epilogue;
  const void *a, *b, *out, *bias, *aux;
};

std::unique_ptr<LtPlan> make_plan(cublasLtHandle_t h, const LtProblem& p) {
  auto plan = std::make_unique<LtPlan>();
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->desc, p.types.compute, CUDA_R_32F));
  // cuBLASLt's A is our B and its B our A (see the file comment).
  set_desc(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, p.tb ? CUBLAS_OP_T : CUBLAS_OP_N);
  set_desc(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, p.ta ? CUBLAS_OP_T : CUBLAS_OP_N);
  set_desc(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, p.epilogue);
  if (p.bias) set_desc(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, p.bias);
  if (p.aux) {
    set_desc(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, p.aux);
    set_desc(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, p.n);
  }
  const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->a, p.types.type, u(p.tb ? p.k : p.n),
                                          u(p.tb ? p.n : p.k), p.ldb));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->b, p.types.type, u(p.ta ? p.m : p.k),
                                          u(p.ta ? p.k : p.m), p.lda));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->c, p.types.type, u(p.n), u(p.m), p.n));

  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&plan->pref));
  auto set_pref = [&](cublasLtMatmulPreferenceAttributes_t attr, auto value) {
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(plan->pref, attr, &value, sizeof(value)));
  };
  set_pref(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, kMaxWorkspaceBytes);
  set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, static_cast<uint32_t>(alignment(p.b)));
  set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, static_cast<uint32_t>(alignment(p.a)));
  set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, static_cast<uint32_t>(alignment(p.out)));
  set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, static_cast<uint32_t>(alignment(p.out)));

  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  cublasStatus_t st = ZT_API(cublasLtMatmulAlgoGetHeuristic(
      h, plan->desc, plan->a, plan->b, plan->c, plan->c, plan->pref, 1, &result, &returned));
  if (st == CUBLAS_STATUS_SUCCESS && returned > 0 && result.state == CUBLAS_STATUS_SUCCESS) {
    plan->algo = result.algo;
    plan->workspace = result.workspaceSize;
    plan->found = true;
  } else {  // correct but slower: said once per problem, so that a benchmark shows it
    std::fprintf(stderr,
                 "zt: cuBLASLt has no algorithm for the %lldx%lldx%lld GEMM epilogue %d (%s); "
                 "running GEMM and epilogue apart\n",
                 static_cast<long long>(p.m), static_cast<long long>(p.n),
                 static_cast<long long>(p.k), static_cast<int>(p.epilogue),
                 st == CUBLAS_STATUS_SUCCESS ? "no result" : cublasGetStatusName(st));
  }
  return plan;
}

// This thread's plan for the problem, made on first use.
LtPlan& plan_for(int dev, cublasLtHandle_t h, const LtProblem& p) {
  using Key = std::array<int64_t, 16>;
  thread_local std::map<Key, std::unique_ptr<LtPlan>> plans;
  const Key key{dev,
                static_cast<int64_t>(p.types.type),
                static_cast<int64_t>(p.types.compute),
                p.ta,
                p.tb,
                p.m,
                p.n,
                p.k,
                p.lda,
                p.ldb,
                static_cast<int64_t>(p.epilogue),
                alignment(p.a),
                alignment(p.b),
                alignment(p.out),
                p.bias ? alignment(p.bias) : 0,
                p.aux ? alignment(p.aux) : 0};
  auto it = plans.find(key);
  if (it == plans.end()) it = plans.emplace(key, make_plan(h, p)).first;
  return *it->second;
}

// gemm with the bias rows preloaded (beta = 1), then aux = out and out = gelu(aux).
void gemm_epilogue_composed(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                            const Tensor& a, int64_t lda, const Tensor& b, int64_t ldb,
                            const Tensor& bias, bool gelu, const Tensor& out, const Tensor& aux) {
  Tensor o2 = out.view({m, n});
  if (bias.defined()) cuda::copy(o2, bias.view({1, n}).expand({m, n}));
  cuda::gemm(trans_a, trans_b, m, n, k, 1.0, a, lda, b, ldb, bias.defined() ? 1.0 : 0.0, o2, n);
  if (gelu) {
    Tensor x2 = aux.view({m, n});
    cuda::copy(x2, o2);
    cuda::unary(UnaryOp::kGeluTanh, o2, x2, 0.0, 0.0);
  }
}

}  // namespace

void gemm_epilogue(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const Tensor& a,
                   int64_t lda, const Tensor& b, int64_t ldb, const Tensor& bias, bool gelu,
                   const Tensor& out, const Tensor& aux) {
  ZT_CHECK(a.device() == out.device() && b.device() == out.device() &&
               (!bias.defined() || bias.device() == out.device()) &&
               (!gelu || aux.device() == out.device()),
           "gemm_epilogue: operands on different devices (output on ", out.device().str(), ")");
  ZT_CHECK(a.dtype() == out.dtype() && b.dtype() == out.dtype() &&
               (!bias.defined() || bias.dtype() == out.dtype()) &&
               (!gelu || aux.dtype() == out.dtype()),
           "gemm_epilogue: mixed dtypes (output ", dtype_name(out.dtype()), ")");
  if (m == 0 || n == 0) return;
  DeviceGuard g(out.device().index);
  // The aux leading dimension (n) must be a multiple of 8 for cuBLASLt, and its epilogue
  // vectors are read as 16-byte aligned (a bias view at an odd offset is not).
  const bool vectors_aligned = (!bias.defined() || alignment(bias.data_ptr()) >= 16) &&
                               (!gelu || alignment(aux.data_ptr()) >= 16);
  // f32 GELU stays exact: cuBLASLt's GELU epilogue is an approximation of its own, whose
  // error may exceed f32's (the composed path runs the same tanh GELU as the CPU).
  if (out.dtype() == DType::f64 || (gelu && (n % 8 != 0 || out.dtype() == DType::f32)) ||
      !vectors_aligned) {
    gemm_epilogue_composed(trans_a, trans_b, m, n, k, a, lda, b, ldb, bias, gelu, out, aux);
    return;
  }
  LtProblem p{trans_a,
              trans_b,
              m,
              n,
              k,
              lda,
              ldb,
              gemm_types(out.dtype(), "gemm_epilogue"),
              gelu ? (bias.defined() ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX)
                   : (bias.defined() ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT),
              a.data_ptr(),
              b.data_ptr(),
              out.data_ptr(),
              bias.defined() ? bias.data_ptr() : nullptr,
              gelu ? aux.data_ptr() : nullptr};
  const int dev = out.device().index;
  cublasLtHandle_t h = lt_handle(dev);
  LtPlan& plan = plan_for(dev, h, p);
  if (!plan.found) {
    gemm_epilogue_composed(trans_a, trans_b, m, n, k, a, lda, b, ldb, bias, gelu, out, aux);
    return;
  }
  // The cached descriptor holds the first call's pointers; this call's go in now.
  if (p.bias) set_desc(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, p.bias);
  if (p.aux) set_desc(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, p.aux);
  const Tensor workspace = device_bytes(plan.workspace, out.device());
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t st = ZT_API(cublasLtMatmul(
      h, plan.desc, &alpha, p.b, plan.a, p.a, plan.b, &beta, p.out, plan.c, out.data_ptr(), plan.c,
      &plan.algo, workspace.defined() ? workspace.data_ptr() : nullptr, plan.workspace,
      current_stream(dev)));
  if (st == CUBLAS_STATUS_NOT_SUPPORTED) {  // the heuristic's algorithm refused at run time
    std::fprintf(stderr,
                 "zt: cuBLASLt refused its algorithm for the %lldx%lldx%lld GEMM "
                 "epilogue; running GEMM and epilogue apart\n",
                 static_cast<long long>(m), static_cast<long long>(n), static_cast<long long>(k));
    plan.found = false;
    gemm_epilogue_composed(trans_a, trans_b, m, n, k, a, lda, b, ldb, bias, gelu, out, aux);
    return;
  }
  CUBLAS_CHECK(st);
  ++::zt::detail::thread_work_counts().launches;
}

}  // namespace zt::cuda
