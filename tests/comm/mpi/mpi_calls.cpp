// MPI's profiling interface: these definitions of MPI's nonblocking collectives take the
// place of the library's (the linker resolves zt's calls to them) and forward to the PMPI_
// entry points after recording the call (mpi_calls.h).
#include "comm/mpi/mpi_calls.h"

#include <mpi.h>

#include <algorithm>
#include <map>
#include <mutex>

namespace zt::test::mpi_calls {
namespace {

std::mutex mu;  // the calls come from the communication threads
std::map<std::string, Tally> tallies;

int64_t type_size(MPI_Datatype t) {
  int bytes = 0;
  PMPI_Type_size(t, &bytes);
  return bytes;
}

int64_t largest_count(const int counts[], MPI_Comm comm) {
  int n = 0;
  PMPI_Comm_size(comm, &n);
  return n == 0 ? 0 : *std::max_element(counts, counts + n);
}

void record(const char* function, int64_t count, MPI_Datatype type) {
  std::lock_guard<std::mutex> lock(mu);
  Tally& t = tallies[function];
  ++t.calls;
  t.largest_block = std::max(t.largest_block, count * type_size(type));
}

}  // namespace

void reset() {
  std::lock_guard<std::mutex> lock(mu);
  tallies.clear();
}

Tally of(const std::string& function) {
  std::lock_guard<std::mutex> lock(mu);
  auto it = tallies.find(function);
  return it == tallies.end() ? Tally{} : it->second;
}

}  // namespace zt::test::mpi_calls

using zt::test::mpi_calls::largest_count;
using zt::test::mpi_calls::record;

int MPI_Iallgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                   int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  record("MPI_Iallgather", recvcount, recvtype);
  return PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
}

int MPI_Iallgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                    const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                    MPI_Comm comm, MPI_Request* request) {
  record("MPI_Iallgatherv", largest_count(recvcounts, comm), recvtype);
  return PMPI_Iallgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm,
                          request);
}

int MPI_Ialltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  record("MPI_Ialltoall", recvcount, recvtype);
  return PMPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
}

int MPI_Ialltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                   MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                   const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
                   MPI_Request* request) {
  record("MPI_Ialltoallv", largest_count(recvcounts, comm), recvtype);
  return PMPI_Ialltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                         recvtype, comm, request);
}

int MPI_Ibcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm,
               MPI_Request* request) {
  record("MPI_Ibcast", count, datatype);
  return PMPI_Ibcast(buffer, count, datatype, root, comm, request);
}

int MPI_Iscatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                 int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                 MPI_Request* request) {
  record("MPI_Iscatter", recvcount, recvtype);
  return PMPI_Iscatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm,
                       request);
}

int MPI_Iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                   MPI_Comm comm, MPI_Request* request) {
  record("MPI_Iallreduce", count, datatype);
  return PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
}
