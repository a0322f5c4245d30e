// User errors are zt::Error exceptions whose message names the problem: each test
// triggers one and checks a key phrase of the message.
#include <cmath>

#include "common/test_util.h"
#include "core/allocator.h"
#include "core/kernels.h"

using namespace zt;

// Expects `stmt` to throw zt::Error with `phrase` in its message.
#define EXPECT_ERROR_WITH(stmt, phrase)                                         \
  do {                                                                          \
    EXPECT_THROW(stmt, ::zt::Error);                                            \
    try {                                                                       \
      stmt;                                                                     \
    } catch (const ::zt::Error& e) {                                            \
      EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos)          \
          << "message: " << e.what() << "\nexpected it to contain: " << phrase; \
    }                                                                           \
  } while (0)

TEST(Errors, BroadcastShapeMismatch) {
  EXPECT_ERROR_WITH(add(zeros({2, 3}), zeros({4})), "cannot be broadcast");
  EXPECT_ERROR_WITH(mul(zeros({2, 3}), zeros({3, 2})), "[2, 3] and [3, 2]");
  EXPECT_ERROR_WITH(zeros({2, 3}).expand({4, 3}), "cannot expand");
}

TEST(Errors, DtypeMismatch) {
  EXPECT_ERROR_WITH(add(zeros({2}), zeros({2}, DType::f64)), "dtype mismatch");
  EXPECT_ERROR_WITH(matmul(zeros({2, 2}), zeros({2, 2}, DType::f64)), "dtype mismatch");
  EXPECT_ERROR_WITH(zeros({2}).data<double>(), "on a tensor of dtype f32");
  EXPECT_ERROR_WITH(zeros({2}, DType::i64).set_requires_grad(true), "only floating tensors");
  EXPECT_ERROR_WITH(where(zeros({2}), zeros({2}), zeros({2})), "condition must be bool");
}

TEST(Errors, OutOfRangeViews) {
  Tensor x = zeros({2, 3});
  EXPECT_ERROR_WITH(x.narrow(1, 2, 2), "out of bounds");
  // A negative start is named as given (-4 wrapped once is -1, a start that looks valid).
  EXPECT_ERROR_WITH(x.narrow(1, -4, 1), "narrow: 1 elements from -4 are out of bounds");
  EXPECT_ERROR_WITH(x.select(0, 2), "out of range");
  EXPECT_ERROR_WITH(x.select(0, -3), "out of range");
  EXPECT_ERROR_WITH(x.slice(2, 0, 1), "dimension 2 out of range");
  EXPECT_ERROR_WITH(x.slice(1, 0, 2, 0), "step must be positive");
  EXPECT_ERROR_WITH(x.transpose(0, 5), "out of range");
  EXPECT_ERROR_WITH(index_select(x, 0, from_vector({2}, {1}, DType::i64)), "out of range");
  EXPECT_ERROR_WITH(gather(x, 1, from_vector({0, 3}, {1, 2}, DType::i64)), "out of range");
}

TEST(Errors, BadViews) {
  Tensor x = zeros({2, 3});
  EXPECT_ERROR_WITH(x.view({4, 2}), "is invalid for 6 elements");
  EXPECT_ERROR_WITH(x.reshape({-1, -1}), "only one dimension can be -1");
  EXPECT_ERROR_WITH(x.transpose(0, 1).view({6}), "use reshape() or contiguous()");
  EXPECT_ERROR_WITH(x.permute({0, 0}), "repeated dimension");
  EXPECT_ERROR_WITH(x.permute({0}), "got 1 dims");
}

