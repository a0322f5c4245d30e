// The command-line pieces every app shares: --config / --ranks / --set on each
// subcommand, and running a subcommand on every rank with the loaded config (thread
// ranks with --ranks N, or one process per rank under mpirun). Header-only: it needs
// CLI11, which only the executables link.
#pragma once

#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "apps/common/cli_checks.h"
#include "apps/common/run_checks.h"
#include "configs/app_config.h"
#include "configs/config.h"
#include "zero/comm/launch.h"

namespace zt::app {

struct CommonArgs {
  std::string config;
  int ranks = 0;  // 0: --ranks not given (one thread rank; under mpirun, the world size)
  std::vector<std::string> sets;
  std::string device;                 // --device: shortcut for --set train.device=D
  std::string deepspeed;              // --deepspeed: shortcut for --set deepspeed_config=PATH
  bool trains = false;                // a training subcommand: it runs on train.device
  const CLI::App* command = nullptr;  // the subcommand: run_on_ranks compares its options
};

/// The most thread ranks --ranks starts in one process.
constexpr int kMaxThreadRanks = 1024;

/// Adds --config (required, e.g. `example`), --ranks and repeatable --set to `sub`.
inline void add_common_args(CLI::App* sub, CommonArgs& c, const std::string& example) {
  c.command = sub;
  sub->add_option("-c,--config", c.config, "YAML config (e.g. " + example + ")")
      ->required()
      ->check(CLI::ExistingFile);
  sub->add_option(
         "--ranks", c.ranks,
         "thread ranks; under mpirun each process is one rank (then --ranks, if given, must "
         "equal -np)")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            try {
              size_t used = 0;
              const int n = std::stoi(v, &used);
              if (n >= 1 && n <= kMaxThreadRanks && used == v.size()) return "";
            } catch (const std::exception&) {
            }
            return "must be a whole number of thread ranks, at least 1 and at most " +
                   std::to_string(kMaxThreadRanks) +
                   " (they share one process; more ranks run under mpirun) (got '" + v + "')";
          },
          "INT in [1, " + std::to_string(kMaxThreadRanks) + "]"))
      ->default_str("1");  // c.ranks' 0 only marks an absent --ranks: one rank, or -np
  sub->add_option("--set", c.sets, "override a config value: --set train.lr=1e-3 (repeatable)")
      ->allow_extra_args(false)
      ->check(kKeyValue);
}

/// Adds --device cpu|cuda to a training subcommand `sub` (shortcut for --set
/// train.device=D; under mpirun, cuda starts NCCL with one GPU per process) and
/// --deepspeed ds_config.json (shortcut for --set deepspeed_config=PATH).
inline void add_device_arg(CLI::App* sub, CommonArgs& c) {
  c.trains = true;
  sub->add_option("--device", c.device, "cpu or cuda (shortcut for --set train.device=D)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  sub->add_option("--deepspeed", c.deepspeed,
                  "a DeepSpeed JSON config for batch, optimizer, scheduler, ZeRO and "
                  "bf16/fp16 (shortcut for --set deepspeed_config=PATH)")
      ->check(CLI::ExistingFile);
}

/// Each option of `command` as this process was given it (its values, else its shown default,
/// else "": not given), for check_same_options. Left out: --help; --ranks, which each process
/// checks against the world size; and the options that only make the config (--config, --set,
/// --device, --deepspeed), which check_same_config compares by what they resolve to (one
/// config under two paths is the same config).
inline std::vector<OptionValue> given_options(const CLI::App& command) {
  std::vector<OptionValue> given;
  for (const CLI::Option* o : command.get_options()) {
    const std::vector<std::string>& names = o->get_lnames();
    if (o == command.get_help_ptr() || names.empty()) continue;
    static const std::set<std::string> compared_elsewhere = {"ranks", "config", "set", "device",
                                                             "deepspeed"};
    if (compared_elsewhere.contains(names[0])) continue;
    std::string value;
    for (const std::string& r : o->results()) value += (value.empty() ? "" : " ") + r;
    if (o->count() == 0) value = o->get_default_str();
    given.push_back({"--" + names[0], value});
  }
  return given;
}

