// DeepSpeed's data_types section: its one key, grad_accum_dtype, names the dtype gradients
// are accumulated in. zt accumulates them in fp32 shards, so fp32 (or null, DeepSpeed's
// default, or the key left out) asks for what zt does and is accepted; another dtype, or a
// key DeepSpeed does not have there, is an error naming the key path.
#include <gtest/gtest.h>

#include "common/test_util.h"
#include "configs/app_config.h"

namespace zt::config {
namespace {

using test::error_of;

AppConfig with_deepspeed(const std::string& sub, const std::string& json) {
  const std::string ds = test::write_temp_file("zt_deepspeed_data_types", sub, "ds.json", json);
  const std::string y =
      test::write_temp_file("zt_deepspeed_data_types", sub, "run.yaml",
                            "train:\n  steps: 10\ndeepspeed_config: " + ds + "\n");
  return load_app_config(y, {});
}

TEST(DeepSpeedDataTypes, Fp32AccumulationIsWhatZtDoesAndIsAccepted) {
  for (const char* json :
       {R"({"data_types": {"grad_accum_dtype": "fp32"}})",
        R"({"bf16": {"enabled": true}, "data_types": {"grad_accum_dtype": "fp32"}})",
        R"({"data_types": {"grad_accum_dtype": null}})", R"({"data_types": {}})"}) {
    SCOPED_TRACE(json);
    EXPECT_EQ(error_of([&] { with_deepspeed("fp32", json); }), "");
  }
}

TEST(DeepSpeedDataTypes, OtherAccumulationDtypesAreErrorsNamingTheKey) {
  for (const char* json :
       {R"({"data_types": {"grad_accum_dtype": "bf16"}})",
        R"({"data_types": {"grad_accum_dtype": "fp16"}})",
        R"({"data_types": {"grad_accum_dtype": "fp32", "other": 1}})", R"({"data_types": true})"}) {
    SCOPED_TRACE(json);
    const std::string msg = error_of([&] { with_deepspeed("other", json); });
    EXPECT_NE(msg.find("data_types: not supported by zt (zt accumulates gradients in fp32: set "
                       "grad_accum_dtype to fp32"),
              std::string::npos)
        << msg;
  }
}

}  // namespace
}  // namespace zt::config
