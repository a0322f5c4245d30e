// What the CPU communicators share: the reduction kernel of ThreadComm and MpiComm, which
// combines one buffer per rank element by element in rank order 0..N-1, so results are
// bitwise reproducible and equal on both backends, and byte addressing of a tensor (which
// the argument checks of every backend use too).
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "zero/comm/communicator.h"

namespace zt::comm {

/// out[i] = op(ins[0][i], ..., ins[n_ins-1][i]) for i in [0, count), combined in that
/// order. kAvg divides the sum by n_ins (integers truncate). bf16/f16 accumulate in fp32,
/// f32 in fp32, f64 in f64, integers in int64, bool (max only) as logical or.
/// out may alias any one of ins.
void reduce_buffers(DType dtype, ReduceOp op, void* out, const void* const* ins, int n_ins,
                    int64_t count);

/// The first byte of `t`'s data, for offsets in bytes (rank r's slice, an element count
/// times the element size).
inline char* bytes_of(const Tensor& t) {
  return static_cast<char*>(t.data_ptr());
}

/// [begin, end) of chunk j when n elements are split into `parts` near-equal chunks (the
/// first n % parts chunks are one longer).
inline void even_chunk(int64_t n, int parts, int j, int64_t* begin, int64_t* end) {
  int64_t base = n / parts, extra = n % parts;
  *begin = j * base + (j < extra ? j : extra);
  *end = *begin + base + (j < extra ? 1 : 0);
}

}  // namespace zt::comm
