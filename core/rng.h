// Counter-based random numbers (Philox4x32-10). A Generator is (seed, offset): drawing
// n numbers consumes n counter positions, so the stream is reproducible anywhere —
// on every rank and on CPU and CUDA alike.
#pragma once

#include <cstdint>

namespace zt {

struct Philox {
  /// Four 32-bit random words for (key, counter).
  static void block(uint64_t key, uint64_t counter_hi, uint64_t counter_lo, uint32_t out[4]);
  /// Uniform float in [0, 1) from a 32-bit word (24 bits of mantissa).
  static float to_unit(uint32_t x) { return static_cast<float>(x >> 8) * (1.0f / 16777216.0f); }
  /// Uniform double in [0, 1) from two words.
  static double to_unit64(uint32_t a, uint32_t b);
};

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : seed_(seed) {}
  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_; }
  void set_state(uint64_t seed, uint64_t offset) {
    seed_ = seed;
    offset_ = offset;
  }
  /// Reserves n counter positions; returns the first.
  uint64_t advance(uint64_t n) {
    uint64_t o = offset_;
    offset_ += n;
    return o;
  }
  /// The random word at stream position `index`.
  uint32_t word(uint64_t index) const;
  /// A uniform in [0, 1) at stream position `index`.
  float uniform(uint64_t index) const { return Philox::to_unit(word(index)); }
  /// A standard normal at stream position `index`.
  float normal(uint64_t index) const;
  double uniform64(uint64_t index) const;
  double normal64(uint64_t index) const;

 private:
  uint64_t seed_;
  uint64_t offset_ = 0;
};

/// This thread's default generator (thread ranks each have one).
Generator& default_generator();
/// Seeds this thread's default generator and resets its offset.
void manual_seed(uint64_t seed);

}  // namespace zt
