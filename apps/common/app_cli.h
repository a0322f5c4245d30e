// The command-line pieces every app shares: --config / --ranks / --set on each
// subcommand, and running a subcommand on every rank with the loaded config (thread
// ranks with --ranks N, or one process per rank under mpirun). Header-only: it needs
// CLI11, which only the executables link.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "configs/app_config.h"
#include "zero/comm/launch.h"

namespace zt::app {

struct CommonArgs {
  std::string config;
  int ranks = 1;
  std::vector<std::string> sets;
  std::string device;   // --device: shortcut for --set train.device=D
  bool trains = false;  // a training subcommand: it runs on train.device
};

/// Adds --config (required, e.g. `example`), --ranks and repeatable --set to `sub`.
inline void add_common_args(CLI::App* sub, CommonArgs& c, const std::string& example) {
  sub->add_option("-c,--config", c.config, "YAML config (e.g. " + example + ")")
      ->required()
      ->check(CLI::ExistingFile);
  sub->add_option("--ranks", c.ranks, "thread ranks (ignored under mpirun: one rank per process)")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            try {
              size_t used = 0;
              if (std::stoi(v, &used) >= 1 && used == v.size()) return "";
            } catch (const std::exception&) {
            }
            return "must be a whole number of thread ranks, at least 1 (got '" + v + "')";
          },
          "INT>=1"));
  sub->add_option("--set", c.sets, "override a config value: --set train.lr=1e-3 (repeatable)")
      ->allow_extra_args(false);
}

/// Adds --device cpu|cuda to a training subcommand `sub` (shortcut for --set
/// train.device=D); under mpirun, cuda starts NCCL with one GPU per process.
inline void add_device_arg(CLI::App* sub, CommonArgs& c) {
  c.trains = true;
  sub->add_option("--device", c.device, "cpu or cuda (shortcut for --set train.device=D)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
}

/// Loads the config (with c.sets and extra_sets applied) for `kind`, prints what runs on
/// rank 0, and calls fn on every rank.
inline int run_on_ranks(
    const char* app_name, config::App kind, const CommonArgs& c, const std::string& command,
    const std::vector<std::string>& extra_sets,
    const std::function<void(const config::AppConfig&, comm::Communicator&)>& fn) {
  std::vector<std::string> sets = c.sets;
  if (!c.device.empty()) sets.push_back("train.device=" + c.device);
  sets.insert(sets.end(), extra_sets.begin(), extra_sets.end());
  const config::AppConfig cfg = config::load_app_config(c.config, sets, kind);
  const std::string resolved = std::filesystem::weakly_canonical(c.config).string();
  comm::LaunchOptions launch;
  launch.ranks = c.ranks;
  if (c.trains && cfg.train.device == "cuda") launch.device = Device::cuda(0);
  comm::launch(launch, [&](comm::Communicator& comm) {
    if (comm.rank() == 0) {
      std::printf("%s %s: config %s | world size %d (%s)\n", app_name, command.c_str(),
                  resolved.c_str(), comm.size(), comm.backend());
      std::fflush(stdout);
    }
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
  /// run_on_ranks for this app.
  int run(const CommonArgs& c, const std::string& command,
          const std::vector<std::string>& extra_sets,
          const std::function<void(const config::AppConfig&, comm::Communicator&)>& fn) const {
    return run_on_ranks(name, kind, c, command, extra_sets, fn);
  }
};

}  // namespace zt::app
