// NcclComm on CUDA tensors, one GPU per process under mpirun (labels mpi, cuda; built
// only with ZT_CUDA), and the events that order NCCL's stream against the compute stream.
// Also the frozen tokenizer's rank-0-only load broadcast over NCCL. Skips, saying so,
// where no GPU is visible or there are fewer GPUs than processes. ctest runs it with one
// process (comm.nccl.np1) and with two (comm.nccl.np2, which needs two GPUs). At one rank
// a communicator runs every collective in place, so the tests of NCCL's collectives
// themselves skip there, saying so; the others check what one rank can.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <utility>

#include "apps/vqtok/model/vq_model.h"
#include "comm/checks.h"
#include "common/gpu_skip.h"
#include "common/test_util.h"
#include "core/cuda/stream.h"
#include "core/ops.h"
#include "core/work_counts.h"
#include "zero/comm/cuda/nccl_comm.h"
#include "zero/comm/launch.h"
#include "zero/zero.h"

using namespace zt;
using namespace zt::comm;
using namespace std::chrono_literals;

namespace {
std::unique_ptr<NcclComm> make_comm() {
  auto c = std::make_unique<NcclComm>(-1);
  c->set_timeout(30s);
  return c;
}

// The processes mpirun started (1 outside mpirun).
int processes() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char* s = std::getenv(v)) return std::max(1, std::atoi(s));
  return 1;
}
}  // namespace

#define SKIP_WITHOUT_GPU()                                                \
  ZT_GPU_OR_SKIP("NcclComm tests skipped");                               \
  if (cuda_device_count() < processes())                                  \
  GTEST_SKIP() << processes() << " processes but " << cuda_device_count() \
               << " GPU(s): NCCL needs a GPU of its own for each rank"

#define SKIP_AT_ONE_RANK(c)                                                              \
  if ((c).size() < 2)                                                                    \
  GTEST_SKIP() << "one rank: every collective runs in place and none reaches NCCL; run " \
                  "under mpirun -np 2 or more on as many GPUs (ctest's comm.nccl.np2)"

TEST(NcclComm, FloatCollectives) {
  SKIP_WITHOUT_GPU();
  auto c = make_comm();
  SKIP_AT_ONE_RANK(*c);
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
  SKIP_AT_ONE_RANK(*c);
  EXPECT_NO_THROW(checks::counters_match_textbook(*c));
  EXPECT_NO_THROW(checks::async_completes_while_computing(*c));
}

// The agreement after a failed forward on one rank goes through the MPI bootstrap with its
// label, so the others' gather of host objects meets a mismatch naming it.
TEST(NcclComm, AnAgreementOnOneRankIsNamedWhereTheOthersGatherBytes) {
  SKIP_WITHOUT_GPU();
  auto c = make_comm();
  SKIP_AT_ONE_RANK(*c);
  if (c->rank() == 0) c->agree_before_next_collective("the agreement after a failed forward");
  const std::string err = test::error_of([&] { c->all_gather_bytes("x"); });
  EXPECT_NE(err.find("the agreement after a failed forward"), std::string::npos) << err;
}

// Under mpirun a CUDA launch is one NcclComm per process; started on its own (as the GPU
// check runs this binary) it is one thread rank, which takes GPU tensors at one rank (and
// needs no GPU to be made, so that case runs everywhere).
TEST(NcclComm, LaunchPicksNcclForCudaUnderMpirun) {
  if (under_mpirun()) {
    SKIP_WITHOUT_GPU();
  }
  LaunchOptions o;
  o.device = Device::cuda();
  const char* want = under_mpirun() ? "nccl" : "thread";
  launch(o, [want](Communicator& c) {
    EXPECT_STREQ(c.backend(), want);
    c.barrier();
  });
}

// NCCL runs on its own stream, ordered by events: a collective waits for the compute
// kernels that write its input, and compute queued after wait() reads its output, with
// no host wait in between. A slow GEMM (f32, TF32 off: milliseconds on any GPU) writes
// the input just before the collective is issued, so a collective that did not wait
// would read a half-written matrix, and a reader that did not wait would copy a
// half-filled output. (At one rank a communicator runs every collective in place on the
// compute stream, so the NCCL stream's events are exercised with mpirun -np <GPUs> on a
// machine with several GPUs; one rank checks the same results and the same absence of
// host waits.)
TEST(NcclComm, CollectivesAreOrderedAgainstTheComputeStream) {
  SKIP_WITHOUT_GPU();
  auto c = make_comm();
  const Device gpu = c->device();
  const Tf32Policy saved = tf32();
  set_tf32({.matmul = false, .conv = false});
  manual_seed(41);  // the same matrix on every rank
  const int64_t n = 4096;
  const Tensor a = mul(randn({n, n}), 1.0 / 64).to(gpu);
  const Tensor ref = matmul(a, a).to(Device::cpu());  // waits: the reference is complete
  const int size = c->size();

  const WorkCounts before = work_counts();
  Tensor in = matmul(a, a);  // queued, still running when the gather is issued
  Tensor gathered = Tensor::empty({size * n * n}, DType::f32, gpu);
  c->all_gather(gathered, in.reshape({-1}), /*async=*/true)->wait();
  Tensor gathered_copy = mul(gathered, 1.0);  // compute after the collective
  Tensor summed = matmul(a, a);
  c->all_reduce(summed, comm::ReduceOp::kSum, /*async=*/true)->wait();
  Tensor summed_copy = mul(summed, 1.0);
  // No host wait at any size: one rank runs the collectives in place, several ranks order
  // the compute stream after NCCL's with an event, and the watchdog keeps the deadline.
  EXPECT_EQ((work_counts() - before).syncs, 0) << "the host waited inside the sequence";

  const Tensor got = gathered_copy.to(Device::cpu()).reshape({size, n, n});
  for (int r = 0; r < size; ++r)
    EXPECT_CLOSE(got.select(0, r), ref, 1e-5, 1e-6) << "all_gather slice " << r;
  EXPECT_CLOSE(summed_copy.to(Device::cpu()), mul(ref, static_cast<double>(size)), 1e-5, 1e-5)
      << "all_reduce";
  set_tf32(saved);
}

