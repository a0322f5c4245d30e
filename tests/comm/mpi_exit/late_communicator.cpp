// Under mpirun, a rank that fails between two communicators, as a program's own code can
// between agree_before_launch() and launch(): it returns from main with its error and waits
// in MPI_Finalize for the others, while they wait for it to make the next communicator.
// That wait has the communicators' deadline ($ZT_COMM_TIMEOUT_MS): the others fail at it
// and launch() ends the job, where MPI_Comm_dup waited for ever. Not a GoogleTest binary:
// the failure ends the whole job (MPI_Abort), as it does an app's. Run as
// `mpirun -np 2 zt_test_comm_late_communicator`.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "core/error.h"
#include "zero/comm/launch.h"

int main() {
  try {
    zt::comm::agree_before_launch(nullptr);  // MPI starts; a communicator is made and freed
    const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
    ZT_CHECK(rank == nullptr || std::string(rank) != "1", "rank 1 fails before launch");
    zt::comm::launch(1, [](zt::comm::Communicator& comm) { comm.barrier(); });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
