// NcclComm on CUDA tensors, one GPU per process under mpirun (labels mpi, cuda; built
// only with ZT_CUDA). Skips, saying so, where no GPU is visible. ctest runs it with one
// process; on a multi-GPU machine run it with `mpirun -np <GPUs>` as well.
#include <gtest/gtest.h>

#include <chrono>

#include "comm/checks.h"
#include "zero/comm/cuda/nccl_comm.h"
#include "zero/comm/launch.h"

using namespace zt;
using namespace zt::comm;
using namespace std::chrono_literals;

namespace {
std::unique_ptr<NcclComm> make_comm() {
  auto c = std::make_unique<NcclComm>(-1);
  c->set_timeout(30s);
  return c;
}
}  // namespace

#define SKIP_WITHOUT_GPU() \
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device visible: NcclComm tests skipped"

TEST(NcclComm, FloatCollectives) {
  SKIP_WITHOUT_GPU();
  auto c = make_comm();
  EXPECT_STREQ(c->backend(), "nccl");
  EXPECT_TRUE(c->device().is_cuda());
  const int n = c->size();
  for (DType dt : {DType::f32, DType::bf16, DType::f64, DType::f16}) {
    for (int64_t s : {1, 7}) {
      EXPECT_NO_THROW(checks::all_gather(*c, dt, s));
      EXPECT_NO_THROW(checks::all_gather(*c, dt, s, true));
      EXPECT_NO_THROW(checks::reduce_scatter(*c, dt, s, ReduceOp::kSum));
      EXPECT_NO_THROW(checks::reduce_scatter(*c, dt, s, ReduceOp::kAvg));
      EXPECT_NO_THROW(checks::scatter(*c, dt, s, n - 1));
    }
    for (int64_t numel : {1, 10, 13}) {
      EXPECT_NO_THROW(checks::all_reduce(*c, dt, numel, ReduceOp::kSum));
      EXPECT_NO_THROW(checks::all_reduce(*c, dt, numel, ReduceOp::kMax));
      EXPECT_NO_THROW(checks::broadcast(*c, dt, numel, numel % n));
    }
  }
  EXPECT_NO_THROW(checks::all_reduce(*c, DType::i64, 10, ReduceOp::kSum));
  EXPECT_NO_THROW(checks::all_reduce(*c, DType::i32, 10, ReduceOp::kMax));
  c->barrier();
  auto got = c->all_gather_bytes("rank" + std::to_string(c->rank()));
  EXPECT_EQ(got[0], "rank0");
}

TEST(NcclComm, CountersAndAsync) {
  SKIP_WITHOUT_GPU();
  auto c = make_comm();
  EXPECT_NO_THROW(checks::counters_match_textbook(*c));
  EXPECT_NO_THROW(checks::async_completes_while_computing(*c));
}

TEST(NcclComm, LaunchPicksNcclForCuda) {
  SKIP_WITHOUT_GPU();
  LaunchOptions o;
  o.device = Device::cuda();
  launch(o, [](Communicator& c) {
    EXPECT_STREQ(c.backend(), "nccl");
    c.barrier();
  });
}
