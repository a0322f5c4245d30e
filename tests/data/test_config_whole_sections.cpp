// Edge cases of the config front ends: an override that empties a section whole, an empty
// DeepSpeed config, a folder given as a file, DeepSpeed's older name of bf16, a syntax error
// in a tab-indented JSON, control characters. Each says what happened in the user's terms.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "common/test_util.h"
#include "configs/app_config.h"
#include "configs/deepspeed.h"

namespace zt::config {
namespace {

using test::error_of;

// `--set train={}` replaces the file's train section with an empty one, as any mapping set
// whole does: the keys the file gave go back to their defaults, which a warning names.
TEST(Config, AnOverrideWithAnEmptyMappingNamesTheKeysItDrops) {
  const std::string path = test::write_temp_file("zt_config_whole", "empty", "w.yaml",
                                                 "train:\n  steps: 10\n  lr: 2.0e-3\n");
  for (const char* value : {"{}", "{ }"}) {
    const std::string set = std::string("train=") + value;
    AppConfig c = load_app_config(path, {{set, "--set " + set}});
    EXPECT_EQ(c.train.steps, TrainConfig{}.steps) << "YAML's rule: the section is replaced";
    ASSERT_EQ(c.warnings.size(), 1u) << value;
    EXPECT_EQ(c.warnings[0], "--set " + set + " sets all of train: the keys " + path +
                                 ":1 gives it (steps, lr) go back to their defaults (to change "
                                 "one key, --set train.<key>=...)");
  }
}

// An empty DeepSpeed JSON is named as one: no advice to start from a zt YAML config.
TEST(Config, AnEmptyDeepSpeedConfigIsNamedAsOne) {
  for (const char* text : {"", "{}", "// nothing yet\n"}) {
    const std::string msg = error_of([&] { parse_deepspeed_text(text, "ds_config.json"); });
    EXPECT_NE(msg.find("ds_config.json: the DeepSpeed config is empty"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("vqtok_tiny.yaml"), std::string::npos) << msg;
  }
}

// A folder given as a config file is named as one (it read as an empty config).
TEST(Config, AFolderGivenAsAConfigFileIsNamed) {
  const std::string dir =
      std::filesystem::path(test::write_temp_file("zt_config_whole", "folder", "x.yaml", "a: 1"))
          .parent_path()
          .string();
  for (const std::string& msg :
       {error_of([&] { load_app_config(dir); }), error_of([&] { read_deepspeed_file(dir); })})
    EXPECT_NE(msg.find("'" + dir + "' is a folder"), std::string::npos) << msg;
}

// DeepSpeed still reads "bfloat16", its older name of the bf16 section: refused naming the
// name zt reads, not as an unknown key.
TEST(Config, DeepSpeedsOlderNameOfBf16IsNamed) {
  const std::string ds = test::write_temp_file("zt_config_whole", "bfloat16", "ds.json",
                                               "{\"bfloat16\": {\"enabled\": true}}");
  const std::string yaml = test::write_temp_file("zt_config_whole", "bfloat16", "run.yaml",
                                                 "deepspeed_config: " + ds + "\n");
  const std::string msg = error_of([&] { load_app_config(yaml); });
  EXPECT_EQ(msg.rfind(ds + ":1: bfloat16: DeepSpeed's older name of the bf16 section", 0), 0u)
      << msg;
}

// JSON may indent with tabs: a DeepSpeed config's syntax error (a missing comma between two
// members on one line; hjson takes a line break for one) is named as
// a JSON one at its place, not blamed on the tabs as a YAML file's would be.
TEST(Config, ADeepSpeedConfigsSyntaxErrorIsNotBlamedOnItsTabs) {
  const std::string text =
      "{\n\t\"train_micro_batch_size_per_gpu\": 2,\n\t\"steps_per_print\": 1 \"x\": 2\n}\n";
  const std::string msg = error_of([&] { parse_deepspeed_text(text, "ds.json"); });
  EXPECT_EQ(msg.rfind("ds.json:3:", 0), 0u) << msg;
  EXPECT_NE(msg.find("JSON parse error"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("tab"), std::string::npos) << msg;
  // Without the error, the tabs read as JSON's whitespace.
  EXPECT_EQ(parse_deepspeed_text("{\n\t\"steps_per_print\": 1\n}\n", "ds.json")["steps_per_print"]
                .as_int(),
            1);
}

// A control character (an invisible one, from a copy and paste or a damaged file) is
// named with its place: YAML allows none but tab, line feed and carriage return, and
// left to the parser it made errors that quote a value looking right ("expected a number,
// got '0.1'") or name an escape nobody wrote.
TEST(Config, AControlCharacterIsNamedWithItsPlace) {
  const std::string nul = std::string("train:\n  steps: 5\n") + '\0' + '\0';
  const std::pair<std::string, std::string> cases[] = {
      {"train:\n  lr: 0.1\x01\n", "c.yaml:2:10: byte 0x01 is a control character"},
      {nul, "c.yaml:3:1: byte 0x00 is a control character"},
      {"train:\n  resume: a\xc2\x9b\n", "c.yaml:2:12: bytes 0xC2 0x9B are a control character"}};
  for (const auto& [text, want] : cases) {
    const std::string msg = error_of([&] { parse_yaml(text, "c.yaml"); });
    EXPECT_EQ(msg.rfind(want, 0), 0u) << msg;
  }
  // Tabs, carriage returns and other text are fine.
  EXPECT_EQ(
      parse_yaml("train:\r\n  resume: \"a\tb \xc2\xa0\xc2\x85\"\r\n", "c.yaml")["train"]["resume"]
          .as_string(),
      "a\tb \xc2\xa0\xc2\x85");
  // Control characters written as escapes are text, and read back from the config a
  // checkpoint keeps (yaml-cpp writes DEL unescaped).
  const Node escaped = parse_yaml("resume: \"a\\x01\\x7f\\x9b\"\n", "c.yaml");
  EXPECT_EQ(parse_yaml(escaped.dump(), "meta.json")["resume"].as_string(), "a\x01\x7f\xc2\x9b");
}

}  // namespace
}  // namespace zt::config
