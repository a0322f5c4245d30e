// The Winograd tile transforms run a chunk of tile rows per call, compiled once per ISA
// (core/cpu/winograd_chunk.h): AVX-512 on vectors of 16 tiles, AVX2 on 8, the SSE2
// baseline on 4, each finishing a row with narrower vectors and single tiles. The
// convolution tests run only the copy this CPU picks; here every copy the CPU can run,
// the SSE2 one included, must give the bits of a scalar copy that takes one tile at a time
// (the transforms only add, in the same order in every lane), on every kind of row: read
// in place (W = 2 tw with tw = 16, 8, 4, 12 = 8 + 4 and 20 = 16 + 4 tiles), padded rows
// with vector and single-tile tails (W = 36: 16 + 2 tiles; odd sizes), whole 4x4 images
// and 1x1 images, in chunks that start and end inside an image.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "core/cpu/winograd_chunk.h"

using namespace zt;
using cpu::ImageGrid;
using cpu::Isa;
using cpu::point_stride;
using cpu::WinogradTransforms;

namespace {

constexpr int64_t kPoints = 16;

std::vector<float> random_values(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = uniform(rng);
  return v;
}

// Compares bit patterns; reports the first differing element and how many differ.
void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want,
                      const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int64_t first = -1, count = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
      if (first < 0) first = static_cast<int64_t>(i);
      ++count;
    }
  EXPECT_EQ(count, 0) << what << ": first at " << first << ", " << (first >= 0 ? got[first] : 0.0f)
                      << " vs " << (first >= 0 ? want[first] : 0.0f);
}

// The three transforms of `fn` on a chunk [r0, r0 + rows) of m samples of (3 channels,
// d, h, w) images: input points, outputs (with bias, over a prefilled tensor) and
// gradient points, concatenated.
std::vector<std::vector<float>> run_chunk(const WinogradTransforms<float>& fn, const ImageGrid& im,
                                          int64_t m, int64_t r0, int64_t rows) {
  const int64_t channels = 3, nt = rows * im.tw, ps = point_stride(channels, nt);
  const int64_t numel = m * channels * im.d * im.h * im.w;
  const std::vector<float> x = random_values(numel, 1), points = random_values(kPoints * ps, 2);
  const std::vector<float> bias = random_values(channels, 3);
  std::vector<float> pad(4 * (2 * im.tw + 2), 0.0f), rows2(4 * im.tw, 0.0f);
  std::vector<float> v(kPoints * ps, 0.0f), y(numel, 7.0f), gv(kPoints * ps, 0.0f);
  fn.inputs(im, channels, x.data(), r0, rows, v.data(), pad.data());
  fn.outputs(im, channels, points.data(), bias.data(), r0, rows, y.data(), rows2.data());
  std::fill(rows2.begin(), rows2.end(), 0.0f);  // each transform starts from fresh scratch
  fn.grads(im, channels, x.data(), r0, rows, gv.data(), rows2.data());
  return {v, y, gv};
}

}  // namespace

TEST(WinogradChunk, EveryIsaGivesTheScalarBits) {
  struct Case {
    int64_t d, h, w;
  };
  const std::vector<Case> cases = {{1, 32, 32}, {2, 16, 16}, {1, 8, 8}, {1, 6, 24}, {1, 5, 36},
                                   {1, 7, 9},   {2, 4, 4},   {1, 1, 1}, {1, 4, 40}, {2, 3, 2}};
  const std::vector<Isa> isas = {Isa::kSse2, Isa::kAvx2, Isa::kAvx512};
  int compared = 0;
  for (const Case& c : cases) {
    const ImageGrid im{c.d, c.h, c.w, (c.h + 1) / 2, (c.w + 1) / 2};
    const int64_t m = 2, total_rows = m * im.d * im.th;
    // The whole tensor as one chunk, and one that starts and ends inside an image.
    for (const auto& [r0, rows] :
         std::vector<std::pair<int64_t, int64_t>>{{0, total_rows}, {1, total_rows - 2}}) {
      if (rows < 1) continue;
      const auto want = run_chunk(cpu::winograd_transforms_f32_scalar(), im, m, r0, rows);
      for (Isa isa : isas) {
        if (cpu::cpu_isa() < isa) continue;
        const auto got = run_chunk(cpu::winograd_transforms_f32(isa), im, m, r0, rows);
        const std::string what = "isa " + std::to_string(static_cast<int>(isa)) + ", " +
                                 std::to_string(c.d) + "x" + std::to_string(c.h) + "x" +
                                 std::to_string(c.w) + ", rows " + std::to_string(r0) + "+" +
                                 std::to_string(rows);
        expect_same_bits(got[0], want[0], what + ": input points");
        expect_same_bits(got[1], want[1], what + ": outputs");
        expect_same_bits(got[2], want[2], what + ": gradient points");
        ++compared;
      }
    }
  }
  // SSE2 runs everywhere; the wider ISAs only where this CPU has them (and ZT_CPU_ISA
  // allows them): say which ran.
  std::printf(
      "[ compared ] %d chunks; SSE2, %s, %s\n", compared,
      cpu::cpu_isa() >= Isa::kAvx2 ? "AVX2" : "not AVX2 (not on this CPU, or above ZT_CPU_ISA)",
      cpu::cpu_isa() >= Isa::kAvx512 ? "AVX-512"
                                     : "not AVX-512 (not on this CPU, or above ZT_CPU_ISA)");
}
