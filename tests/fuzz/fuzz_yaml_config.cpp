// libFuzzer target: YAML parsing and the strict app-config reader over arbitrary text.
#include "configs/app_config.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  zt::fuzz::expect_ok_or_error([&] {
    zt::config::Node root = zt::config::parse_yaml(text, "<fuzz>");
    for (auto app : {zt::config::App::vqtok, zt::config::App::vqgpt})
      zt::fuzz::expect_ok_or_error([&] { zt::config::parse_app_config(root, app); });
  });
  return 0;
}