/// Loads the config at `path` with `sets` for `kind` in every process: under mpirun one that
/// does not load on some process is an error on every process (comm::AgreedError), reported
/// once, by rank 0 (agree_before_launch); a config that is no regular file (standard input, a
/// pipe, a FIFO) is read by rank 0 and sent to every process.
inline config::AppConfig load_config_on_ranks(const std::string& path,
                                              const std::vector<config::Override>& sets,
                                              config::App kind) {
  config::AppConfig cfg;
  std::exception_ptr bad_config;
  try {
    // mpirun gives its standard input to rank 0 alone (the others read /dev/null), and a pipe
    // or FIFO gives its text to one reader. Each reads a regular file itself (run_on_ranks's
    // check_same_config compares what they read).
    std::error_code ec;
    const bool stream = !std::filesystem::is_regular_file(path, ec);
    const std::string rank0s =
        comm::read_on_rank0([&] { return stream ? config::read_app_config_text(path) : ""; });
    cfg = config::load_app_config_text(stream ? rank0s : config::read_app_config_text(path), path,
                                       sets, kind);
  } catch (...) {
    bad_config = std::current_exception();
  }
  comm::agree_before_launch(bad_config);
  return cfg;
}

/// Loads the config (with c.sets and extra_sets applied) for `kind` (one that does not load
/// on some process of an mpirun job is reported once, by rank 0: agree_before_launch),
/// prints what runs on rank 0, checks that every rank runs the same command with the same
/// options (given_options) and resolved the same config (under mpirun each process reads its
/// own command line: mpirun's 'A : B' form, or a wrapper script, can give ranks different
/// ones), and calls fn on every rank.
inline int run_on_ranks(
    const char* app_name, config::App kind, const CommonArgs& c, const std::string& command,
    const std::vector<config::Override>& extra_sets,
    const std::function<void(const config::AppConfig&, comm::Communicator&)>& fn) {
  std::vector<config::Override> sets(c.sets.begin(), c.sets.end());
  if (!c.device.empty()) sets.push_back({"train.device=" + c.device, "--device " + c.device});
  if (!c.deepspeed.empty())
    sets.push_back(
        {"deepspeed_config=" + config::yaml_quoted(c.deepspeed), "--deepspeed " + c.deepspeed});
  sets.insert(sets.end(), extra_sets.begin(), extra_sets.end());
  const config::AppConfig cfg = load_config_on_ranks(c.config, sets, kind);
  // A config piped in (/dev/stdin, a shell's <(...)) leads to no path: named as given.
  std::error_code ec;
  std::string resolved = std::filesystem::weakly_canonical(c.config, ec).string();
  if (ec) resolved = c.config;
  comm::LaunchOptions launch;
  launch.ranks = std::max(c.ranks, 1);
  launch.ranks_given = c.ranks > 0;
  launch.memory_limit = cfg.memory_limit;
  if (c.trains && cfg.train.device == "cuda") launch.device = Device::cuda(0);
  comm::launch(launch, [&](comm::Communicator& comm) {
    if (comm.rank() == 0) {
      std::printf("%s %s: config %s | world size %d (%s)\n", app_name, command.c_str(),
                  resolved.c_str(), comm.size(), comm.backend());
      std::fflush(stdout);
    }
    const std::string full = std::string(app_name) + " " + command;
    check_same_command(full, comm);
    if (c.command) check_same_options(given_options(*c.command), comm, full.c_str());
    check_same_config(cfg, comm, full.c_str());
    warn_config(cfg.warnings, comm);
    fn(cfg, comm);
  });
  return 0;
}

