// Test helpers: tensor comparisons that print the first mismatches and the largest
// difference, and a finite-difference gradient checker (f64, central differences).
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/ops.h"
#include "core/parallel.h"

namespace zt::test {

/// Passes if |a - b| <= atol + rtol * |b| elementwise (same shape). A NaN on either side
/// fails; equal infinities pass.
::testing::AssertionResult all_close(const Tensor& a, const Tensor& b, double rtol = 1e-5,
                                     double atol = 1e-6);
/// Passes if a equals `expected` (row-major) elementwise within tolerance.
::testing::AssertionResult values_are(const Tensor& a, const std::vector<double>& expected,
                                      double tol = 1e-5);

/// Checks the analytic gradients of `fn` (a scalar-valued or any-shaped function of
/// `inputs`, all f64 leaves) against central differences. A non-scalar output is reduced
/// with a fixed random weighting so every output element matters. Fails when no input
/// requires grad, or when a gradient (analytic or numeric) is NaN.
::testing::AssertionResult grad_check(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                                      const std::vector<Tensor>& inputs, double eps = 1e-6,
                                      double tol = 1e-5);

/// The message of the exception fn() throws, or "" when it throws none.
std::string error_of(const std::function<void()>& fn);

/// <temp dir>/<name>_<pid>, created: a folder of this process alone (two build trees may
/// run the same tests at once), removed with everything in it when the process exits.
std::string process_temp_dir(const std::string& name);

/// Writes `text` to process_temp_dir(folder)/<sub>/<name> (folders created) and returns
/// the path.
std::string write_temp_file(const std::string& folder, const std::string& sub,
                            const std::string& name, const std::string& text);

/// Sets this thread's kernel thread count for its scope, then restores the previous one.
class ThreadCount {
 public:
  explicit ThreadCount(int n) : prev_(num_threads()) { set_num_threads(n); }
  ~ThreadCount() { set_num_threads(prev_); }
  ThreadCount(const ThreadCount&) = delete;
  ThreadCount& operator=(const ThreadCount&) = delete;

 private:
  int prev_;
};

/// Passes if fn() throws zt::Error whose message contains `phrase`.
template <typename Fn>
::testing::AssertionResult throws_with(Fn&& fn, const std::string& phrase) {
  try {
    fn();
  } catch (const Error& e) {
    if (std::string(e.what()).find(phrase) != std::string::npos)
      return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "message lacks '" << phrase << "': " << e.what();
  }
  return ::testing::AssertionFailure() << "no zt::Error thrown (wanted '" << phrase << "')";
}

/// An f64 leaf requiring grad with values from a seeded generator (normal).
Tensor rand_leaf(const Shape& sizes, uint64_t seed);

/// The reflected CRC-32 of n bytes with polynomial `poly`, bit by bit (a reference for
/// the table-driven ones): 0xedb88320 is PNG's and zlib's, 0x82f63b78 is CRC-32C.
inline uint32_t bitwise_crc32(const uint8_t* bytes, size_t n, uint32_t poly) {
  uint32_t crc = 0xffffffffu;
  for (size_t i = 0; i < n; ++i) {
    crc ^= bytes[i];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (poly & (0u - (crc & 1u)));
  }
  return crc ^ 0xffffffffu;
}

}  // namespace zt::test

#define EXPECT_CLOSE(a, b, ...) EXPECT_TRUE(::zt::test::all_close(a, b, ##__VA_ARGS__))
#define EXPECT_GRAD_OK(...) EXPECT_TRUE(::zt::test::grad_check(__VA_ARGS__))
