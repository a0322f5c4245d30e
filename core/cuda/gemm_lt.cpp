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
// Under gemm_benchmark() (core/algo_policy.h) the plain GEMMs run here too (gemm_lt, no
// epilogue), and a plan keeps up to kCandidates heuristic answers, which its first call
// outside a graph capture times (time_candidates).
#include <cublasLt.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <vector>

#include "core/algo_policy.h"
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
// How many heuristic answers a plan keeps under gemm_benchmark(), and how many runs of
// each are timed together (after one untimed): back to back, so the GPU's time, not the
// host's per call, decides between small GEMMs.
constexpr int kCandidates = 8;
constexpr int kTimedRuns = 5;

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
// (found = false: cuBLASLt offered none), with the other candidates under gemm_benchmark()
// and whether they were timed; owns the cuBLASLt objects.
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
  std::vector<cublasLtMatmulHeuristicResult_t> candidates;  // heuristic order; algo is one
  bool timed = false;
};

// The row-major problem of one call (out = alpha op(a) op(b) + beta out, then the
// epilogue), with its operands' pointers.
struct LtProblem {
  bool ta, tb;
  int64_t m, n, k, lda, ldb, ldc;
  GemmTypes types;
  int64_t elem_bytes;
  const void *a, *b;
  void* out;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  void* aux = nullptr;
  float alpha = 1.0f, beta = 0.0f;
  bool benchmark = gemm_benchmark();  // when the call was made
};

