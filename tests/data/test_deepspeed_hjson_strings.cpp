// hjson's strings in a DeepSpeed config read as DeepSpeed's hjson reads them: a single-quoted
// string takes JSON's escapes and keeps a '#' or '//' (no comment starts inside it); a
// '''multi-line''' string drops the blanks up to its opening quotes' column on each line, the
// rest of the opening line when blank, and its last line break. What follows such a string
// keeps its line, so later errors still name the right one.
#include <gtest/gtest.h>

#include "common/test_util.h"
#include "configs/deepspeed.h"

namespace zt::config {
namespace {

using test::error_of;

TEST(DeepSpeedHjsonStrings, ASingleQuotedStringKeepsAHashAndTakesJsonEscapes) {
  const Node n = parse_deepspeed_text(
      "{\n  a: 'x # y // z'\n  b: 'it\\'s \"q\"\\tq'\n  'c d': 1\n  e: ''\n  f: it's\n}", "d.json");
  EXPECT_EQ(n.get("a").scalar(), "x # y // z");
  EXPECT_EQ(n.get("b").scalar(), "it's \"q\"\tq");
  EXPECT_EQ(n.get("c d").scalar(), "1");
  EXPECT_EQ(n.get("e").scalar(), "");
  EXPECT_EQ(n.get("e").line(), 5);
  EXPECT_EQ(n.get("f").scalar(), "it's");  // a quote inside a value is text
}

TEST(DeepSpeedHjsonStrings, AMultiLineStringDropsTheIndentOfItsQuotes) {
  // As hjson 3.1 reads each (checked with Python's hjson.loads).
  const Node n = parse_deepspeed_text(
      "{\n"
      "  a:\n"
      "    '''\n"
      "    line1\n"
      "      line2 # not a comment\n"
      "\n"
      "    it's \"q\" \\n\n"
      "    '''\n"
      "  b: '''one\n"
      "  two\n"
      "        three'''\n"
      "  c: 1\n"
      "}",
      "d.json");
  EXPECT_EQ(n.get("a").scalar(), "line1\n  line2 # not a comment\n\nit's \"q\" \\n");
  EXPECT_EQ(n.get("b").scalar(), "one\ntwo\n   three");
  EXPECT_EQ(n.get("c").line(), 12);
}

TEST(DeepSpeedHjsonStrings, AnOpenStringIsNamedAtItsLineAndColumn) {
  const std::string msg =
      error_of([] { parse_deepspeed_text("{\n  a: '''x\n  b: 1\n}", "d.json"); });
  EXPECT_NE(msg.find("d.json:2:6: "), std::string::npos) << msg;
  EXPECT_NE(msg.find("not closed"), std::string::npos) << msg;
}

// hjson reads a value without quotes to the end of its line unless it is a number, true, false
// or null: 'linear # c' is the value there (DeepSpeed then warms up logarithmically, as it
// does for a warmup_type it does not know), where zt's reader would stop at the comment.
TEST(DeepSpeedHjsonStrings, AValueWithoutQuotesThatTheLineContinuesIsNamed) {
  for (const char* rest : {" # linear, not log", ", \"x\": 1", " // c", " /* c */"}) {
    SCOPED_TRACE(rest);
    const std::string msg = error_of([&] {
      parse_deepspeed_text(std::string("{\n  \"warmup_type\": linear") + rest + "\n}", "d.json");
    });
    EXPECT_NE(msg.find("d.json:2:18: the value 'linear' has no quotes"), std::string::npos) << msg;
    EXPECT_NE(msg.find("quote it"), std::string::npos) << msg;
  }
  const std::string in_list =
      error_of([] { parse_deepspeed_text("{\"betas\": [low, 0.9]}", "d.json"); });
  EXPECT_NE(in_list.find("d.json:1:12: the value 'low' has no quotes"), std::string::npos)
      << in_list;
  // Numbers, true, false and null end where hjson ends them; a value alone on its line reads
  // the same either way.
  const Node n = parse_deepspeed_text(
      "{\n  a: 0.5 # c\n  b: true, c: null, d: [1, -2e3]\n  e: linear\n  f: 'x' # c\n}", "d.json");
  EXPECT_EQ(n.get("a").scalar(), "0.5");
  EXPECT_EQ(n.get("b").scalar(), "true");
  EXPECT_EQ(n.get("e").scalar(), "linear");
  EXPECT_EQ(n.get("f").scalar(), "x");
}

}  // namespace
}  // namespace zt::config