// Every stream that waits for a collective is ordered after it, not only the first one:
// rank 1 joins an all_reduce 300 ms late, so on rank 0 the collective cannot finish before
// then, and events recorded right after wait() on two different streams are still pending.
TEST(NcclComm, EveryWaitingStreamIsOrdered) {
  SKIP_WITHOUT_GPU();
  auto c = make_comm();
  SKIP_AT_ONE_RANK(*c);
  const int dev = c->device().index;
  Tensor t = add(zeros({1024}, DType::f32, c->device()), 1.0);
  if (c->rank() == 1) std::this_thread::sleep_for(300ms);
  auto work = c->all_reduce(t, comm::ReduceOp::kSum, /*async=*/true);
  cuda::Stream first(dev), second(dev);
  cuda::Event after_first, after_second;
  for (auto [stream, event] : {std::pair{&first, &after_first}, {&second, &after_second}}) {
    cuda::StreamGuard g(*stream);
    work->wait();
    event->record(stream->get());
  }
  if (c->rank() == 0) {
    EXPECT_FALSE(after_first.query()) << "the first waiting stream ran ahead of the collective";
    EXPECT_FALSE(after_second.query()) << "the second waiting stream ran ahead of the collective";
  }
  after_second.synchronize();
  EXPECT_CLOSE(t.to(Device::cpu()), mul(ones({1024}), static_cast<double>(c->size())), 0, 0);
}

// The frozen tokenizer as vqgpt builds it on GPUs: every rank starts from different
// random weights on its GPU, rank 0 alone holds the trained state, and
// zero::load_state_dict broadcasts it over NCCL. Every rank then holds rank 0's exact
// bits (parameters and BatchNorm statistics) and tokenizes a clip to the same codes.
TEST(NcclComm, RankZeroOnlyTokenizerLoadGivesIdenticalCodes) {
  SKIP_WITHOUT_GPU();
  auto c = make_comm();
  const Device gpu = c->device();
  config::ModelConfig cfg;  // a small tokenizer: 32 channels, 4x spatial reduction
  cfg.ch_mult = {1, 2, 2};
  cfg.attn_resolutions = {2};
  cfg.codebook_size = 64;
  manual_seed(7);
  vq::VqModel trained(cfg);  // stands in for a checkpoint, read on rank 0 only
  for (const auto& [name, b] : trained.named_buffers())
    if (name.find("running_var") != std::string::npos) b.fill_(1.5);  // not the defaults
  const nn::NamedTensors state = nn::state_dict(trained);

  manual_seed(100 + c->rank());  // ranks disagree on every random init
  auto tokenizer = std::make_shared<vq::VqModel>(cfg);
  tokenizer->to(gpu);
  zero::replicate(*tokenizer, *c);
  zero::load_state_dict(*tokenizer, c->rank() == 0 ? state : nn::NamedTensors{}, *c);
  tokenizer->eval();

  const nn::NamedTensors got = nn::state_dict(*tokenizer);
  ASSERT_EQ(got.size(), state.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].first, state[i].first);
    EXPECT_TRUE(got[i].second.device() == gpu) << got[i].first;
    EXPECT_EQ(zero::tensor_hash(got[i].second.to(Device::cpu())),
              zero::tensor_hash(state[i].second))
        << got[i].first << " is not rank 0's value on rank " << c->rank();
  }

  autograd::NoGradGuard no_grad;
  Generator g(7);  // the same clip on every rank
  const Tensor clip = clamp(randn({2, 4, 3, 16, 16}, g), -1.0, 1.0).to(gpu);
  const Tensor codes = tokenizer->encode(clip).codes.to(Device::cpu());
  const auto hashes = c->all_gather_object<uint64_t>(zero::tensor_hash(codes));
  for (int r = 1; r < c->size(); ++r) EXPECT_EQ(hashes[r], hashes[0]) << "rank " << r;
}
