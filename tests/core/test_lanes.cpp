// The f32 lane math (core/cpu/lanes.h) behind exp, sigmoid, SiLU and both GELUs: a
// contiguous row and a strided one (a view's elements, gathered into rows for the same
// row kernel) give the same bits, and both stay within a millionth of the f64 kernels,
// from the tails (where e^x under- or overflows) to zero.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "core/cpu/lanes.h"
#include "core/kernels.h"

using namespace zt;

namespace {

// 2000 points on [-25, 25] plus the edges: zero, tiny values, both signs.
std::vector<float> sample_points() {
  std::vector<float> v;
  for (int i = 0; i < 2000; ++i) v.push_back(-25.0f + 50.0f * static_cast<float>(i) / 1999.0f);
  for (float e : {0.0f, 1e-30f, 1e-7f, 1e-3f, 0.5f, 1.0f, 3.0f, 8.0f, 88.0f, 100.0f}) {
    v.push_back(e);
    v.push_back(-e);
  }
  return v;
}

Tensor f32_of(const std::vector<float>& v) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::f32);
  std::memcpy(t.data_ptr(), v.data(), v.size() * sizeof(float));
  return t;
}

// An upstream gradient unlike x: 0.25 + 0.5 x reversed.
Tensor upstream_for(const std::vector<float>& pts) {
  std::vector<float> g(pts.rbegin(), pts.rend());
  for (float& v : g) v = 0.25f + 0.5f * v;
  return f32_of(g);
}

// The same values as every other element of a (n, 2) tensor: the strided kernel path.
Tensor strided_copy(const Tensor& t) {
  Tensor wide = zeros({t.size(0), 2}, DType::f32);
  Tensor col = wide.select(1, 0);
  col.copy_(t);
  return col;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.numel() * sizeof(float)) == 0;
}

struct UnaryCase {
  const char* name;
  UnaryOp op;
};
struct BinaryCase {
  const char* name;
  BinaryOp op;
};
const UnaryCase kUnary[] = {{"exp", UnaryOp::kExp},
                            {"sigmoid", UnaryOp::kSigmoid},
                            {"silu", UnaryOp::kSilu},
                            {"gelu", UnaryOp::kGelu},
                            {"gelu_tanh", UnaryOp::kGeluTanh}};
const BinaryCase kBinary[] = {{"silu_grad", BinaryOp::kSiluGrad},
                              {"gelu_grad", BinaryOp::kGeluGrad},
                              {"gelu_tanh_grad", BinaryOp::kGeluTanhGrad}};

// |f32 - f64| <= 1e-6 (|f64| + 1): about 8 ulp, or 1e-6 absolute where the value is
// small. The erf GELU's erf is good to 1.5e-7 absolute; in the far tails the f64 kernels
// round 1 + tanh and 1 + erf to 0 or one ulp, so there the f32 value may be the closer.
::testing::AssertionResult near_f64(const Tensor& got, const Tensor& want) {
  const Tensor w = want.contiguous();
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double g = got.data<float>()[i], r = w.data<double>()[i];
    if (std::isinf(r) && g == r) continue;
    if (!(std::abs(g - r) <= 1e-6 * (std::abs(r) + 1)))  // a NaN fails too
      return ::testing::AssertionFailure() << "element " << i << ": " << g << " vs f64 " << r;
  }
  return ::testing::AssertionSuccess();
}

}  // namespace

TEST(Lanes, RowsAndStridedElementsGiveTheSameBits) {
  const std::vector<float> pts = sample_points();
  const Tensor x = f32_of(pts), g = upstream_for(pts);
  for (const UnaryCase& c : kUnary) {
    Tensor row = Tensor::empty(x.sizes(), DType::f32);
    Tensor strided = strided_copy(x);
    cpu::unary(c.op, row, x, 0, 0);
    cpu::unary(c.op, strided, strided, 0, 0);
    EXPECT_TRUE(same_bits(row, strided)) << c.name;
  }
  for (const BinaryCase& c : kBinary) {
    Tensor row = Tensor::empty(x.sizes(), DType::f32);
    Tensor strided = strided_copy(x);
    cpu::binary(c.op, row, g, x);
    cpu::binary(c.op, strided, strided_copy(g), strided);
    EXPECT_TRUE(same_bits(row, strided)) << c.name;
  }
}

TEST(Lanes, StayWithinAMillionthOfTheF64Kernels) {
  std::vector<float> pts;
  for (float v : sample_points())
    if (std::abs(v) <= 20.0f) pts.push_back(v);  // e^25 and beyond are checked for bits only
  const Tensor x = f32_of(pts), x64 = x.to(DType::f64);
  const Tensor g = upstream_for(pts), g64 = g.to(DType::f64);
  for (const UnaryCase& c : kUnary) {
    Tensor got = Tensor::empty(x.sizes(), DType::f32), want = Tensor::empty(x.sizes(), DType::f64);
    cpu::unary(c.op, got, x, 0, 0);
    cpu::unary(c.op, want, x64, 0, 0);
    EXPECT_TRUE(near_f64(got, want)) << c.name;
  }
  for (const BinaryCase& c : kBinary) {
    Tensor got = Tensor::empty(x.sizes(), DType::f32), want = Tensor::empty(x.sizes(), DType::f64);
    cpu::binary(c.op, got, g, x);
    cpu::binary(c.op, want, g64, x64);
    EXPECT_TRUE(near_f64(got, want)) << c.name;
  }
}

// $ZT_CPU_ISA caps the ISA the kernels run, never widens it past the CPU's, and a value
// it does not know is an error naming it.
TEST(Lanes, ZtCpuIsaCapsTheIsaAtTheOneItNames) {
  using cpu::Isa;
  EXPECT_EQ(cpu::capped_isa(Isa::kAvx512, nullptr), Isa::kAvx512);
  EXPECT_EQ(cpu::capped_isa(Isa::kAvx512, ""), Isa::kAvx512);
  EXPECT_EQ(cpu::capped_isa(Isa::kAvx512, "avx2"), Isa::kAvx2);
  EXPECT_EQ(cpu::capped_isa(Isa::kAvx512, "sse2"), Isa::kSse2);
  EXPECT_EQ(cpu::capped_isa(Isa::kAvx2, "avx512"), Isa::kAvx2) << "not past the CPU's widest";
  EXPECT_EQ(cpu::capped_isa(Isa::kSse2, "avx2"), Isa::kSse2);
  EXPECT_TRUE(test::throws_with([] { cpu::capped_isa(Isa::kAvx512, "avx3"); },
                                "ZT_CPU_ISA must be avx512, avx2 or sse2, got 'avx3'"));
  // The ISA in use is this process's cap of this CPU's widest (the core.isa_* entries set
  // ZT_CPU_ISA; the others run the widest).
  EXPECT_EQ(cpu::cpu_isa(), cpu::capped_isa(cpu::widest_isa(), std::getenv("ZT_CPU_ISA")));
}
