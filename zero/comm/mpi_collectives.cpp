// MpiComm's collectives. Data moves as raw unsigned words of the element size; reductions
// are computed locally (reduce_buffers) after an all-to-all of shards, in rank order:
//   reduce_scatter = alltoall(shards) -> reduce
//   all_reduce     = alltoallv(even chunks) -> reduce own chunk -> allgatherv(in place)
// which receives the textbook volumes (see CommCounters).
//
// MPI counts are int, so each collective runs as MPI calls of at most `limit` elements per
// rank (INT_MAX unless lowered, MpiComm::set_chunk_limit); below the limit that is one call.
// all_reduce and broadcast are elementwise: they run on consecutive pieces of the tensor.
// all_gather, reduce_scatter and scatter move rank j's slice [j*s, (j+1)*s) of an [N*s]
// buffer: each call moves the same range [off, off + c) of every rank's slice, addressed by
// a datatype of c words whose extent is s words (one per rank), so no offset overflows an
// int either. The reductions combine element by element in rank order, so every split gives
// the bits of one call.
//
// Every buffer a request uses is held by call.held (the caller's tensors are already), so
// that a request abandoned by a failed wait keeps it (mpi_comm.cpp).
#include <algorithm>
#include <climits>

#include "zero/comm/mpi_comm.h"
#include "zero/comm/reduce.h"

namespace zt::comm {

namespace {

MPI_Datatype word_type(size_t elem_size) {
  switch (elem_size) {
    case 1:
      return MPI_UINT8_T;
    case 2:
      return MPI_UINT16_T;
    case 4:
      return MPI_UINT32_T;
    case 8:
      return MPI_UINT64_T;
  }
  ZT_FAIL("MpiComm: unsupported element size ", elem_size);
}

// fn(offset, count) for the consecutive pieces of n elements, `limit` at most each: one
// (0, 0) for n = 0 too (the ranks still meet, as they would in one call).
template <typename Fn>
void for_each_piece(int64_t n, int64_t limit, Fn fn) {
  const int64_t pieces = n == 0 ? 1 : (n + limit - 1) / limit;
  for (int64_t k = 0; k < pieces; ++k) fn(k * limit, std::min(limit, n - k * limit));
}

// `count` words at the front of each rank's slice of `stride` words in an [N][stride]
// buffer, as an MPI (count, type) pair that addresses rank j's at j * stride words: the
// word type itself when count == stride, else a derived type of extent stride (count 1),
// freed when this goes.
class SliceRange {
 public:
  SliceRange(MPI_Datatype word, size_t word_size, int64_t count, int64_t stride) {
    if (count == stride) {
      type_ = word;
      count_ = static_cast<int>(count);
      return;
    }
    MpiLock lock;
    MPI_Datatype block = MPI_DATATYPE_NULL;
    MPI_CHECK(MPI_Type_contiguous(static_cast<int>(count), word, &block));
    MPI_CHECK(MPI_Type_create_resized(block, 0, static_cast<MPI_Aint>(stride * word_size), &type_));
    MPI_Type_free(&block);
    MPI_CHECK(MPI_Type_commit(&type_));
    owned_ = true;
    count_ = 1;
  }
  ~SliceRange() {
    if (!owned_) return;
    MpiLock lock;
    MPI_Type_free(&type_);  // a request still using it (leaked on a failure) keeps it alive
  }
  SliceRange(const SliceRange&) = delete;
  SliceRange& operator=(const SliceRange&) = delete;

  MPI_Datatype type() const { return type_; }
  int count() const { return count_; }

