// A user reads an error's message alone; the source location that raised it stays on the
// exception (Error::location) and leads the message only with ZT_DEBUG set.
#include <cstdlib>

#include "common/test_util.h"

using namespace zt;

namespace {
// The error a shape mismatch raises, with ZT_DEBUG set to `debug` (null: unset).
Error shape_error(const char* debug) {
  if (debug)
    ::setenv("ZT_DEBUG", debug, 1);
  else
    ::unsetenv("ZT_DEBUG");
  try {
    (void)add(zeros({2, 3}), zeros({4}));
  } catch (const Error& e) {
    ::unsetenv("ZT_DEBUG");
    return e;
  }
  ::unsetenv("ZT_DEBUG");
  ADD_FAILURE() << "add() of [2, 3] and [4] did not throw";
  return Error("");
}
}  // namespace

TEST(ErrorLocation, MessagesCarryNoSourceLocationByDefault) {
  const Error e = shape_error(nullptr);
  const std::string msg = e.what();
  EXPECT_NE(msg.find("cannot be broadcast"), std::string::npos) << msg;
  EXPECT_EQ(msg.find(".cpp:"), std::string::npos) << "location in a user message: " << msg;
  EXPECT_NE(e.location().find(".cpp:"), std::string::npos)
      << "the location is kept for debugging: '" << e.location() << "'";
  EXPECT_EQ(shape_error("0").what(), msg) << "ZT_DEBUG=0 is off";
}

TEST(ErrorLocation, DebugModePrefixesTheLocation) {
  const Error e = shape_error("1");
  const std::string msg = e.what();
  ASSERT_FALSE(e.location().empty());
  EXPECT_EQ(msg.rfind(e.location() + ": ", 0), 0u) << msg;
  EXPECT_NE(msg.find("cannot be broadcast"), std::string::npos) << msg;
}

TEST(ErrorLocation, ErrorsBuiltFromAMessageHaveNoLocation) {
  const Error e("plain");
  EXPECT_STREQ(e.what(), "plain");
  EXPECT_TRUE(e.location().empty());
}
