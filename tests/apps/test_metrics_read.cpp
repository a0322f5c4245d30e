// Reading a run's metrics.jsonl back (a resume keeps the records up to its step): a line
// nested deeper than any record zt writes is refused by name before anything recurses into
// it, as meta.json's and safetensors' readers refuse theirs (200,000 levels overflowed the
// stack when the kept records were written back).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "apps/common/metrics.h"
#include "common/test_util.h"

using namespace zt;
namespace fs = std::filesystem;

TEST(MetricsRead, ALineNestedPastAnyRecordIsRefusedByName) {
  const fs::path dir = fs::path(test::process_temp_dir("zt_metrics_read"));
  fs::create_directories(dir);
  const std::string path = (dir / "metrics.jsonl").string();
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  for (const bool last : {false, true}) {
    std::ofstream(path, std::ios::trunc)
        << "{\"step\": 1, \"loss\": 0.5, \"memory\": {\"cuda:0\": {\"peak\": 1}}}\n"
        << "{\"step\": 2, \"odd\": " << deep << "}\n"
        << (last ? "" : "{\"step\": 3}\n");
    EXPECT_TRUE(
        test::throws_with([&] { app::read_metrics(path); }, path + ":2: nests 200001 levels deep"));
    EXPECT_TRUE(test::throws_with(
        [&] { app::filter_metrics(path, [](const nlohmann::json&) { return true; }); },
        path + ":2: nests 200001 levels deep"));
  }
  // A record as deep as zt writes them reads.
  std::ofstream(path, std::ios::trunc)
      << "{\"step\": 1, \"memory\": {\"cuda:0\": {\"peak\": [1, 2]}}}\n";
  EXPECT_EQ(app::read_metrics(path).size(), 1u);
  fs::remove_all(dir);
}
