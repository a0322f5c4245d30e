// The apps' readers of files a run left behind: one that is a FIFO (a named pipe) is refused
// by name, not opened (an open with nothing writing to it would wait forever). read_saved_run
// (apps/common/saved_run.h) reads a checkpoint's meta.json before a resume or an inference,
// read_metrics a run's metrics.jsonl on a resume, DecodeFolder an earlier decode's manifest.
#include <sys/stat.h>

#include <filesystem>

#include "apps/common/metrics.h"
#include "apps/common/saved_run.h"
#include "apps/vqtok/decode_folder.h"
#include "common/fifo_reader.h"
#include "common/test_util.h"

using namespace zt;
namespace fs = std::filesystem;

TEST(SavedRun, AMetaJsonThatIsAFifoIsRefusedNotWaitedOn) {
  const fs::path dir = fs::path(test::process_temp_dir("zt_saved_run_fifo")) / "step_000002";
  fs::create_directories(dir);
  const fs::path meta = dir / "meta.json";
  ASSERT_EQ(::mkfifo(meta.c_str(), 0600), 0);
  const std::string err =
      test::error_of_fifo_reader(meta.string(), [&] { app::read_saved_run(dir.string()); });
  EXPECT_NE(err.find("'" + meta.string() + "' is a FIFO"), std::string::npos) << err;
  fs::remove_all(dir);
}

TEST(SavedRun, AMetricsFileOrDecodeManifestThatIsAFifoIsRefusedNotWaitedOn) {
  const fs::path dir = test::process_temp_dir("zt_run_files_fifo");
  const fs::path metrics = dir / "metrics.jsonl";
  ASSERT_EQ(::mkfifo(metrics.c_str(), 0600), 0);
  const std::string err =
      test::error_of_fifo_reader(metrics.string(), [&] { app::read_metrics(metrics.string()); });
  EXPECT_NE(err.find("the metrics file '" + metrics.string() + "' is a FIFO"), std::string::npos)
      << err;
  const fs::path manifest = dir / vqtok::kDecodeManifest;
  ASSERT_EQ(::mkfifo(manifest.c_str(), 0600), 0);
  const std::string bad =
      test::error_of_fifo_reader(manifest.string(), [&] { vqtok::DecodeFolder{dir.string()}; });
  EXPECT_NE(bad.find("decode: '" + manifest.string() +
                     "' (the list of files an earlier decode wrote there) is a FIFO"),
            std::string::npos)
      << bad;
  fs::remove_all(dir);
}
