// read_saved_run (apps/common/saved_run.h) reads a checkpoint's meta.json before a resume or
// an inference: one that is a FIFO (a named pipe) is refused by name, not opened (an open
// with nothing writing to it would wait forever).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <future>

#include "apps/common/saved_run.h"
#include "common/test_util.h"

using namespace zt;
namespace fs = std::filesystem;

TEST(SavedRun, AMetaJsonThatIsAFifoIsRefusedNotWaitedOn) {
  const fs::path dir = fs::path(test::process_temp_dir("zt_saved_run_fifo")) / "step_000002";
  fs::create_directories(dir);
  const fs::path meta = dir / "meta.json";
  ASSERT_EQ(::mkfifo(meta.c_str(), 0600), 0);
  auto done = std::async(std::launch::async, [&] {
    return test::error_of([&] { app::read_saved_run(dir.string()); });
  });
  // Should it wait on the FIFO, a writer lets it go (opens and closes it) and the test fails.
  for (auto wait = std::chrono::seconds(10); done.wait_for(wait) == std::future_status::timeout;
       wait = std::chrono::seconds(1)) {
    ADD_FAILURE() << "waited on the FIFO '" << meta.string() << "'";
    ::close(::open(meta.c_str(), O_WRONLY));
  }
  const std::string err = done.get();
  EXPECT_NE(err.find("'" + meta.string() + "' is a FIFO"), std::string::npos) << err;
  fs::remove_all(dir);
}
