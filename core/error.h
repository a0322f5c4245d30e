// Errors: ZT_CHECK throws zt::Error carrying file, line and an actionable message.
// Use it for user, shape, dtype and configuration errors; ZT_DCHECK is for hot-loop
// invariants and vanishes in release builds.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace zt {

/// The one exception type zt throws for user-facing errors.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

namespace detail {
template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
[[noreturn]] void throw_error(const char* file, int line, const std::string& msg);
}  // namespace detail

}  // namespace zt

/// Throws zt::Error("file:line: msg...") unless cond holds.
#define ZT_CHECK(cond, ...)                                                               \
  do {                                                                                    \
    if (!(cond)) ::zt::detail::throw_error(__FILE__, __LINE__, ::zt::detail::cat(__VA_ARGS__)); \
  } while (0)

/// Unconditional error.
#define ZT_FAIL(...) ::zt::detail::throw_error(__FILE__, __LINE__, ::zt::detail::cat(__VA_ARGS__))

#ifdef NDEBUG
#define ZT_DCHECK(cond) ((void)0)
#else
#define ZT_DCHECK(cond) ZT_CHECK(cond, "internal invariant failed: " #cond)
#endif