TEST(Errors, OpArguments) {
  EXPECT_ERROR_WITH(matmul(zeros({2, 3}), zeros({2, 3})), "inner dimensions differ");
  // 1-D operands are named as given, not as the matrices they are turned into.
  EXPECT_ERROR_WITH(matmul(zeros({3}), zeros({4})), "inner dimensions differ, [3] @ [4]");
  EXPECT_ERROR_WITH(matmul(zeros({3}), zeros({2, 4, 5})),
                    "inner dimensions differ, [3] @ [2, 4, 5]");
  EXPECT_ERROR_WITH(matmul(zeros({2, 3}), zeros({4})), "inner dimensions differ, [2, 3] @ [4]");
  EXPECT_ERROR_WITH(linear(zeros({2, 3}), zeros({4, 5})), "in_features = 5");
  EXPECT_ERROR_WITH(bmm(zeros({2, 3}), zeros({2, 3})), "expected 3-D");
  EXPECT_ERROR_WITH(zeros({2, 3}).item(), "one-element tensor");
  EXPECT_ERROR_WITH(from_vector({1, 2, 3}, {2, 2}), "3 values for shape [2, 2]");
  EXPECT_ERROR_WITH(var(zeros({1}), {0}), "at least 2 elements");
  EXPECT_ERROR_WITH(clamp(zeros({2}), 1, 0), "lo (1) > hi (0)");
  EXPECT_ERROR_WITH(clamp(zeros({2}), NAN, 1), "clamp: a bound is NaN");
  EXPECT_ERROR_WITH(one_hot(zeros({2}, DType::i64), -1), "one_hot: the number of classes");
  // Each extremum names itself, the dimension and the shape.
  EXPECT_ERROR_WITH(max(zeros({0})), "max: dimension 0 of [0] is empty, so it has no maximum");
  EXPECT_ERROR_WITH(min(zeros({3, 0}), 1), "min: dimension 1 of [3, 0] is empty");
  EXPECT_ERROR_WITH(argmax(zeros({3, 0}), -1), "argmax: dimension 1 of [3, 0] is empty");
}

TEST(Errors, EmptyMeanAndScalarMatmul) {
  EXPECT_ERROR_WITH(mean(zeros({4, 0}), {1}), "mean over dims [1] of f32[4, 0]: no elements");
  EXPECT_ERROR_WITH(mean(zeros({0})), "mean over all dims of f32[0]");
  EXPECT_ERROR_WITH(matmul(zeros({}), zeros({2})), "got [] and [2]; scale by a scalar with mul()");
}

// The ledger counts every device the CUDA layer addresses (cuda:0 .. kMaxCudaDevices - 1),
// and names that range for any other.
TEST(Errors, LedgerDeviceRange) {
  MemoryLedger ledger;
  const Device last = Device::cuda(kMaxCudaDevices - 1);
  ledger.add(last, MemTag::kOther, 64);
  EXPECT_EQ(ledger.counters(last).total_current, 64);
  EXPECT_EQ(ledger.counters(Device::cuda(0)).total_current, 0);
  ledger.sub(last, MemTag::kOther, 64);
  EXPECT_ERROR_WITH(ledger.add(Device::cuda(kMaxCudaDevices), MemTag::kOther, 64),
                    "device cuda:16 is out of range; zt supports cuda:0..15");
}

TEST(Errors, CrossEntropyBackwardKernelArguments) {
  const Tensor logits = zeros({2, 3}), lse = zeros({2}, DType::f64);
  const Tensor target = zeros({2}, DType::i64), stats = zeros({3}, DType::f64);
  EXPECT_ERROR_WITH(
      cpu::cross_entropy_backward(zeros({2, 3}), logits, lse, target, zeros({1}), stats, -100),
      "expects a one-element f64 gradient, got f32[1]");
  EXPECT_ERROR_WITH(cpu::cross_entropy_backward(zeros({3, 2}), logits, lse, target,
                                                zeros({1}, DType::f64), stats, -100),
                    "of the logits' shape and dtype (f32[2, 3] cpu), got f32[3, 2]");
  EXPECT_ERROR_WITH(
      cpu::cross_entropy_backward(logits, logits, lse, target, zeros({1}, DType::f64), stats, -100),
      "the output must not be the logits themselves");
}

