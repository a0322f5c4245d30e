// Under mpirun, a rank whose function returns while the others still call a collective:
// every rank fails at once, naming it, where they waited for the communicator's timeout.
// Not a GoogleTest binary: the failure ends the whole job (MPI_Abort), as it does an app's.
// Run as `mpirun -np 2 zt_test_comm_early_return`; rank 1 returns at once, rank 0
// all-reduces.
#include <cstdio>

#include "core/ops.h"
#include "zero/comm/launch.h"

int main() {
  zt::comm::launch(1, [](zt::comm::Communicator& comm) {
    if (comm.rank() == 1) return;
    zt::Tensor t = zt::ones({4});
    comm.all_reduce(t, zt::comm::ReduceOp::kSum);
    std::printf("rank 0: the all-reduce returned\n");
  });
  return 0;
}
