// What was running when an error was raised. A layer above core (nn's module calls) says
// what this thread is running through a provider, and every zt::Error raised with a
// location (ZT_CHECK, ZT_FAIL) and every out-of-memory error then names it on a line of
// its own at the end: "in module decoder.up.1.conv (Conv2d) of Decoder". Core knows
// nothing of modules.
// Raised in a backward pass, they also name the autograd node: "in backward of linear".
#pragma once

#include <string>

namespace zt {

/// Describes what the calling thread is running ("" when nothing); called only while an
/// error is being raised.
using ErrorContextProvider = std::string (*)();

/// Installs the process-wide provider (null removes it).
void set_error_context_provider(ErrorContextProvider provider);

/// `message`, then "\n  <what the provider says>" and, in a backward pass, "\n  in
/// backward of <node>", each unless empty or already in `message` (an error caught and
/// raised again in one module).
std::string with_error_context(const std::string& message);

}  // namespace zt