// An undefined tensor (an optional argument left out, a gradient not computed yet) is an
// error wherever an op needs one, never a null dereference.
TEST(Errors, AnUndefinedTensorWhereOneIsNeeded) {
  const Tensor none;
  const char* phrase = "an undefined tensor";
  EXPECT_ERROR_WITH(add(ones({2}), none), phrase);
  EXPECT_ERROR_WITH(sum(none), phrase);
  EXPECT_ERROR_WITH(matmul(ones({2, 2}), none), phrase);
  EXPECT_ERROR_WITH(linear(ones({2, 2}), none), phrase);
  EXPECT_ERROR_WITH(none.data<float>(), phrase);
  EXPECT_ERROR_WITH(none.reshape({2}), phrase);
  Tensor p = ones({2});
  p.set_requires_grad(true);
  EXPECT_ERROR_WITH(norm(p.grad(), 2.0, {}, false), phrase);  // before any backward
  // A gradient scaled, read or logged before the first backward, and the accessors of an
  // undefined tensor: errors too.
  EXPECT_ERROR_WITH(mul_(p.grad(), 0.5), "mul_: the tensor written to is undefined");
  EXPECT_ERROR_WITH(add_(p.grad(), ones({2})), "add_: the tensor written to is undefined");
  EXPECT_ERROR_WITH(p.grad().to_vector(), phrase);
  EXPECT_ERROR_WITH(p.grad().detach(), phrase);
  EXPECT_ERROR_WITH(none.requires_grad(), phrase);
  EXPECT_ERROR_WITH(none.is_leaf(), phrase);
  EXPECT_ERROR_WITH(none.grad(), phrase);
  EXPECT_ERROR_WITH(none.grad_fn(), phrase);
  EXPECT_ERROR_WITH(none.size(0), phrase);
  EXPECT_ERROR_WITH(none.stride(-1), phrase);
  EXPECT_ERROR_WITH(none.set_grad(Tensor()), phrase);
  EXPECT_ERROR_WITH(none.remove_post_accumulate_grad_hook(0), phrase);
  EXPECT_ERROR_WITH(none.register_hook([](const Tensor& g) { return g; }), phrase);
}

// mean and var of an integer tensor name themselves (not the sum they are built on).
TEST(Errors, MeanAndVarOfIntegersNameTheirOp) {
  const Tensor i = from_vector({1, 2}, {2}, DType::i64);
  EXPECT_ERROR_WITH(mean(i), "mean: expected a floating dtype, got i64");
  EXPECT_ERROR_WITH(var(i), "var: expected a floating dtype, got i64");
}

// Arithmetic on integer tensors names the op called, not the kernel it would reach
// ("binary op", "axpy"): an integer counter kept as a buffer, say.
TEST(Errors, ArithmeticOnIntegersNamesItsOp) {
  const Tensor i = from_vector({1, 2}, {2}, DType::i64);
  const std::string rest = ": expected a floating dtype, got i64 (arithmetic is on floating";
  EXPECT_ERROR_WITH(add(i, i), "add" + rest);
  EXPECT_ERROR_WITH(add(i, 1.0), "add" + rest);
  EXPECT_ERROR_WITH(mul(i, i), "mul" + rest);
  EXPECT_ERROR_WITH(neg(i), "neg" + rest);  // -x is mul(x, -1) underneath
  EXPECT_ERROR_WITH(-i, "neg" + rest);
  EXPECT_ERROR_WITH(neg(Tensor()), "neg: undefined input");
  EXPECT_ERROR_WITH(exp(i), "exp" + rest);
  EXPECT_ERROR_WITH(add_(i, i), "add_" + rest);
  EXPECT_ERROR_WITH(mul_(i, 2.0), "mul_" + rest);
  EXPECT_ERROR_WITH(mul_(i, i), "mul_" + rest);
  EXPECT_ERROR_WITH(add(i, ones({2})), "add: dtype mismatch, i64 and f32");
  EXPECT_ERROR_WITH(add_scaled(i, i, 2.0), "add_scaled" + rest);
  EXPECT_ERROR_WITH(rms_norm(i, {2}, Tensor()), "rms_norm" + rest);
  EXPECT_ERROR_WITH(dropout(i, 0.5, true), "dropout" + rest);
  const Tensor m = from_vector({1, 2, 3, 4}, {2, 2}, DType::i64);
  EXPECT_ERROR_WITH(matmul(m, m), "matmul" + rest);
  EXPECT_ERROR_WITH(bmm(m.unsqueeze(0), m.unsqueeze(0)), "bmm" + rest);
  EXPECT_ERROR_WITH(linear(m, m), "linear" + rest);
  EXPECT_ERROR_WITH(linear_gelu(m, m), "linear_gelu" + rest);
}

