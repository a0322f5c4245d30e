// How convolutions and GEMMs on a GPU choose among their libraries' algorithms: set by the
// apps (train.cudnn_benchmark, train.cudnn_deterministic, train.gemm_benchmark), zt-bench
// and embedding code, read by the CUDA convolution (core/cuda/conv.cu) and the cuBLASLt
// GEMMs (core/cuda/gemm_lt.cpp).
#pragma once

namespace zt {

/// How convolutions on CUDA choose among cuDNN's algorithms for a shape (the apps'
/// train.cudnn_benchmark and train.cudnn_deterministic; PyTorch's
/// torch.backends.cudnn.benchmark and .deterministic). No effect on the CPU. Process-wide.
/// - deterministic (default on): algorithms that give the same bits on every run are tried
///   before those that sum with atomics; off, all compete in cuDNN's order.
/// - benchmark (default: ZT_CUDNN_BENCHMARK=1, else off): a shape's first call outside a
///   graph capture runs each candidate of its first group once more, timed (a host wait per
///   candidate, once per shape), and the fastest is used from then on. Off, cuDNN's
///   heuristic ranking decides, the same algorithm on every run; on, another run may time
///   another algorithm faster, and results may then differ in the last bits.
/// Either setting keeps the f32 accuracy order of exact f32 (train.tf32: none), where
/// sums of products come before FFT and Winograd (core/cuda/conv_rank.h).
struct ConvAlgoPolicy {
  bool benchmark = false;
  bool deterministic = true;
};
void set_conv_algo_policy(ConvAlgoPolicy policy);
ConvAlgoPolicy conv_algo_policy();

/// How GEMMs on CUDA choose among cuBLASLt's algorithms (the apps' train.gemm_benchmark;
/// what PyTorch's TunableOp does). No effect on the CPU. Process-wide. Default:
/// ZT_GEMM_BENCHMARK=1, else off.
/// - off: the GEMM epilogues (bias, GELU) take cuBLASLt's first heuristic answer and the
///   plain GEMMs run through cuBLAS, the same algorithm on every run.
/// - on: every non-f64 GEMM runs through cuBLASLt. On a problem's first call outside a
///   graph capture, each of up to 8 heuristic candidates runs twice, the second run timed
///   (a host wait per candidate, once per problem and thread), and the fastest is used from
///   then on. Split-K candidates that round their partial sums to a 16-bit output type do
///   not compete. Another run may time another algorithm faster, and results may then
///   differ in the last bits.
void set_gemm_benchmark(bool on);
bool gemm_benchmark();

}  // namespace zt