// The problem out = op(a) op(b) of one call, before its epilogue and scaling; errors
// name `op`.
LtProblem lt_problem(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const Tensor& a,
                     int64_t lda, const Tensor& b, int64_t ldb, const Tensor& out, int64_t ldc,
                     const char* op) {
  return {ta,
          tb,
          m,
          n,
          k,
          lda,
          ldb,
          ldc,
          gemm_types(out.dtype(), op),
          static_cast<int64_t>(dtype_size(out.dtype())),
          a.data_ptr(),
          b.data_ptr(),
          out.data_ptr()};
}

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
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->c, p.types.type, u(p.n), u(p.m), p.ldc));

  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&plan->pref));
  auto set_pref = [&](cublasLtMatmulPreferenceAttributes_t attr, auto value) {
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(plan->pref, attr, &value, sizeof(value)));
  };
  set_pref(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, kMaxWorkspaceBytes);
  set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, static_cast<uint32_t>(alignment(p.b)));
  set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, static_cast<uint32_t>(alignment(p.a)));
  set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, static_cast<uint32_t>(alignment(p.out)));
  set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, static_cast<uint32_t>(alignment(p.out)));
  // 16-bit GEMMs accumulate in f32 (kernel_list.h): no algorithm, the heuristic's first
  // or a timed candidate, may keep split-K partial sums in a 16-bit output type, in the
  // output (INPLACE) or in the workspace (OUTPUT_TYPE); split-K reduced in f32
  // (COMPUTE_TYPE) and no split-K are allowed.
  if (p.types.type != CUDA_R_32F)
    set_pref(CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
             static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE));

  std::vector<cublasLtMatmulHeuristicResult_t> results(p.benchmark ? kCandidates : 1);
  int returned = 0;
  cublasStatus_t st = ZT_API(
      cublasLtMatmulAlgoGetHeuristic(h, plan->desc, plan->a, plan->b, plan->c, plan->c, plan->pref,
                                     static_cast<int>(results.size()), results.data(), &returned));
  if (st == CUBLAS_STATUS_SUCCESS)
    for (int i = 0; i < returned; ++i)
      if (results[static_cast<size_t>(i)].state == CUBLAS_STATUS_SUCCESS)
        plan->candidates.push_back(results[static_cast<size_t>(i)]);
  if (!plan->candidates.empty()) {
    plan->algo = plan->candidates.front().algo;
    plan->workspace = plan->candidates.front().workspaceSize;
    plan->found = true;
  } else if (p.epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
    // correct but slower: said once per problem, so that a benchmark shows it (a plain
    // GEMM goes back to cuBLAS, as without gemm_benchmark)
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
  using Key = std::array<int64_t, 18>;
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
                p.ldc,
                p.benchmark,
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

// One cublasLtMatmul of the plan's problem with `choice`, writing `out`.
cublasStatus_t run_choice(cublasLtHandle_t h, const LtPlan& plan, const LtProblem& p,
                          const cublasLtMatmulHeuristicResult_t& choice, void* out, Device dev) {
  const Tensor workspace = device_bytes(choice.workspaceSize, dev);
  return ZT_API(cublasLtMatmul(h, plan.desc, &p.alpha, p.b, plan.a, p.a, plan.b, &p.beta, out,
                               plan.c, out, plan.c, &choice.algo,
                               workspace.defined() ? workspace.data_ptr() : nullptr,
                               choice.workspaceSize, current_stream(dev.index)));
}

// gemm_benchmark(): each candidate runs once, then kTimedRuns more times between two events
// (one host wait per candidate, once per plan), and the fastest becomes the plan's
// algorithm. The runs write the call's own output and aux, which the real call writes
// again after; with beta != 0 (the output is read) they write a scratch output instead, so
// that nothing the caller holds changes. A candidate refused at run time, or whose workspace does
// not fit in memory, does not compete; nothing to time (one candidate, no scratch memory) keeps the
// heuristic's first.
void time_candidates(cublasLtHandle_t h, LtPlan& plan, const LtProblem& p, Device dev) {
  plan.timed = true;
  if (plan.candidates.size() < 2) return;
  void* out = p.out;
  Tensor scratch;
  if (p.beta != 0.0f) {
    try {
      scratch = device_bytes(static_cast<size_t>(((p.m - 1) * p.ldc + p.n) * p.elem_bytes), dev);
    } catch (const OutOfMemoryError&) {
      return;
    }
    out = scratch.data_ptr();
  }
  const cudaStream_t stream = current_stream(dev.index);
  float best_ms = INFINITY;
  for (const cublasLtMatmulHeuristicResult_t& c : plan.candidates) {
    try {
      if (run_choice(h, plan, p, c, out, dev) != CUBLAS_STATUS_SUCCESS) continue;
      Event start(true), stop(true);
      start.record(stream);
      cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
      for (int r = 0; r < kTimedRuns && st == CUBLAS_STATUS_SUCCESS; ++r)
        st = run_choice(h, plan, p, c, out, dev);
      stop.record(stream);
      stop.synchronize();
      const float ms = stop.elapsed_ms(start);
      if (st == CUBLAS_STATUS_SUCCESS && ms < best_ms) {
        best_ms = ms;
        plan.algo = c.algo;
        plan.workspace = c.workspaceSize;
      }
    } catch (const OutOfMemoryError&) {
    }
  }
}

// Runs the problem through its plan: false when cuBLASLt offers no algorithm or refuses its
// algorithm at run time (the plan then says so on later calls too), for the caller's other
// path; errors throw.
bool run_lt(const LtProblem& p, Device dev) {
  cublasLtHandle_t h = lt_handle(dev.index);
  LtPlan& plan = plan_for(dev.index, h, p);
  if (!plan.found) return false;
  // The cached descriptor holds the first call's pointers; this call's go in now.
  if (p.bias) set_desc(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, p.bias);
  if (p.aux) set_desc(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, p.aux);
  if (p.benchmark && !plan.timed && !graph_capturing()) time_candidates(h, plan, p, dev);
  cublasLtMatmulHeuristicResult_t choice{};
  choice.algo = plan.algo;
  choice.workspaceSize = plan.workspace;
  const cublasStatus_t st = run_choice(h, plan, p, choice, p.out, dev);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED) {  // the heuristic's algorithm refused at run time
    if (p.epilogue != CUBLASLT_EPILOGUE_DEFAULT)
      std::fprintf(stderr,
                   "zt: cuBLASLt refused its algorithm for the %lldx%lldx%lld GEMM "
                   "epilogue; running GEMM and epilogue apart\n",
                   static_cast<long long>(p.m), static_cast<long long>(p.n),
                   static_cast<long long>(p.k));
    plan.found = false;
    return false;
  }
  CUBLAS_CHECK_STATUS(st, "cublasLtMatmul");
  ++::zt::detail::thread_work_counts().launches;
  return true;
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
  LtProblem p = lt_problem(trans_a, trans_b, m, n, k, a, lda, b, ldb, out, n, "gemm_epilogue");
  p.epilogue = gelu
                   ? (bias.defined() ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX)
                   : (bias.defined() ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT);
  p.bias = bias.defined() ? bias.data_ptr() : nullptr;
  p.aux = gelu ? aux.data_ptr() : nullptr;
  if (!run_lt(p, out.device()))
    gemm_epilogue_composed(trans_a, trans_b, m, n, k, a, lda, b, ldb, bias, gelu, out, aux);
}

bool gemm_lt(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
             const Tensor& a, int64_t lda, const Tensor& b, int64_t ldb, float beta,
             const Tensor& c, int64_t ldc) {
  if (k == 0) return false;  // c = beta c: cuBLAS's case (no empty layouts for cuBLASLt)
  LtProblem p = lt_problem(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc, "gemm");
  p.alpha = alpha;
  p.beta = beta;
  p.benchmark = true;
  return run_lt(p, c.device());
}

}  // namespace zt::cuda
