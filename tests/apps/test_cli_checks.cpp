// The command-line validators (apps/common/cli_checks.h) at their edges, as the apps'
// options meet them: each value passes or gets its one reason (exit 2 in the apps).
#include <string>

#include "apps/common/cli_checks.h"
#include "gtest/gtest.h"

using namespace zt;

namespace {

// What `v` says of `text`: "" when it passes.
std::string check(const CLI::Validator& v, std::string text) {
  return v(text);
}

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

// A --set key names every part of its dotted path, and a value follows the '='.
TEST(CliChecks, ASetKeyNamesEveryPartOfItsPathAndHasAValue) {
  EXPECT_EQ(check(app::kKeyValue, "train.lr=1e-3"), "");
  EXPECT_EQ(check(app::kKeyValue, " train.lr =1e-3"), "") << "blanks around the key";
  for (const char* bad : {"train..lr=3", ".lr=3", "train.=3", "=3", "train.lr"})
    EXPECT_TRUE(has(check(app::kKeyValue, bad), "every part of the path named")) << bad;
  EXPECT_TRUE(has(check(app::kKeyValue, "train.lr= "), "missing value after '='"));
}

// --batch takes 0 to 2^27 items; a seed 0 to 2^64 - 1, not a value past it saturated.
TEST(CliChecks, ABatchAndASeedStopAtTheirLargestValue) {
  EXPECT_EQ(check(app::kBatchSize, "0"), "");
  EXPECT_EQ(check(app::kBatchSize, "134217728"), "");
  EXPECT_TRUE(has(check(app::kBatchSize, "134217729"), "from 0 (train.batch) to 134217728"));
  EXPECT_EQ(check(app::kSeed, "18446744073709551615"), "");
  EXPECT_TRUE(has(check(app::kSeed, "18446744073709551616"), "from 0 to 18446744073709551615"));
}

// A positive number (a real-valued option) is finite and above 0; a count past int64 is
// refused saying so.
TEST(CliChecks, APositiveNumberIsFiniteAndACountBelow2To63) {
  EXPECT_EQ(check(app::kPositive, "1e-3"), "");
  for (const char* bad : {"0", "-1", "inf", "nan"})
    EXPECT_EQ(check(app::kPositive, bad), std::string("must be a positive number, got ") + bad);
  const CLI::Validator count = app::whole_number(0);
  EXPECT_EQ(check(count, "9223372036854775807"), "");
  EXPECT_EQ(check(count, "9223372036854775808"),
            "must be a whole number >= 0 below 2^63, got 9223372036854775808");
  EXPECT_EQ(check(count, "-1"), "must be a whole number >= 0, got -1");
}

// A bounded count (vqgpt sample --num) names its bounds for a value past them, and also for
// a fraction or a word, which are no count at all.
TEST(CliChecks, ABoundedCountIsAWholeNumberWithinItsBounds) {
  const CLI::Validator num = app::whole_number(1, 1024);
  EXPECT_EQ(check(num, "1"), "");
  EXPECT_EQ(check(num, "1024"), "");
  for (const char* bad : {"0", "1025", "1.5", "-1", "four", "", "99999999999999999999"})
    EXPECT_EQ(check(num, bad), std::string("must be a whole number from 1 to 1024, got ") + bad);
}

// An integer option without an upper bound (--top-k, --steps) takes a whole number from its
// least value up to 2^63 - 1, and says so for a fraction, a sign or a value past it.
TEST(CliChecks, AnUnboundedCountIsAWholeNumberFromItsLeast) {
  const CLI::Validator k = app::whole_number(0);
  EXPECT_EQ(check(k, "0"), "");
  EXPECT_EQ(check(k, "9223372036854775807"), "");
  for (const char* bad : {"1.5", "-1", "1e3", "all", ""})
    EXPECT_EQ(check(k, bad), std::string("must be a whole number >= 0, got ") + bad);
  EXPECT_EQ(check(k, "9223372036854775808"),
            "must be a whole number >= 0 below 2^63, got 9223372036854775808");
  EXPECT_EQ(check(app::whole_number(1), "0"), "must be a whole number >= 1, got 0");
}
