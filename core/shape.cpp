// Shape arithmetic shared by tensors and ops: printing, element counts and contiguous
// strides (overflow-checked), and dimension wrapping.
#include <algorithm>
#include <sstream>

#include "core/tensor.h"

namespace zt {

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << "]";
  return os.str();
}

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s)
    if (__builtin_mul_overflow(n, d, &n))
      ZT_FAIL("shape ", shape_str(s), " has more elements than an int64 counts");
  return n;
}

Shape contiguous_strides(const Shape& sizes) {
  Shape st(sizes.size());
  int64_t s = 1;
  for (int64_t i = static_cast<int64_t>(sizes.size()) - 1; i >= 0; --i) {
    st[i] = s;
    if (i > 0 && __builtin_mul_overflow(s, std::max<int64_t>(sizes[i], 1), &s))
      ZT_FAIL("shape ", shape_str(sizes), " has strides past what an int64 counts");
  }
  return st;
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  ZT_CHECK(ndim > 0, op, ": dimension ", dim, " given for a 0-d tensor, which has none");
  // The range, not the count: ops that take a scalar as one element check against 1.
  ZT_CHECK(dim >= -ndim && dim < ndim, op, ": dimension ", dim, " out of range [", -ndim, ", ",
           ndim - 1, "]");
  return dim < 0 ? dim + ndim : dim;
}

}  // namespace zt
