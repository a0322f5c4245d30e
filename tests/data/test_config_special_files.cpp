// A config need not be a regular file: a named pipe (FIFO) or a shell's process substitution
// (`--config <(...)`, `--deepspeed <(...)`) and /dev/stdin can be read only once, so the loader
// reads each file once whatever it then does with it (a second parse, a DeepSpeed guess after a
// YAML error). A folder is refused with an error that names it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <future>
#include <string>

#include "common/test_util.h"
#include "configs/app_config.h"
#include "configs/config.h"
#include "configs/deepspeed.h"

namespace zt::config {
namespace {

// What load() gave reading a FIFO at `name` (in a temporary folder) that is fed `text` once.
struct FifoRead {
  AppConfig config;
  std::string error;      // what load() threw, or ""
  bool reopened = false;  // load() opened the FIFO again after reading it to its end
};

FifoRead read_fifo(const std::string& name, const std::string& text,
                   const std::function<AppConfig(const std::string&)>& load) {
  const std::string path = test::process_temp_dir("zt_config_fifo") + "/" + name;
  ::unlink(path.c_str());
  EXPECT_EQ(::mkfifo(path.c_str(), 0600), 0) << path;
  FifoRead r;
  auto done = std::async(std::launch::async, [&] {
    try {
      r.config = load(path);
    } catch (const std::exception& e) {
      r.error = e.what();
    }
  });
  auto running = [&](std::chrono::milliseconds t) {
    return done.wait_for(t) == std::future_status::timeout;
  };
  int fd = -1;  // opened once load() opens the FIFO to read it
  while (fd < 0 && running(std::chrono::milliseconds(1)))
    fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK);
  if (fd >= 0) {
    ::fcntl(fd, F_SETFL, 0);
    for (size_t at = 0; at < text.size();) {
      const ssize_t n = ::write(fd, text.data() + at, text.size() - at);
      if (n <= 0) break;
      at += static_cast<size_t>(n);
    }
    ::close(fd);
  }
  // Opened again, the FIFO waits for a writer that never comes: an empty one ends the test.
  if (running(std::chrono::seconds(5))) {
    r.reopened = true;
    while (running(std::chrono::milliseconds(10)))
      if (const int w = ::open(path.c_str(), O_WRONLY | O_NONBLOCK); w >= 0) ::close(w);
  }
  done.get();
  ::unlink(path.c_str());
  return r;
}

TEST(ConfigSpecialFiles, AConfigInAFifoIsReadOnce) {
  // A mapping set whole: the file's keys, which a warning names, are looked at again.
  const FifoRead r = read_fifo("run.yaml", "train:\n  steps: 10\n  lr: 1.0e-3\n", [](auto& path) {
    return load_app_config(path, {{"train={steps: 2}", "--set train={steps: 2}"}});
  });
  EXPECT_FALSE(r.reopened);
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.config.train.steps, 2);
  ASSERT_EQ(r.config.warnings.size(), 1u);
  EXPECT_NE(r.config.warnings[0].find(":1 gives it (lr)"), std::string::npos)
      << r.config.warnings[0];
}

TEST(ConfigSpecialFiles, AConfigInAFifoThatIsNotYamlIsReadOnce) {
  // Looked at again as a DeepSpeed JSON with comments, for an error that says so.
  const FifoRead r =
      read_fifo("bad.yaml", "train: [\n", [](auto& path) { return load_app_config(path); });
  EXPECT_FALSE(r.reopened);
  EXPECT_NE(r.error.find("bad.yaml:2:1: YAML parse error"), std::string::npos) << r.error;
}

TEST(ConfigSpecialFiles, ADeepSpeedConfigInAFifoIsRead) {
  const FifoRead r =
      read_fifo("ds_config.json", R"({"train_micro_batch_size_per_gpu": 3})", [](auto& path) {
        return load_app_config(test::write_temp_file("zt_config_fifo", "ds", "run.yaml",
                                                     "deepspeed_config: " + path + "\n"));
      });
  EXPECT_FALSE(r.reopened);
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.config.train.batch, 3);
}

// A DeepSpeed config piped in gives its text to one reader: under mpirun the ranks other
// than rank 0 read /dev/null, and the error says why, not only that it is empty.
TEST(ConfigSpecialFiles, AnEmptyDeepSpeedStreamSaysItReachesOneReader) {
  EXPECT_TRUE(test::throws_with([] { parse_deepspeed_text("", "/dev/null"); },
                                "/dev/null: the DeepSpeed config is empty (no keys: only blank "
                                "lines, comments or {}); it is no regular file"));
  const std::string ds = test::write_temp_file("zt_config_fifo", "empty", "ds.json", "{}");
  EXPECT_TRUE(test::throws_with([&] { parse_deepspeed_text("{}", ds); },
                                "or {}); give the settings it should set"));
}

TEST(ConfigSpecialFiles, AFolderIsNoConfig) {
  const std::string dir = test::process_temp_dir("zt_config_fifo");
  EXPECT_TRUE(
      test::throws_with([&] { load_app_config(dir); }, "config file '" + dir + "' is a folder"));
  const std::string y = test::write_temp_file("zt_config_fifo", "dsdir", "run.yaml",
                                              "deepspeed_config: " + dir + "\n");
  EXPECT_TRUE(test::throws_with([&] { load_app_config(y); }, "'" + dir + "' is a folder"));
}

}  // namespace
}  // namespace zt::config
