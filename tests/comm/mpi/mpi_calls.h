// A tally of the MPI collective calls this process makes, taken through MPI's profiling
// interface: mpi_calls.cpp defines MPI_Ibcast and the other nonblocking collectives
// MpiComm uses, which record the call and forward to MPI's own (PMPI_Ibcast, ...). The
// tests read it to see how many calls a collective took and how much each one moved.
#pragma once

#include <cstdint>
#include <string>

namespace zt::test::mpi_calls {

/// What the calls of one MPI function moved since reset().
struct Tally {
  int64_t calls = 0;
  /// The largest block one call moves between two ranks, in bytes (the receive side's
  /// count times the size of its datatype; the largest count for the -v variants).
  int64_t largest_block = 0;
};

/// Forgets every call so far.
void reset();
/// The tally of `function` ("MPI_Ibcast", "MPI_Iallgather", ...) since reset().
Tally of(const std::string& function);

}  // namespace zt::test::mpi_calls
