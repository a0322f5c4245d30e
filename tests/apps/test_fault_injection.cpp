// Fault injection: the vqtok binary (2 thread ranks, and 2 processes under mpirun; a
// checkpoint every step, so much of its time goes to checkpoint writes) is killed with
// SIGKILL at a random moment of a checkpoint save (every process of the job under mpirun), then
// resumed with --resume, several times; a last resume runs to the end. After every kill
// the test checks that nothing written before it was lost (every complete step folder is
// still complete, every metrics line up to the resume point is unchanged), that each
// resumed run starts from the newest checkpoint that was complete at the kill, and at the
// end that no temporary folder of a killed save is left and the metrics hold each step
// once. Also: the CLI's messages for --ranks 0 and for a new run into an earlier run's
// folder. The kill times come from a fixed seed (set ZT_FAULT_SEED to vary them).
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "apps/app_test_util.h"
#include "gtest/gtest.h"
#include "zero/checkpoint.h"

namespace fs = std::filesystem;
using namespace zt;

namespace {

// Each round advances at most three saves (plus 20 ms), so kSteps leaves every round of
// both tests a run still going when it is killed.
constexpr int64_t kSteps = 24;

struct Folder {
  fs::path dir;
  bool mpi = false;  // mpirun -np 2 (one process per rank) instead of 2 thread ranks
  fs::path config() const { return dir / "tiny.yaml"; }
  fs::path out() const { return dir / "out"; }
  fs::path ckpt() const { return out() / "checkpoints"; }
};

// The shared tiny config with a checkpoint at every step, all kept, no eval, and dead-code
// restarts (their counters are training state a resume must restore).
void write_config(const Folder& r) {
  const config::AppConfig cfg = apptest::tiny_vqtok_config(
      r.out().string(),
      {"train.steps=" + std::to_string(kSteps), "train.eval_every=0", "train.checkpoint_every=1",
       "train.keep_checkpoints=0", "train.codebook_restart_every=3"});
  std::ofstream(r.config()) << cfg.root.dump();
}

// Starts `args` (a program's path first) with stdout and stderr in `log`. The child leads a
// new session, so kill_job() finds every process of an mpirun job.
pid_t spawn(std::vector<std::string> args, const fs::path& log) {
  const pid_t pid = fork();
  if (pid == 0) {
    ::setsid();
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

// Starts `vqtok train` on 2 ranks with stdout and stderr in `log`.
pid_t start(const Folder& r, const std::vector<std::string>& extra, const fs::path& log) {
  std::vector<std::string> args;
#ifdef ZT_MPIRUN
  if (r.mpi) args = {ZT_MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", "2"};
#endif
  args.insert(args.end(), {ZT_VQTOK_BIN, "train", "--config", r.config().string()});
  if (!r.mpi && std::find(extra.begin(), extra.end(), "--ranks") == extra.end())
    args.insert(args.end(), {"--ranks", "2"});
  args.insert(args.end(), extra.begin(), extra.end());
  return spawn(std::move(args), log);
}

// The processes of session `sid` (from /proc).
std::vector<pid_t> session(pid_t sid) {
  std::vector<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream f(e.path() / "stat");
    std::string stat;
    std::getline(f, stat);
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    std::string state;
    long ppid = 0, pgrp = 0, sess = 0;
    rest >> state >> ppid >> pgrp >> sess;
    if (sess == sid && state != "Z") out.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return out;
}

// SIGKILL to the job started as `pid`: the process itself, and under mpirun every rank.
void kill_job(pid_t pid, bool mpi) {
  if (!mpi) {
    ::kill(pid, SIGKILL);
    return;
  }
  for (pid_t p : session(pid)) ::kill(p, SIGKILL);
}

// Waits until no process of the job is left (ranks of a killed mpirun are not our children).
void wait_job_gone(pid_t pid) {
  for (int i = 0; i < 500 && !session(pid).empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

// Waits until the job has begun its n-th checkpoint save since it started (a new ".tmp-"
// folder under checkpoints/). False when it exited first (or after 30 s).
bool wait_for_save(const Folder& r, pid_t pid, int n) {
  std::set<std::string> seen;
  for (int i = 0; i < 60000; ++i) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(r.ckpt(), ec)) {
      const std::string name = e.path().filename().string();
      if (name.find(".tmp-") != std::string::npos && name.rfind(".latest", 0) != 0 &&
          seen.insert(name).second && static_cast<int>(seen.size()) == n)
        return true;
    }
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        info.si_pid == pid)
      return false;
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  return false;
}

// Exit status of a finished child (or 128 + signal).
int wait_for(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string read_all(const fs::path& p) {
  std::ifstream f(p);
  return {std::istreambuf_iterator<char>(f), {}};
}

std::vector<std::string> lines(const fs::path& p) {
  std::vector<std::string> out;
  std::ifstream f(p);
  for (std::string l; std::getline(f, l);) out.push_back(l);
  return out;
}

// What survives a kill: the complete step folders (digests verified) and metrics lines.
struct Snapshot {
  std::set<int64_t> complete;
  std::vector<std::string> metrics;
  int64_t newest() const { return complete.empty() ? 0 : *complete.rbegin(); }
};

Snapshot snapshot(const Folder& r) {
  Snapshot s;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(r.ckpt(), ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("step_", 0) != 0 || name.find('.') != std::string::npos) continue;
    try {
      zero::verify_checkpoint(e.path().string());
      s.complete.insert(std::stoll(name.substr(5)));
    } catch (const std::exception&) {
    }
  }
  s.metrics = lines(r.out() / "metrics.jsonl");
  return s;
}

// The metrics line of `step` ("" when absent); a torn line counts as absent.
std::string line_of(const std::vector<std::string>& ls, int64_t step) {
  for (const std::string& l : ls) {
    auto j = nlohmann::json::parse(l, nullptr, /*allow_exceptions=*/false);
    if (!j.is_discarded() && j.value("step", int64_t{-1}) == step) return l;
  }
  return "";
}

// "resumed from <dir> at step N" in a log: N, or -1 when the run got no further.
int64_t resumed_step(const fs::path& log) {
  const std::string text = read_all(log);
  if (size_t at = text.find("resumed from "); at != std::string::npos) {
    const size_t eol = text.find('\n', at);
    const size_t step = text.find(" at step ", at);
    if (step != std::string::npos && step < eol) return std::stoll(text.substr(step + 9));
  }
  if (text.find("starting at step 0") != std::string::npos) return 0;
  return -1;
}

// Checks that what `before` held is still there after a resume from `from`.
void expect_nothing_lost(const Snapshot& before, const Snapshot& after, int64_t from) {
  for (int64_t s : before.complete)
    EXPECT_TRUE(after.complete.count(s)) << "complete checkpoint of step " << s << " was lost";
  for (int64_t s = 1; s <= from; ++s)
    if (!line_of(before.metrics, s).empty()) {
      EXPECT_EQ(line_of(after.metrics, s), line_of(before.metrics, s)) << "metrics of step " << s;
    }
}

// Kills the job during a checkpoint save `rounds` times (resuming after each), then resumes it to
// the end, checking after each kill that nothing written before it was lost.
void kill_and_resume(Folder r, int rounds) {
  fs::remove_all(r.dir);
  fs::create_directories(r.dir);
  write_config(r);

  const char* seed_env = std::getenv("ZT_FAULT_SEED");
  const unsigned seed = seed_env ? static_cast<unsigned>(std::atoi(seed_env)) : 20261201u;
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> saves(1, 3), delay_us(0, 20000);
  ::testing::Test::RecordProperty("seed", std::to_string(seed));

  Snapshot before;  // the folder as the previous kill left it
  int kills = 0;
  for (int round = 0; round < rounds; ++round) {
    const fs::path log = r.dir / ("run" + std::to_string(round) + ".log");
    const pid_t pid = start(
        r, round == 0 ? std::vector<std::string>{} : std::vector<std::string>{"--resume"}, log);
    // Killed at a random moment of its 1st to 3rd checkpoint save (0 to 20 ms into it).
    if (wait_for_save(r, pid, saves(rng)))
      std::this_thread::sleep_for(std::chrono::microseconds(delay_us(rng)));
    kill_job(pid, r.mpi);
    const int rc = wait_for(pid);
    wait_job_gone(pid);
    SCOPED_TRACE("round " + std::to_string(round) + ", seed " + std::to_string(seed) + "\n" +
                 read_all(log));
    ASSERT_TRUE(rc == 128 + SIGKILL || rc == 0) << "exit " << rc;
    kills += rc == 128 + SIGKILL;
    const Snapshot now = snapshot(r);
    if (round > 0) {
      // The run started from the newest checkpoint complete at the previous kill.
      const int64_t from = resumed_step(log);
      if (from >= 0) {
        EXPECT_EQ(from, before.newest());
      }
      expect_nothing_lost(before, now, std::max<int64_t>(from, 0));
    }
    before = now;
    if (rc == 0) break;  // it finished before the kill
  }
  EXPECT_EQ(kills, rounds) << "a run finished before its kill";

  // The last resume runs to the end.
  const fs::path log = r.dir / "final.log";
  ASSERT_EQ(wait_for(start(r, {"--resume"}, log)), 0) << read_all(log);
  SCOPED_TRACE(read_all(log));
  const int64_t from = resumed_step(log);
  EXPECT_EQ(from, before.newest());
  const Snapshot end = snapshot(r);
  expect_nothing_lost(before, end, from);
  for (int64_t s = 1; s <= kSteps; ++s) EXPECT_TRUE(end.complete.count(s)) << "step " << s;
  ASSERT_EQ(end.metrics.size(), static_cast<size_t>(kSteps));
  for (int64_t s = 1; s <= kSteps; ++s)
    EXPECT_EQ(nlohmann::json::parse(end.metrics[static_cast<size_t>(s - 1)])["step"], s);
  for (const auto& e : fs::directory_iterator(r.ckpt()))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos)
        << "left behind: " << e.path();
  // How many kills left a save half-written (its temporary removed by the next run); the
  // others landed just after a save completed.
  int torn_saves = 0;
  for (const auto& e : fs::directory_iterator(r.dir)) {
    if (e.path().extension() != ".log") continue;
    const std::string text = read_all(e.path());
    for (size_t at = text.find("interrupted checkpoint save"); at != std::string::npos;
         at = text.find("interrupted checkpoint save", at + 1))
      ++torn_saves;
  }
  ::testing::Test::RecordProperty("kills", kills);
  ::testing::Test::RecordProperty("kills_during_saves", torn_saves);
  std::printf("%d kills, %d of them during a checkpoint save\n", kills, torn_saves);
  fs::remove_all(r.dir);
}

}  // namespace

TEST(FaultInjection, KilledDuringCheckpointWritesResumesWithoutLoss) {
  kill_and_resume({fs::temp_directory_path() / ("zt_fault_" + std::to_string(::getpid()))}, 5);
}

TEST(FaultInjection, AKilledMpiJobResumesWithoutLoss) {
#ifndef ZT_MPIRUN
  GTEST_SKIP() << "mpirun not found";
#else
  kill_and_resume(
      {fs::temp_directory_path() / ("zt_fault_mpi_" + std::to_string(::getpid())), true}, 3);
#endif
}

// A run of 100000 steps, no checkpoint before the end, started into a fresh r.dir; returns
// once it has written its first metrics record (or after 30 s).
pid_t start_long_run(const Folder& r, const fs::path& log) {
  fs::remove_all(r.dir);
  fs::create_directories(r.dir);
  const config::AppConfig cfg = apptest::tiny_vqtok_config(
      r.out().string(), {"train.steps=100000", "train.eval_every=0", "train.log_every=3",
                         "train.checkpoint_every=100000"});
  std::ofstream(r.config()) << cfg.root.dump();
  const pid_t pid = start(r, {}, log);
  const fs::path metrics = r.out() / "metrics.jsonl";
  for (int i = 0; i < 30000 && lines(metrics).empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return pid;
}

// SIGTERM (a scheduler's preemption notice; Ctrl-C sends SIGINT, handled alike) stops
// training after the step under way: a checkpoint of that step, a line saying how to
// continue, exit status 128 + 15 as the process's own exit (not a death by the signal).
// --resume then starts from that step.
TEST(FaultInjection, SigtermStopsAfterTheStepWithACheckpoint) {
  Folder r{fs::temp_directory_path() / ("zt_fault_term_" + std::to_string(::getpid()))};
  const fs::path log = r.dir / "term.log";
  const pid_t pid = start_long_run(r, log);
  const fs::path metrics = r.out() / "metrics.jsonl";
  ASSERT_GE(lines(metrics).size(), 1u) << read_all(log);
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  const std::string text = read_all(log);
  ASSERT_TRUE(WIFEXITED(status)) << "died by signal " << WTERMSIG(status) << "\n" << text;
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM) << text;
  const size_t at = text.find("stopped by SIGTERM after step ");
  ASSERT_NE(at, std::string::npos) << text;
  const int64_t step = std::stoll(text.substr(at + 30));
  EXPECT_GE(step, 3);
  // The steps since the last log line are logged too (a window cut short), not lost.
  EXPECT_EQ(nlohmann::json::parse(lines(metrics).back())["step"], step) << read_all(log);
  EXPECT_LT(step, 100000);
  char name[32];
  std::snprintf(name, sizeof name, "step_%06lld", static_cast<long long>(step));
  EXPECT_NO_THROW(zero::verify_checkpoint((r.ckpt() / name).string()));
  EXPECT_EQ(zero::find_checkpoint(r.ckpt().string()), (r.ckpt() / name).string());
  // Resumed, it continues from that step to the (now nearer) end.
  EXPECT_EQ(
      wait_for(start(r, {"--resume", "--set", "train.steps=" + std::to_string(step + 2)}, log)), 0);
  EXPECT_NE(read_all(log).find("step " + std::to_string(step + 2) + "/"), std::string::npos)
      << read_all(log);
  EXPECT_TRUE(fs::exists(r.ckpt() / "latest"));
  fs::remove_all(r.dir);
}

// Under mpirun a signal may reach one process alone (a scheduler signalling one node's):
// the ranks agree on it after each step, so every rank stops after the same step, which
// is saved. A rank that went on alone would wait for the others for good.
TEST(FaultInjection, ASigtermToOneRankOfAnMpiJobStopsEveryRank) {
#ifndef ZT_MPIRUN
  GTEST_SKIP() << "mpirun not found";
#else
  Folder r{fs::temp_directory_path() / ("zt_fault_one_" + std::to_string(::getpid())), true};
  const fs::path log = r.dir / "one.log";
  const pid_t pid = start_long_run(r, log);
  ASSERT_GE(lines(r.out() / "metrics.jsonl").size(), 1u) << read_all(log);
  pid_t rank1 = 0;  // the job's process whose environment makes it rank 1
  for (pid_t p : session(pid)) {
    const std::string env = read_all(fs::path("/proc") / std::to_string(p) / "environ");
    if (env.find(std::string("OMPI_COMM_WORLD_RANK=1") + '\0') != std::string::npos) rank1 = p;
  }
  ASSERT_NE(rank1, 0) << "no rank 1 among the job's processes";
  ::kill(rank1, SIGTERM);
  bool exited = false;  // within 60 s; else the job is killed
  for (int i = 0; i < 60000 && !exited; ++i) {
    siginfo_t info{};
    exited = ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
             info.si_pid == pid;
    if (!exited) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!exited) kill_job(pid, true);
  wait_for(pid);
  wait_job_gone(pid);
  const std::string text = read_all(log);
  ASSERT_TRUE(exited) << "the job went on after rank 1's SIGTERM\n" << text;
  const size_t at = text.find("stopped by SIGTERM after step ");
  ASSERT_NE(at, std::string::npos) << text;
  char name[32];
  std::snprintf(name, sizeof name, "step_%06lld", std::stoll(text.substr(at + 30)));
  EXPECT_NO_THROW(zero::verify_checkpoint((r.ckpt() / name).string())) << text;
  fs::remove_all(r.dir);
#endif
}

// vqgpt's quick tokenizer is of no use unfinished, so a signal ends it at once, with no
// checkpoint. With --overwrite, the tokenizer it replaces is kept until the new one is
// saved: stopped part way, the new run loses neither (the old one is set aside, and the
// next start puts it back).
TEST(FaultInjection, AStoppedQuickTokenizerKeepsTheOneItReplaces) {
  const fs::path dir = fs::temp_directory_path() / ("zt_fault_tok_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  auto tokenizer = [&](const std::string& steps, bool overwrite, const fs::path& log) {
    std::vector<std::string> args = {
        ZT_VQGPT_BIN, "tokenizer", "--config", ZT_SOURCE_DIR "/configs/vqgpt_tiny.yaml",
        "--steps",    steps,       "-o",       (dir / "tok").string()};
    if (overwrite) args.push_back("--overwrite");
    return spawn(args, log);
  };
  ASSERT_EQ(wait_for(tokenizer("2", false, dir.string() + ".first.log")), 0)
      << read_all(dir.string() + ".first.log");
  const fs::path log = dir.string() + ".second.log";
  // Stopped at its first log line (step 10 of 100, nine tenths of the run still to go).
  const pid_t pid = tokenizer("100", true, log);
  for (int i = 0; i < 60000 && read_all(log).find("step 10/100") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ::kill(pid, SIGTERM);
  EXPECT_EQ(wait_for(pid), 128 + SIGTERM) << read_all(log);
  bool kept = false;  // the first tokenizer's checkpoint, in place or set aside
  for (const auto& e : fs::recursive_directory_iterator(dir / "tok"))
    kept |= e.path().filename() == "step_000002" && fs::exists(e.path() / "meta.json");
  EXPECT_TRUE(kept) << read_all(log);
  // The next start puts it back: a run without --overwrite is refused, naming it.
  const fs::path third = dir.string() + ".third.log";
  EXPECT_EQ(wait_for(tokenizer("2", false, third)), 1);
  EXPECT_NE(read_all(third).find("already holds checkpoints"), std::string::npos)
      << read_all(third);
  EXPECT_TRUE(fs::exists(dir / "tok" / "checkpoints" / "step_000002" / "meta.json"));
  fs::remove_all(dir);
  for (const char* l : {".first.log", ".second.log", ".third.log"}) fs::remove(dir.string() + l);
}

TEST(FaultInjection, CommandLineMessages) {
  Folder r{fs::temp_directory_path() / ("zt_fault_cli_" + std::to_string(::getpid()))};
  fs::remove_all(r.dir);
  fs::create_directories(r.ckpt() / "step_000005");
  write_config(r);
  const fs::path log = r.dir / "cli.log";
  EXPECT_NE(wait_for(start(r, {"--ranks", "0"}, log)), 0);
  EXPECT_NE(read_all(log).find("at least 1"), std::string::npos) << read_all(log);
  EXPECT_NE(wait_for(start(r, {"--ranks", "100000"}, log)), 0);
  EXPECT_NE(read_all(log).find("at most 1024"), std::string::npos) << read_all(log);
  // A new run into a folder holding checkpoints: refused, nothing deleted.
  EXPECT_EQ(wait_for(start(r, {}, log)), 1);
  const std::string text = read_all(log);
  EXPECT_NE(text.find("--overwrite"), std::string::npos) << text;
  EXPECT_TRUE(fs::exists(r.ckpt() / "step_000005"));
  fs::remove_all(r.dir);
}
