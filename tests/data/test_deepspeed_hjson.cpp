// DeepSpeed reads its JSON config with hjson, where a line break separates two members as a
// comma does: a config written so trains under DeepSpeed, and reads the same in zt. What hjson
// reads and zt's reader (YAML's flow syntax) would read otherwise, a key written without quotes
// and without a blank after its ':' ({lr:0.1}, one key 'lr:0.1' to YAML), is an error at
// its line and column saying how to write it. Hugging Face's "auto" values, which its Trainer
// fills in before DeepSpeed reads the file, are named all at once.
#include <gtest/gtest.h>

#include "common/test_util.h"
#include "configs/app_config.h"
#include "configs/deepspeed.h"

namespace zt::config {
namespace {

using test::error_of;

AppConfig with_deepspeed(const std::string& sub, const std::string& json) {
  const std::string ds = test::write_temp_file("zt_deepspeed_hjson", sub, "ds.json", json);
  const std::string y = test::write_temp_file(
      "zt_deepspeed_hjson", sub, "run.yaml", "train:\n  steps: 10\ndeepspeed_config: " + ds + "\n");
  return load_app_config(y, {});
}

TEST(DeepSpeedHjson, ALineBreakSeparatesMembersAsACommaDoes) {
  const AppConfig c = with_deepspeed("no_commas", R"({
  "train_micro_batch_size_per_gpu": 3  // the micro batch
  "gradient_accumulation_steps": 2
  "optimizer": {
    "type": AdamW
    "params": {"lr": 1e-3, "betas": [
      0.9
      0.95
    ]}
  }
  "zero_optimization": {"stage": 3,
    "reduce_bucket_size": 5e5 /* a comment */
  },
})");
  EXPECT_EQ(c.train.batch, 3);
  EXPECT_EQ(c.train.gradient_accumulation_steps, 2);
  EXPECT_EQ(c.train.optimizer, Optimizer::adamw);
  EXPECT_DOUBLE_EQ(c.train.betas[0], 0.9);
  EXPECT_DOUBLE_EQ(c.train.betas[1], 0.95);
  EXPECT_EQ(c.zero.reduce_bucket_size, 500000);
}

TEST(DeepSpeedHjson, AKeyWithoutQuotesNorABlankAfterItsColonIsNamedAtItsColumn) {
  const std::string msg = error_of([&] {
    with_deepspeed("key_colon",
                   "{\n  \"optimizer\": {\"type\": \"Adam\",\n    \"params\": {lr:0.001}}\n}\n");
  });
  EXPECT_NE(msg.find("ds.json:3:16: the key 'lr' is followed by ':' without a blank"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("write \"lr\": or lr: "), std::string::npos) << msg;
  // With the blank, or quoted, it reads.
  EXPECT_EQ(error_of([&] {
              with_deepspeed(
                  "key_blank",
                  "{optimizer: {\"type\": \"Adam\", params: {\"lr\":0.001, eps: 1e-8}}}");
            }),
            "");
}

TEST(DeepSpeedHjson, TheTextIsParsedAsBefore) {
  // Strings keep what looks like a comment or a line break; members on one line still need
  // their comma (hjson's too).
  const Node n = parse_deepspeed_text("{\"a\": \"x // y # z\"\n \"b\": \"p\\\"q\"\n}", "d.json");
  EXPECT_EQ(n.get("a").scalar(), "x // y # z");
  EXPECT_EQ(n.get("b").scalar(), "p\"q");
  EXPECT_NE(error_of([] { parse_deepspeed_text("{\"a\": 1 \"b\": 2}", "d.json"); }), "");
}

// Hugging Face's Trainer fills a DeepSpeed config's "auto" values from its own arguments
// before DeepSpeed reads it; zt reads the file as written, and names every such key at once
// (read one by one, the first failed as "expected an integer, got 'auto'").
TEST(DeepSpeedHjson, HuggingFacesAutoValuesAreNamedTogether) {
  const std::string msg = error_of([&] {
    with_deepspeed(
        "auto",
        "{\n  \"train_micro_batch_size_per_gpu\": \"auto\",\n  \"optimizer\": {\"type\": "
        "\"AdamW\",\n    \"params\": {\"lr\": \"auto\", \"betas\": [0.9, \"auto\"]}}\n}\n");
  });
  EXPECT_NE(msg.find("ds.json:2: train_micro_batch_size_per_gpu: \"auto\" is a placeholder that "
                     "Hugging Face's Trainer fills in"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("train_micro_batch_size_per_gpu (line 2), optimizer.params.lr (line 4), "
                     "optimizer.params.betas.1 (line 4)"),
            std::string::npos)
      << msg;
}

}  // namespace
}  // namespace zt::config
