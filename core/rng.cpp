// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3").
#include "core/rng.h"

#include <cmath>

namespace zt {

void Philox::block(uint64_t key, uint64_t counter_hi, uint64_t counter_lo, uint32_t out[4]) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t c0 = static_cast<uint32_t>(counter_lo), c1 = static_cast<uint32_t>(counter_lo >> 32);
  uint32_t c2 = static_cast<uint32_t>(counter_hi), c3 = static_cast<uint32_t>(counter_hi >> 32);
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int r = 0; r < 10; ++r) {
    uint64_t p0 = static_cast<uint64_t>(kM0) * c0;
    uint64_t p1 = static_cast<uint64_t>(kM1) * c2;
    uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    uint32_t n1 = static_cast<uint32_t>(p1);
    uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    uint32_t n3 = static_cast<uint32_t>(p0);
    c0 = n0, c1 = n1, c2 = n2, c3 = n3;
    k0 += kW0, k1 += kW1;
  }
  out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

double Philox::to_unit64(uint32_t a, uint32_t b) {
  uint64_t x = (static_cast<uint64_t>(a) << 21) ^ (b >> 11);
  return static_cast<double>(x & ((1ull << 53) - 1)) * (1.0 / 9007199254740992.0);
}

// Each stream position p owns Philox block p: uniform draws use its first word,
// normal draws its first two (Box-Muller, cosine branch). Positions never overlap.
uint32_t Generator::word(uint64_t index) const {
  uint32_t out[4];
  Philox::block(seed_, 0, index, out);
  return out[0];
}

static double box_muller(double u1, double u2) {
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586476925 * u2);
}

float Generator::normal(uint64_t index) const {
  uint32_t out[4];
  Philox::block(seed_, 0, index, out);
  double u1 = (static_cast<double>(out[0]) + 1.0) * (1.0 / 4294967296.0);  // (0, 1]
  double u2 = static_cast<double>(out[1]) * (1.0 / 4294967296.0);
  return static_cast<float>(box_muller(u1, u2));
}

double Generator::uniform64(uint64_t index) const {
  uint32_t out[4];
  Philox::block(seed_, 0, index, out);
  return Philox::to_unit64(out[0], out[1]);
}

double Generator::normal64(uint64_t index) const {
  uint32_t out[4];
  Philox::block(seed_, 0, index, out);
  double u1 = 1.0 - Philox::to_unit64(out[0], out[1]);  // (0, 1]
  double u2 = Philox::to_unit64(out[2], out[3]);
  return box_muller(u1, u2);
}

Generator& default_generator() {
  thread_local Generator g(0);
  return g;
}

void manual_seed(uint64_t seed) {
  default_generator().set_state(seed, 0);
}

}  // namespace zt
