// The apps as a user starts them: command lines that must be refused, with the exit status
// and the words a user reads. (ctest's own command lines cannot hold an empty argument, so
// these start the binaries from here, through the shell.)
//  - an output option given an empty path is a mistake on the command line (exit 2): it
//    would write nothing (encode used to encode everything, sample to print "(no image)");
//  - so is an input option given one: it would read the default instead.
#include <sys/wait.h>

#include <cstdio>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "gtest/gtest.h"

namespace {

struct Outcome {
  int status = -1;  // the exit status; -1 when the command did not exit
  std::string output;
};

// `args` run through the shell, each quoted, with stdout and stderr together.
Outcome run(const std::vector<std::string>& args) {
  std::string line;
  for (const std::string& a : args) {
    line += " '";
    for (char c : a) line += c == '\'' ? std::string("'\\''") : std::string(1, c);
    line += "'";
  }
  Outcome o;
  std::FILE* p = ::popen((line + " 2>&1").c_str(), "r");
  if (p == nullptr) return o;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) o.output.append(buf, n);
  const int w = ::pclose(p);
  if (WIFEXITED(w)) o.status = WEXITSTATUS(w);
  return o;
}

const std::string kVqtokConfig = ZT_SOURCE_DIR "/configs/vqtok_tiny.yaml";
const std::string kVqgptConfig = ZT_SOURCE_DIR "/configs/vqgpt_tiny.yaml";

// Each command exits 2 (a mistake on the command line) saying `phrase`.
void expect_usage_errors(const std::vector<std::vector<std::string>>& commands,
                         const std::string& phrase) {
  for (const auto& args : commands) {
    const Outcome o = run(args);
    EXPECT_EQ(o.status, 2) << args[1] << ": " << o.output;
    EXPECT_NE(o.output.find(phrase), std::string::npos) << args[1] << ": " << o.output;
  }
}

}  // namespace

TEST(CommandLine, AnEmptyOutputPathIsRefused) {
  const std::vector<std::vector<std::string>> commands = {
      {ZT_VQTOK_BIN, "encode", "--config", kVqtokConfig, "-o", ""},
      {ZT_VQTOK_BIN, "decode", "--config", kVqtokConfig, "--codes", kVqtokConfig, "-o", ""},
      {ZT_VQTOK_BIN, "eval", "--config", kVqtokConfig, "-o", ""},
      {ZT_VQTOK_BIN, "export", "--config", kVqtokConfig, "--out", ""},
      {ZT_VQGPT_BIN, "sample", "--config", kVqgptConfig, "--out", ""},
      {ZT_VQGPT_BIN, "sample", "--config", kVqgptConfig, "--out", "grid.png", "--tokens", ""},
      {ZT_VQGPT_BIN, "export", "--config", kVqgptConfig, "-o", ""},
      {ZT_VQGPT_BIN, "tokenizer", "--config", kVqgptConfig, "-o", ""},
  };
  expect_usage_errors(commands, "must name the file or folder to write, got an empty path");
}

// An option naming what a command reads in place of its default, given an empty path (an
// unset shell variable, say), is a mistake on the command line too: it used to read the
// default silently (another tokenizer, another run's checkpoint).
TEST(CommandLine, AnEmptyInputPathIsRefused) {
  const std::string out = ::testing::TempDir() + "/zt_empty_input_never_written";
  const std::vector<std::vector<std::string>> commands = {
      {ZT_VQTOK_BIN, "encode", "--config", kVqtokConfig, "--weights", "", "-o", out + ".npy"},
      {ZT_VQTOK_BIN, "encode", "--config", kVqtokConfig, "--input", "", "-o", out + ".npy"},
      {ZT_VQTOK_BIN, "decode", "--config", kVqtokConfig, "--codes", kVqtokConfig, "--weights", "",
       "-o", out},
      {ZT_VQTOK_BIN, "eval", "--config", kVqtokConfig, "--weights", ""},
      {ZT_VQTOK_BIN, "export", "--config", kVqtokConfig, "--checkpoint", "", "-o", out},
      {ZT_VQGPT_BIN, "train", "--config", kVqgptConfig, "--tokenizer", "", "--set",
       "output_dir=" + out},
      {ZT_VQGPT_BIN, "sample", "--config", kVqgptConfig, "--checkpoint", "", "-o", out + ".png"},
      {ZT_VQGPT_BIN, "export", "--config", kVqgptConfig, "--checkpoint", "", "-o", out},
  };
  expect_usage_errors(commands, "must name the file or folder to read, got an empty path");
}