// Raw GEMM sizes are checked against the operands: a size or leading dimension larger
// than a tensor would read (or write) past it.
TEST(Errors, RawGemmSizesMustMatchTheOperands) {
  const Tensor a = ones({2, 2}), b = ones({2, 2}), c = zeros({2, 2});
  EXPECT_ERROR_WITH(gemm(false, false, 64, 64, 64, 1.0, a, 64, b, 64, 0.0, c, 64),
                    "gemm: A must be the 64x64 view of op(A)");
  EXPECT_ERROR_WITH(gemm(false, false, 2, 2, 2, 1.0, a, 3, b, 2, 0.0, c, 2), "leading dimension");
  EXPECT_ERROR_WITH(gemm(false, false, 2, 2, 2, 1.0, a, 2, b, 2, 0.0, c.transpose(0, 1), 2),
                    "gemm: C must");
  // op(B) = B^T, passed as the transposed view of the stored matrix: fine.
  gemm(false, true, 2, 2, 2, 1.0, a, 2, b.transpose(0, 1), 2, 0.0, c, 2);
  EXPECT_EQ(c.to_vector(), (std::vector<double>{2, 2, 2, 2}));
}

// A GEMM reads each operand element for many outputs, after it has written some: an
// output in an operand's memory, even as its very elements (x = x @ w), gives garbage
// (BLAS's result depends on how it blocks the product), so it is refused.
TEST(Errors, AGemmOutputThatSharesMemoryWithAnOperandIsRefused) {
  Generator g(1);
  const Tensor x = randn({1, 64, 64}, g), w = randn({1, 64, 64}, g);
  const Tensor before = x.clone();
  EXPECT_ERROR_WITH(bmm_into(x, x, w),
                    "bmm_into: the output f32[1, 64, 64] cpu shares memory "
                    "with operand A");
  EXPECT_ERROR_WITH(bmm_into(x, w, x), "shares memory with operand B");
  EXPECT_EQ(x.to_vector(), before.to_vector());
  const Tensor y = ones({2, 2});
  EXPECT_ERROR_WITH(gemm(false, false, 2, 2, 2, 1.0, y, 2, ones({2, 2}), 2, 0.0, y, 2),
                    "gemm: the output f32[2, 2] cpu shares memory with operand A");
  // Rows 0 and 2 of m as A, rows 1 and 2 as the output: one row in common.
  const Tensor m = ones({4, 2});
  EXPECT_ERROR_WITH(gemm(false, false, 2, 2, 2, 1.0, m.slice(0, 0, 4, 2), 4, ones({2, 2}), 2, 0.0,
                         m.narrow(0, 1, 2), 2),
                    "shares memory with operand A");
  // Disjoint parts of one storage are fine.
  gemm(false, false, 2, 2, 2, 1.0, m.narrow(0, 0, 2), 2, ones({2, 2}), 2, 0.0, m.narrow(0, 2, 2),
       2);
  EXPECT_EQ(m.to_vector(), (std::vector<double>{1, 1, 1, 1, 2, 2, 2, 2}));
}

// A device name is cpu, cuda or cuda:N with N a whole number below kMaxCudaDevices; the
// rest of the name was ignored ("cuda:1x" was cuda:1) and a negative N taken ("cuda:-1"
// then meant whichever GPU was current), or one past the per-device tables accepted.
TEST(Errors, DeviceNames) {
  EXPECT_EQ(Device::parse("cuda:3"), Device::cuda(3));
  EXPECT_EQ(Device::parse("cuda"), Device::cuda(0));
  EXPECT_EQ(Device::parse("cpu"), Device::cpu());
  for (const std::string bad : {"cuda:1x", "cuda:-1", "cuda: 1", "cuda:+1", "cuda:", "cuda:16",
                                "cuda:99999999999999999999"})
    EXPECT_ERROR_WITH(Device::parse(bad), "unknown device '" + bad + "'");
}