/// One app's command line: its name, config kind and example config, so each
/// subcommand adds the shared arguments and runs on the ranks with one call.
struct AppCommands {
  const char* name;
  config::App kind;
  std::string example;  // shown in --config's help

  /// add_common_args with this app's example config.
  void add(CLI::App* sub, CommonArgs& c) const { add_common_args(sub, c, example); }
  /// The `plan` subcommand of a training app (apps/common/plan.h): the shared and
  /// device arguments into `c`, --steps into `steps`.
  CLI::App* add_plan(CLI::App& app, CommonArgs& c, int& steps) const {
    CLI::App* plan = app.add_subcommand(
        "plan", "predicted and measured training memory per rank for the config (writes nothing)");
    add(plan, c);
    add_device_arg(plan, c);
    plan->add_option("--steps", steps, "measured steps after the traced one")
        ->check(zt::app::whole_number(1, std::numeric_limits<int>::max()));
    return plan;
  }
  /// What main() returns for an error that escaped a command: "<app>: error: ..." on
  /// stderr (after whatever stdout holds), exit status 1. A message that names the app
  /// first already ("vqgpt: no tokenizer ...": the library's errors say whose they are)
  /// is not prefixed with the name a second time, and one that names the app's command
  /// ("vqtok eval: the ranks were started ...") is printed as "vqtok eval: error: ...".
  /// An error every rank of an mpirun job raised together (comm::AgreedError) is printed
  /// by rank 0 alone.
  int fail(const std::exception& e) const {
    std::fflush(stdout);
    const auto* agreed = dynamic_cast<const comm::AgreedError*>(&e);
    if (!agreed || agreed->rank() == 0 || !comm::under_mpirun()) {
      std::string_view what = e.what();
      std::string_view who = name;
      const std::string own = std::string(name) + ": ", command = std::string(name) + " ";
      const size_t colon = what.find(": ");
      if (what.starts_with(own)) {
        what.remove_prefix(own.size());
      } else if (what.starts_with(command) && colon != std::string_view::npos &&
                 what.substr(command.size(), colon - command.size()).find(' ') ==
                     std::string_view::npos) {
        who = what.substr(0, colon);
        what.remove_prefix(colon + 2);
      }
      std::fprintf(stderr, "%.*s: error: %.*s\n", static_cast<int>(who.size()), who.data(),
                   static_cast<int>(what.size()), what.data());
    }
    return 1;
  }
  /// For a subcommand that runs on the CPU whatever train.device says (export, and vqtok's
  /// inference): a config that trains on a GPU gets a line saying so, not silence.
  void note_cpu(const config::AppConfig& cfg, const comm::Communicator& comm,
                const char* what) const {
    if (cfg.train.device != "cpu" && comm.rank() == 0)
      std::fprintf(stderr, "%s %s: runs on the CPU (train.device: %s applies to %s train)\n", name,
                   what, cfg.train.device.c_str(), name);
  }
  /// run_on_ranks for this app.
  int run(const CommonArgs& c, const std::string& command,
          const std::vector<config::Override>& extra_sets,
          const std::function<void(const config::AppConfig&, comm::Communicator&)>& fn) const {
    return run_on_ranks(name, kind, c, command, extra_sets, fn);
  }
  /// The train command: --steps S (> 0) as train.steps; `train` returns the signal that
  /// stopped the run (0 when none), and the exit status is then 128 + it, as a shell
  /// reports a process the signal ended.
  int run_train(
      const CommonArgs& c, int64_t steps,
      const std::function<int(const config::AppConfig&, comm::Communicator&)>& train) const {
    std::vector<config::Override> extra;
    if (steps > 0)
      extra.push_back({"train.steps=" + std::to_string(steps), "--steps " + std::to_string(steps)});
    std::atomic<int> stopped_by{0};  // every rank agrees on it
    const int rc =
        run(c, "train", extra, [&](const config::AppConfig& cfg, comm::Communicator& comm) {
          stopped_by = train(cfg, comm);
        });
    return stopped_by ? 128 + stopped_by : rc;
  }
};