// --help shows each option's default: --ranks' is one thread rank (the 0 that marks an
// absent --ranks is no rank count, and outside the range the option takes).
TEST(CommandLine, HelpShowsOneRankAsTheRanksDefault) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {ZT_VQTOK_BIN, "train", "--help"}, {ZT_VQGPT_BIN, "sample", "--help"}}) {
    const Outcome o = run(args);
    EXPECT_EQ(o.status, 0) << args[1] << ": " << o.output;
    EXPECT_NE(o.output.find("--ranks INT:INT in [1, 1024]=1"), std::string::npos)
        << args[1] << ": " << o.output;
    EXPECT_EQ(o.output.find("]=0"), std::string::npos) << args[1] << ": " << o.output;
  }
}

// A config piped in (--config /dev/stdin, or a shell's <(...)) has no path to resolve: the
// command runs with it, naming it as given, rather than failing on the path.
TEST(CommandLine, AConfigCanBePipedIn) {
  const std::string out = zt::test::process_temp_dir("zt_piped_config") + "/x.safetensors";
  for (const std::string config : {"/dev/stdin", "/dev/fd/3"}) {
    // The config through a pipe, on stdin and on file descriptor 3.
    const Outcome o = run({"sh", "-c",
                           "cat \"$3\" | \"$0\" export --config \"$1\" --checkpoint "
                           "/nonexistent/ckpt --out \"$2\" 3<&0",
                           ZT_VQTOK_BIN, config, out, kVqtokConfig});
    EXPECT_EQ(o.status, 1) << config << ": " << o.output;
    EXPECT_NE(o.output.find("vqtok export: config " + config), std::string::npos)
        << config << ": " << o.output;
    EXPECT_NE(o.output.find("no checkpoint at '/nonexistent/ckpt'"), std::string::npos)
        << config << ": " << o.output;
  }
}

// A count given as a fraction is refused by a check that names the option and says that it
// takes a whole number, as a negative one is: not by CLI11's "Could not convert: --top-k =
// 1.5", which says neither what is wrong nor what the option takes.
TEST(CommandLine, AFractionalCountNamesItsOptionAndWhatItTakes) {
  const std::string out = ::testing::TempDir() + "/zt_fraction_never_written";
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{ZT_VQGPT_BIN, "sample", "--config", kVqgptConfig, "-o", out + ".png", "--top-k", "1.5"},
       "--top-k: must be a whole number >= 0, got 1.5"},
      {{ZT_VQGPT_BIN, "train", "--config", kVqgptConfig, "--steps", "1.5", "--set",
        "output_dir=" + out},
       "--steps: must be a whole number >= 1, got 1.5"},
      {{ZT_VQGPT_BIN, "tokenizer", "--config", kVqgptConfig, "--steps", "2.5", "-o", out},
       "--steps: must be a whole number >= 1, got 2.5"},
      {{ZT_VQGPT_BIN, "plan", "--config", kVqgptConfig, "--steps", "1.5"},
       "--steps: must be a whole number from 1 to 2147483647, got 1.5"},
      {{ZT_VQGPT_BIN, "plan", "--config", kVqgptConfig, "--steps", "3000000000"},
       "--steps: must be a whole number from 1 to 2147483647, got 3000000000"},
      {{ZT_VQTOK_BIN, "train", "--config", kVqtokConfig, "--steps", "1.5", "--set",
        "output_dir=" + out},
       "--steps: must be a whole number >= 1, got 1.5"},
      {{ZT_VQTOK_BIN, "encode", "--config", kVqtokConfig, "-o", out + ".npy", "--limit", "2.5"},
       "--limit: must be a whole number >= 0, got 2.5"},
      {{ZT_VQTOK_BIN, "eval", "--config", kVqtokConfig, "--batches", "0.5"},
       "--batches: must be a whole number >= 0, got 0.5"},
  };
  for (const auto& [args, phrase] : cases) expect_usage_errors({args}, phrase);
}
