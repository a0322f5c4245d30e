// MpiComm where MPI provides only MPI_THREAD_SERIALIZED (run under mpirun -np 2): no two
// threads may be inside MPI at once, so every MPI call of zt goes through MpiLock, the
// rank's own thread's as much as the communication threads'. This file takes MPI's place
// for MPI_Init_thread (asking for SERIALIZED) and for the calls zt makes outside its
// collectives, and records any call made while another thread is inside MPI. The calls a
// thread makes outside the polls of a communication thread last a few milliseconds here,
// so that an unserialized one meets a poll (MPI_Test) of a pending collective.
#include <gtest/gtest.h>
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "comm/checks.h"
#include "zero/comm/mpi_comm.h"

namespace {

std::atomic<int> inside{0};                  // threads inside one of the MPI functions below
std::atomic<const char*> occupant{nullptr};  // the function the first of them called
std::mutex overlaps_mu;
std::set<std::string> overlaps;  // "MPI_Test beside MPI_Comm_rank", ...

// Marks a call to `function` while it runs; a call made while another is inside is recorded.
class InMpi {
 public:
  explicit InMpi(const char* function) {
    if (inside.fetch_add(1) == 0) {
      occupant.store(function);
      return;
    }
    const char* other = occupant.load();
    std::lock_guard<std::mutex> lock(overlaps_mu);
    overlaps.insert(std::string(function) + " beside " + (other ? other : "?"));
  }
  ~InMpi() { inside.fetch_sub(1); }
  InMpi(const InMpi&) = delete;
  InMpi& operator=(const InMpi&) = delete;
};

// The calls recorded since the last take, forgotten.
std::string take_overlaps() {
  std::lock_guard<std::mutex> lock(overlaps_mu);
  std::string all;
  for (const std::string& o : overlaps) all += (all.empty() ? "" : "; ") + o;
  overlaps.clear();
  return all;
}

void linger() {
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
}

}  // namespace

extern "C" {
int MPI_Init_thread(int* argc, char*** argv, int, int* provided) {
  return PMPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, provided);
}
int MPI_Test(MPI_Request* request, int* flag, MPI_Status* status) {
  InMpi in("MPI_Test");
  return PMPI_Test(request, flag, status);
}
int MPI_Comm_rank(MPI_Comm comm, int* rank) {
  InMpi in("MPI_Comm_rank");
  linger();
  return PMPI_Comm_rank(comm, rank);
}
int MPI_Comm_size(MPI_Comm comm, int* size) {
  InMpi in("MPI_Comm_size");
  linger();
  return PMPI_Comm_size(comm, size);
}
int MPI_Error_string(int code, char* text, int* len) {
  InMpi in("MPI_Error_string");
  linger();
  return PMPI_Error_string(code, text, len);
}
int MPI_Error_class(int code, int* cls) {
  InMpi in("MPI_Error_class");
  linger();
  return PMPI_Error_class(code, cls);
}
}

using namespace zt;
using namespace zt::comm;
using namespace std::chrono_literals;

TEST(MpiSerialized, MpiRunsSerialized) {
  MpiComm c;
  int provided = MPI_THREAD_MULTIPLE;
  PMPI_Query_thread(&provided);
  EXPECT_EQ(provided, MPI_THREAD_SERIALIZED);
}

// Rank 0 makes a second communicator while its first one's communication thread polls a
// collective that rank 1 joins later: making it asks MPI for the world's rank and size.
TEST(MpiSerialized, MakingACommunicatorBesideAPendingCollectiveIsSerialized) {
  take_overlaps();
  MpiComm first;
  first.set_timeout(20s);
  if (first.rank() == 1) std::this_thread::sleep_for(300ms);
  Tensor t = checks::filled(first.rank(), 4, DType::f32);
  const std::shared_ptr<Work> pending = first.all_reduce(t, ReduceOp::kSum, /*async=*/true);
  MpiComm second;
  pending->wait();
  EXPECT_EQ(take_overlaps(), "") << "MPI calls made while another thread was inside MPI";
}

TEST(MpiSerialized, EveryCollective) {
  take_overlaps();
  MpiComm c;
  c.set_timeout(20s);
  EXPECT_NO_THROW(checks::every_collective(c));
  EXPECT_NO_THROW(checks::async_completes_while_computing(c));
  EXPECT_EQ(take_overlaps(), "") << "MPI calls made while another thread was inside MPI";
}
