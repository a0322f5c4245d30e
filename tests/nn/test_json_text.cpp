// JSON from untrusted files: its depth is counted without parsing (brackets inside strings
// do not count), and an error message quotes a value as a short scalar or by its type and
// size, never by serializing a container (which recurses once per level).
#include <gtest/gtest.h>

#include <string>

#include "common/test_util.h"
#include "nn/json_text.h"

using namespace zt;

TEST(JsonText, DepthCountsBracketsOutsideStrings) {
  EXPECT_EQ(nn::json_depth("3"), 0);
  EXPECT_EQ(nn::json_depth(R"({"a": [1, {"b": []}], "c": {}})"), 4);
  EXPECT_EQ(nn::json_depth(R"({"a": "[[[{{\"[[["})"), 1);
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_EQ(nn::json_depth(deep), 100000);
  EXPECT_TRUE(
      test::throws_with([&] { nn::check_json_depth(deep, 8, "'m.json'", "a m.json nests 2"); },
                        "'m.json' nests 100000 levels deep (a m.json nests 2: corrupt or "
                        "hostile file)"));
  EXPECT_EQ(test::error_of([] { nn::check_json_depth("[[1]]", 2, "x", "y"); }), "");
}

TEST(JsonText, BriefQuotesScalarsAndNamesContainers) {
  EXPECT_EQ(nn::json_brief(nlohmann::json(-3)), "-3");
  EXPECT_EQ(nn::json_brief(nlohmann::json("3")), "\"3\"");
  EXPECT_EQ(nn::json_brief(nlohmann::json(nullptr)), "null");
  EXPECT_EQ(nn::json_brief(nlohmann::json::array()), "[]");
  EXPECT_EQ(nn::json_brief(nlohmann::json::object()), "{}");
  EXPECT_EQ(nn::json_brief(nlohmann::json::array({1})), "an array of 1 element");
  EXPECT_EQ(nn::json_brief(nlohmann::json::array({1, {2, 3}})), "an array of 2 elements");
  EXPECT_EQ(nn::json_brief(nlohmann::json{{"a", 1}, {"b", 2}}), "an object of 2 keys");
  EXPECT_EQ(nn::json_brief(nlohmann::json(std::string(100, 'x')), 10), "\"xxxxxx...");
  EXPECT_EQ(nn::json_brief(nlohmann::json(std::string("\xff"))), "\"\xEF\xBF\xBD\"")
      << "invalid UTF-8 is replaced, not thrown on";
}
