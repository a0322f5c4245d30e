// The samples per cuDNN convolution call (core/cuda/conv_chunks.h): cuDNN refuses tensors of
// 2^31 elements or more, so a batch past that runs in chunks whose input and output each
// stay within 2^31 - 1 elements. Host logic only: it runs without a GPU.
#include <gtest/gtest.h>

#include <cstdint>

#include "core/cuda/conv_chunks.h"

using zt::cuda::conv_batch_chunk;
using zt::cuda::kMaxCudnnElements;

TEST(ConvChunks, ABatchThatFitsIsOneCall) {
  EXPECT_EQ(conv_batch_chunk(8, 3 * 32 * 32, 16 * 32 * 32), 8);
  // 2^31 - 1 elements in all: the largest tensor cuDNN takes.
  EXPECT_EQ(conv_batch_chunk(1, kMaxCudnnElements, 1), 1);
  EXPECT_EQ(conv_batch_chunk(0, 3, 3), 0);
}

TEST(ConvChunks, ALargerBatchSplitsWhereInputAndOutputFit) {
  // A VAE decoder's 64 x 128 x 512 x 512: 2^31 elements, one past the limit; 63 samples fit.
  const int64_t sample = int64_t{128} * 512 * 512;
  EXPECT_EQ(conv_batch_chunk(64, sample, sample), 63);
  // The larger side decides: an upsampling conv's output is 4 times its input.
  EXPECT_EQ(conv_batch_chunk(64, sample / 4, sample), 63);
  EXPECT_EQ(conv_batch_chunk(64, sample, sample / 4), 63);
  // 64 x 8 x 2048 x 2048 (the GPU test's shape): 2^31 elements again.
  const int64_t wide = int64_t{8} * 2048 * 2048;
  const int64_t chunk = conv_batch_chunk(64, wide, wide);
  EXPECT_EQ(chunk, 63);
  EXPECT_LE(chunk * wide, kMaxCudnnElements);
  EXPECT_GT((chunk + 1) * wide, kMaxCudnnElements);
}

TEST(ConvChunks, ASamplePastTheLimitGoesAloneForItsDescriptorToRefuse) {
  EXPECT_EQ(conv_batch_chunk(4, kMaxCudnnElements + 1, 10), 1);
  // A huge batch of tiny samples: the division cannot overflow.
  EXPECT_EQ(conv_batch_chunk(INT64_MAX / 2, 1, 1), kMaxCudnnElements);
}