// ---- subcommands: defaults in help, "did you mean" for a misspelled command

/// Makes every option added from now on to `app` (and to subcommands added later) show
/// its default value in --help. Call before adding subcommands and options.
inline void show_defaults(CLI::App& app) {
  app.option_defaults()->always_capture_default();
}

/// Run after every option is added: clears the shown default of options whose help
/// already says what the default is ("(default: train.batch)") and of empty lists.
inline void tidy_defaults(CLI::App& app) {
  for (CLI::Option* o : app.get_options([](CLI::Option*) { return true; }))
    if (o->get_default_str() == "[]" || o->get_description().find("(default:") != std::string::npos)
      o->default_str("");
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) tidy_defaults(*sub);
}

using config::close_name;

/// "<app>: unknown command '<given>'; did you mean '<nearest>'?" (the suggestion only
/// when a command is close_name()).
inline std::string unknown_command(const std::string& app, const std::string& given,
                                   const std::vector<std::string>& commands) {
  std::string msg = app + ": unknown command '" + given + "'";
  if (const std::string best = close_name(given, commands); !best.empty())
    msg += "; did you mean '" + best + "'?";
  return msg;
}

/// For the first argument of `args` that looks like a long option (--name or --name=value)
/// and is none of `app`'s: "unknown option '--name'; did you mean '--nearest'?" when an
/// option is close_name(), else "".
inline std::string unknown_option(const CLI::App& app, const std::vector<std::string>& args) {
  std::vector<std::string> names;
  for (const CLI::Option* o : app.get_options())
    for (const std::string& l : o->get_lnames()) names.push_back("--" + l);
  for (const std::string& a : args) {
    if (a.size() <= 2 || a.rfind("--", 0) != 0) continue;
    const std::string given = a.substr(0, a.find('='));
    if (std::find(names.begin(), names.end(), given) != names.end()) continue;
    const std::string best = close_name(given, names);
    return best.empty() ? "" : "unknown option '" + given + "'; did you mean '" + best + "'?";
  }
  return "";
}

/// The exit status of a mistake on the command line, as POSIX tools and argparse use it; an
/// error while running (a config, data or checkpoint problem) exits with 1.
inline constexpr int kUsageError = 2;

/// Prints CLI11's `e` as CLI11 does and returns the exit status: 0 for --help, kUsageError
/// for every mistake (in place of CLI11's own codes, 105 to 114).
inline int exit_status(CLI::App& app, const CLI::ParseError& e) {
  return app.exit(e) == 0 ? 0 : kUsageError;
}

/// Parses the command line; returns -1 to go on, or the exit status (exit_status above). A
/// misspelled option of the subcommand gets unknown_option's suggestion after CLI11's error.
inline int parse_command_line(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = exit_status(app, e);
    if (rc == kUsageError && argc >= 2)
      for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
        if (sub->get_name() == argv[1])
          if (const std::string hint = unknown_option(*sub, {argv + 2, argv + argc}); !hint.empty())
            std::fprintf(stderr, "%s %s: %s\n", app.get_name().c_str(), argv[1], hint.c_str());
    return rc;
  }
  return -1;
}

/// Before CLI11 parses (and after tidy_defaults): when the first argument is not an option and
/// names no subcommand of `app`, prints unknown_command() and the usage on stderr and returns
/// kUsageError (CLI11 alone would only say that a subcommand is required). Returns -1 to go on
/// parsing.
inline int check_subcommand(CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return -1;
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    if (sub->get_name() == argv[1]) return -1;
    names.push_back(sub->get_name());
  }
  std::fprintf(stderr, "%s\n\n%s", unknown_command(app.get_name(), argv[1], names).c_str(),
               app.help().c_str());
  return kUsageError;
}

}  // namespace zt::app
