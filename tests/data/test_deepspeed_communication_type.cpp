// DeepSpeed's communication_data_type names the dtype gradients are averaged in (its
// default: the dtype the parameters train in). zt reduce-scatters gradients in fp32 at every
// precision (parameters are gathered in their own dtype, which the key does not govern), so
// fp32 asks for what zt does and is accepted; the training dtype (DeepSpeed's default) is
// accepted with a warning that zt reduces in fp32 all the same; another dtype is an error
// naming the key.
#include <gtest/gtest.h>

#include "common/test_util.h"
#include "configs/app_config.h"

namespace zt::config {
namespace {

using test::error_of;

AppConfig with_deepspeed(const std::string& sub, const std::string& json) {
  const std::string ds = test::write_temp_file("zt_deepspeed_comm_type", sub, "ds.json", json);
  const std::string y =
      test::write_temp_file("zt_deepspeed_comm_type", sub, "run.yaml",
                            "train:\n  steps: 10\ndeepspeed_config: " + ds + "\n");
  return load_app_config(y, {});
}

TEST(DeepSpeedCommunicationType, Fp32IsWhatZtReducesInAtEveryPrecision) {
  for (const char* json : {R"({"communication_data_type": "fp32"})",
                           R"({"bf16": {"enabled": true}, "communication_data_type": "fp32"})",
                           R"({"fp16": {"enabled": true}, "communication_data_type": "fp32"})"}) {
    SCOPED_TRACE(json);
    EXPECT_EQ(error_of([&] { with_deepspeed("fp32", json); }), "");
    EXPECT_TRUE(with_deepspeed("fp32", json).warnings.empty());
  }
}

TEST(DeepSpeedCommunicationType, TheTrainingDtypeIsAcceptedWithAWarning) {
  for (const char* json : {R"({"bf16": {"enabled": true}, "communication_data_type": "bf16"})",
                           R"({"fp16": {"enabled": true}, "communication_data_type": "fp16"})"}) {
    SCOPED_TRACE(json);
    const AppConfig c = with_deepspeed("trained", json);
    ASSERT_EQ(c.warnings.size(), 1u);
    EXPECT_NE(c.warnings[0].find("communication_data_type: has no effect in zt (zt reduces "
                                 "gradients in fp32"),
              std::string::npos)
        << c.warnings[0];
  }
}

TEST(DeepSpeedCommunicationType, OtherDtypesAreErrorsNamingTheKey) {
  for (const char* json : {R"({"communication_data_type": "bf16"})",
                           R"({"bf16": {"enabled": true}, "communication_data_type": "fp16"})",
                           R"({"communication_data_type": "int8"})"}) {
    SCOPED_TRACE(json);
    const std::string msg = error_of([&] { with_deepspeed("other", json); });
    EXPECT_NE(msg.find("communication_data_type: not supported by zt (zt reduces gradients in "
                       "fp32"),
              std::string::npos)
        << msg;
  }
}

}  // namespace
}  // namespace zt::config
