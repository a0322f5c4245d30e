// comm::agree_at_return on a communicator whose collectives the host does not wait for and
// nobody compares, as NcclComm's (wait() only orders a stream; NCCL has no check), while its
// gathers of host objects go through a checked MpiComm, as NcclComm's go through its MPI
// bootstrap. A rank that returned while another issued a collective it never will: every
// rank fails at once, naming how many collectives each issued, where the other would wait
// for that collective's deadline (NcclComm's watchdog: 10 minutes by default).
#include <gtest/gtest.h>

#include <chrono>

#include "common/test_util.h"
#include "core/ops.h"
#include "zero/comm/executor.h"
#include "zero/comm/launch.h"
#include "zero/comm/mpi_comm.h"

using namespace zt;
using namespace zt::comm;
using namespace std::chrono_literals;

namespace {

// Collectives finish at once on the host and exchange nothing (NcclComm's are queued on a
// stream); all_gather_bytes goes through `boot_`, checked.
class HostBlindComm : public Communicator {
 public:
  explicit HostBlindComm(std::unique_ptr<MpiComm> boot)
      : Communicator(boot->rank(), boot->size()), boot_(std::move(boot)) {}
  const char* backend() const override { return "host-blind"; }
  void abort(const std::string& reason) override { reason_ = reason; }
  std::string abort_reason() const override { return reason_; }

 protected:
  std::shared_ptr<Work> submit(Request req) override {
    if (req.kind == Collective::kAllGatherBytes)
      *req.bytes_out = boot_->all_gather_bytes(*req.bytes_in, req.label);
    return CpuWork::done();
  }

 private:
  std::unique_ptr<MpiComm> boot_;
  std::string reason_;
};

HostBlindComm make_comm() {
  auto boot = std::make_unique<MpiComm>();
  boot->set_timeout(20s);
  return HostBlindComm(std::move(boot));
}

}  // namespace

TEST(AgreeAtReturn, ARankThatReturnedWhileAnotherIssuedACollectiveFailsEveryRankAtOnce) {
  HostBlindComm c = make_comm();
  Tensor t = ones({4});
  c.all_reduce(t, ReduceOp::kSum);                     // #0 on every rank
  if (c.rank() == 0) c.all_reduce(t, ReduceOp::kSum);  // #1: the others have returned
  const auto t0 = std::chrono::steady_clock::now();
  const std::string err = test::error_of([&] { agree_at_return(c); });
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
  EXPECT_NE(err.find("rank 0 issued 2 collectives, rank 1 issued 1"), std::string::npos) << err;
}

TEST(AgreeAtReturn, RanksThatIssuedTheSameCollectivesGoOn) {
  HostBlindComm c = make_comm();
  Tensor t = ones({4});
  c.all_reduce(t, ReduceOp::kSum);
  c.barrier();
  EXPECT_NO_THROW(agree_at_return(c));
  EXPECT_EQ(c.all_gather_bytes("x").size(), static_cast<size_t>(c.size())) << "still usable";
}