 private:
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
  int count_ = 0;
  bool owned_ = false;
};

}  // namespace

void MpiComm::all_gather_chunks(const Request& req, const Call& call) {
  const int64_t s = req.in.numel();
  const size_t e = dtype_size(req.out.dtype());
  const MPI_Datatype T = word_type(e);
  const bool in_place =
      req.in.data_ptr() == bytes_of(req.out) + static_cast<size_t>(rank()) * s * e;
  for_each_piece(s, call.limit, [&](int64_t off, int64_t c) {
    const SliceRange recv(T, e, c, s);
    // In place, this rank's range is already where it goes: out's slice r at off.
    const void* send = in_place ? MPI_IN_PLACE : bytes_of(req.in) + off * e;
    start_and_wait(call, "MPI_Iallgather", [&](MPI_Request* rq) {
      return MPI_Iallgather(send, static_cast<int>(c), T, bytes_of(req.out) + off * e, recv.count(),
                            recv.type(), comm_, rq);
    });
  });
}

Tensor MpiComm::scratch_for(const Request& req, int64_t limit) const {
  const int n = size();
  switch (req.kind) {
    case Collective::kReduceScatter:
      // [N][c]: every rank's range of this rank's slice.
      return Tensor::empty({n * std::min(req.out.numel(), limit)}, req.in.dtype());
    case Collective::kAllReduce: {
      // [N][c_r]: every rank's part of this rank's chunk of a piece; the first piece, of
      // min(numel, limit) elements, has the largest chunks.
      int64_t lo, hi;
      even_chunk(std::min(req.out.numel(), limit), n, rank(), &lo, &hi);
      return Tensor::empty({n * (hi - lo)}, req.out.dtype());
    }
    default:
      return Tensor();
  }
}

void MpiComm::reduce_scatter_chunks(const Request& req, const Call& call, const Tensor& tmp) {
  const int n = size();
  const int64_t s = req.out.numel();
  const size_t e = dtype_size(req.out.dtype());
  const MPI_Datatype T = word_type(e);
  // tmp: [N][c], every rank's range of this rank's slice. out may be in's slice r: a call
  // writes only the range it has just sent.
  std::vector<const void*> ins(n);
  for_each_piece(s, call.limit, [&](int64_t off, int64_t c) {
    const SliceRange send(T, e, c, s);
    start_and_wait(call, "MPI_Ialltoall", [&](MPI_Request* rq) {
      return MPI_Ialltoall(bytes_of(req.in) + off * e, send.count(), send.type(), tmp.data_ptr(),
                           static_cast<int>(c), T, comm_, rq);
    });
    for (int j = 0; j < n; ++j) ins[j] = bytes_of(tmp) + static_cast<size_t>(j) * c * e;
    reduce_buffers(req.out.dtype(), req.op, bytes_of(req.out) + off * e, ins.data(), n, c);
  });
}

void MpiComm::all_reduce_chunks(const Request& req, const Call& call, const Tensor& tmp) {
  const Tensor& t = req.out;
  const int n = size(), r = rank();
  const size_t e = dtype_size(t.dtype());
  const MPI_Datatype T = word_type(e);
  // Read by MPI until a call completes, as its buffers are.
  std::vector<int>& counts = call.held->hold(std::vector<int>(n));
  std::vector<int>& displs = call.held->hold(std::vector<int>(n));
  std::vector<int>& rcounts = call.held->hold(std::vector<int>(n));
  std::vector<int>& rdispls = call.held->hold(std::vector<int>(n));
  // tmp: [N][c_r], the current piece's (scratch_for).
  std::vector<const void*> ins(n);
  // Pieces of `limit` elements: counts and offsets within a piece fit an int.
  for_each_piece(t.numel(), call.limit, [&](int64_t base, int64_t len) {
    char* piece = bytes_of(t) + base * e;
    for (int j = 0; j < n; ++j) {
      int64_t lo, hi;
      even_chunk(len, n, j, &lo, &hi);
      counts[j] = static_cast<int>(hi - lo);
      displs[j] = static_cast<int>(lo);
    }
    const int c = counts[r];
    for (int j = 0; j < n; ++j) {
      rcounts[j] = c;
      rdispls[j] = j * c;
    }
    start_and_wait(call, "MPI_Ialltoallv", [&](MPI_Request* rq) {
      return MPI_Ialltoallv(piece, counts.data(), displs.data(), T, tmp.data_ptr(), rcounts.data(),
                            rdispls.data(), T, comm_, rq);
    });
    for (int j = 0; j < n; ++j) ins[j] = bytes_of(tmp) + static_cast<size_t>(j) * c * e;
    reduce_buffers(t.dtype(), req.op, piece + static_cast<size_t>(displs[r]) * e, ins.data(), n, c);
    start_and_wait(call, "MPI_Iallgatherv", [&](MPI_Request* rq) {
      return MPI_Iallgatherv(MPI_IN_PLACE, 0, T, piece, counts.data(), displs.data(), T, comm_, rq);
    });
  });
}

void MpiComm::broadcast_chunks(const Request& req, const Call& call) {
  const int64_t numel = req.out.numel();
  const size_t e = dtype_size(req.out.dtype());
  const MPI_Datatype T = word_type(e);
  for_each_piece(numel, call.limit, [&](int64_t base, int64_t len) {
    start_and_wait(call, "MPI_Ibcast", [&](MPI_Request* rq) {
      return MPI_Ibcast(bytes_of(req.out) + base * e, static_cast<int>(len), T, req.root, comm_,
                        rq);
    });
  });
}

void MpiComm::scatter_chunks(const Request& req, const Call& call) {
  const int64_t s = req.out.numel();
  const size_t e = dtype_size(req.out.dtype());
  const MPI_Datatype T = word_type(e);
  const bool root = rank() == req.root;
  // In place, the root's own slice is already where it goes.
  const bool in_place =
      root && req.out.data_ptr() == bytes_of(req.in) + static_cast<size_t>(rank()) * s * e;
  for_each_piece(s, call.limit, [&](int64_t off, int64_t c) {
    // The send side is read on the root only.
    const SliceRange send(T, e, c, root ? s : c);
    const void* from = root ? bytes_of(req.in) + off * e : nullptr;
    void* to = in_place ? MPI_IN_PLACE : bytes_of(req.out) + off * e;
    start_and_wait(call, "MPI_Iscatter", [&](MPI_Request* rq) {
      return MPI_Iscatter(from, send.count(), send.type(), to, static_cast<int>(c), T, req.root,
                          comm_, rq);
    });
  });
}

std::vector<std::string> MpiComm::gather_bytes(std::shared_ptr<const std::string> mine,
                                               const Call& call) {
  const int n = size();
  call.held->host.push_back(mine);
  const int64_t& len = call.held->hold(static_cast<int64_t>(mine->size()));
  std::vector<int64_t>& lens = call.held->hold(std::vector<int64_t>(n));
  start_and_wait(call, "MPI_Iallgather", [&](MPI_Request* rq) {
    return MPI_Iallgather(&len, 1, MPI_INT64_T, lens.data(), 1, MPI_INT64_T, comm_, rq);
  });
  // Rounds of up to `quota` bytes from each rank: a round's offsets stay below the limit.
  const int64_t quota = std::max<int64_t>(1, call.limit / n);
  const int64_t longest = *std::max_element(lens.begin(), lens.end());
  std::vector<std::string> out(n);
  for (int j = 0; j < n; ++j) out[j].reserve(static_cast<size_t>(lens[j]));
  std::vector<int>& counts = call.held->hold(std::vector<int>(n));
  std::vector<int>& displs = call.held->hold(std::vector<int>(n));
  std::string& round = call.held->hold(std::string());
  for_each_piece(longest, quota, [&](int64_t from, int64_t) {
    int total = 0;
    for (int j = 0; j < n; ++j) {
      counts[j] = static_cast<int>(std::clamp<int64_t>(lens[j] - from, 0, quota));
      displs[j] = total;
      total += counts[j];
    }
    round.assign(static_cast<size_t>(total), '\0');
    const char* send = mine->data() + std::min(from, len);
    start_and_wait(call, "MPI_Iallgatherv", [&](MPI_Request* rq) {
      return MPI_Iallgatherv(send, counts[rank()], MPI_CHAR, round.data(), counts.data(),
                             displs.data(), MPI_CHAR, comm_, rq);
    });
    for (int j = 0; j < n; ++j) out[j].append(round, displs[j], counts[j]);
  });
  return out;
}

}  // namespace zt::comm
