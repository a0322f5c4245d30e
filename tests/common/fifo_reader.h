// A test helper for readers that must not open a FIFO (named pipe): an open with nothing
// writing to it waits forever.
#pragma once

#include <functional>
#include <string>

namespace zt::test {

/// error_of(fn), where fn reads the FIFO `fifo`, which it should not open: should it still
/// wait after 10 s, the test fails, and a writer lets it go (opens and closes the FIFO) as
/// often as it waits on. In test_util.cpp.
std::string error_of_fifo_reader(const std::string& fifo, const std::function<void()>& fn);

}  // namespace zt::test
