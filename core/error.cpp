// zt::Error's message and location, and the one throw point behind ZT_CHECK / ZT_FAIL.
#include "core/error.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "core/autograd.h"
#include "core/error_context.h"

namespace zt {

bool debug_errors() {
  const char* v = std::getenv("ZT_DEBUG");
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

static std::atomic<ErrorContextProvider> context_provider{nullptr};

void set_error_context_provider(ErrorContextProvider provider) {
  context_provider.store(provider);
}

std::string with_error_context(const std::string& message) {
  const ErrorContextProvider provider = context_provider.load();
  std::string out = message;
  auto add = [&out](const std::string& line) {
    if (!line.empty() && out.find("\n  " + line) == std::string::npos) out += "\n  " + line;
  };
  try {
    if (provider) add(provider());
    if (const std::string* node = autograd::running_backward_node()) add("in backward of " + *node);
  } catch (...) {  // the error being raised matters more than its context
    return message;
  }
  return out;
}

Error::Error(const std::string& msg, const std::string& location)
    : std::runtime_error(
          with_error_context(debug_errors() && !location.empty() ? location + ": " + msg : msg)),
      location_(location) {}

std::string message_of(const std::exception_ptr& e) {
  if (!e) return "";
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "an unknown error";
  }
}

std::string list_names(const std::vector<std::string>& names, size_t shown) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < shown; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > shown) s += " and " + std::to_string(names.size() - shown) + " more";
  return s;
}

namespace detail {
void throw_error(const char* file, int line, const std::string& msg) {
  const char* base = file;
  for (const char* p = file; *p; ++p)
    if (*p == '/') base = p + 1;
  throw Error(msg, std::string(base) + ":" + std::to_string(line));
}
}  // namespace detail

}  // namespace zt
