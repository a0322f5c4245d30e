// Devices: the CPU always, CUDA GPUs when zt is built with ZT_CUDA.
#pragma once

#include <string>

namespace zt {

enum class DeviceType : uint8_t { CPU, CUDA };

/// CUDA devices zt addresses per process: cuda:0 .. cuda:15. Per-device tables (streams,
/// library handles, error records, memory ledgers) are sized from it.
inline constexpr int kMaxCudaDevices = 16;

/// A device: type plus index (the CUDA ordinal; 0 for the CPU).
struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  static Device cpu() { return {DeviceType::CPU, 0}; }
  static Device cuda(int i = 0) { return {DeviceType::CUDA, i}; }
  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  bool operator==(const Device&) const = default;
  /// "cpu" or "cuda:0".
  std::string str() const {
    return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index);
  }
  /// Parses "cpu", "cuda", "cuda:1"; throws on anything else.
  static Device parse(const std::string& s);
};

/// True when zt was built with CUDA and at least one GPU is visible.
bool cuda_available();
/// Number of visible GPUs (0 without CUDA).
int cuda_device_count();
/// True while this thread is capturing a CUDA graph (core/cuda/graph.h): work issued now
/// is recorded for replay, not run.
bool graph_capturing();

/// Whether f32 work on CUDA may use TF32 tensor cores (inputs rounded to 10 mantissa
/// bits, fp32 accumulation), for matrix multiplies (cuBLAS) and convolutions (cuDNN)
/// separately. The library's default is exact fp32 for both; the apps turn
/// convolutions on (train.tf32: conv), as PyTorch does. No effect on the CPU or on
/// other dtypes. Process-wide. TF32 costs about 1e-3 relative error in f32 GEMMs and
/// convolutions and is much faster; off, f32 results match the CPU to float rounding.
struct Tf32Policy {
  bool matmul = false;
  bool conv = false;
};
void set_tf32(Tf32Policy policy);
Tf32Policy tf32();

}  // namespace zt
