// Errors: ZT_CHECK throws zt::Error carrying an actionable message and the file and line
// that raised it. Use it for user, shape, dtype and configuration errors; ZT_DCHECK is for
// hot-loop invariants and vanishes in release builds. A user reads the message alone;
// with ZT_DEBUG=1 in the environment every message starts with its source location.
#pragma once

#include <exception>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace zt {

/// The one exception type zt throws for user-facing errors.
class Error : public std::runtime_error {
 public:
  /// An error without a source location: what() is `what`.
  explicit Error(const std::string& what) : std::runtime_error(what) {}
  /// An error raised at `location` ("tensor.cpp:87"): what() is `msg`, prefixed with
  /// "tensor.cpp:87: " when debug_errors() is on, then a line naming the module that was
  /// running (core/error_context.h) when one was.
  Error(const std::string& msg, const std::string& location);
  /// Where ZT_CHECK / ZT_FAIL raised it ("tensor.cpp:87"); empty when unknown.
  const std::string& location() const { return location_; }

 private:
  std::string location_;
};

/// True when the environment sets ZT_DEBUG (to anything but "" or "0"): error messages
/// then carry their source location. Read at each error, so it can change at run time.
bool debug_errors();

/// The message of the exception `e` holds: what() of a std::exception, "an unknown error"
/// for anything else; "" when `e` is null. With std::current_exception(), of the one in
/// flight (inside a catch block).
std::string message_of(const std::exception_ptr& e);

/// "a, b, c and 12 more": the first `shown` names, comma-separated, then how many are left,
/// for messages that would otherwise list thousands of keys.
std::string list_names(const std::vector<std::string>& names, size_t shown = 8);

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

/// Throws zt::Error(msg..., "file:line") unless cond holds.
#define ZT_CHECK(cond, ...)                                                                     \
  do {                                                                                          \
    if (!(cond)) ::zt::detail::throw_error(__FILE__, __LINE__, ::zt::detail::cat(__VA_ARGS__)); \
  } while (0)

/// Unconditional error.
#define ZT_FAIL(...) ::zt::detail::throw_error(__FILE__, __LINE__, ::zt::detail::cat(__VA_ARGS__))

#ifdef NDEBUG
#define ZT_DCHECK(cond) ((void)0)
#else
#define ZT_DCHECK(cond) ZT_CHECK(cond, "internal invariant failed: " #cond)
#endif
