// What an app may write: checks, made before any work, that an output path named on the
// command line or in the config does not overwrite what the run reads or what was saved.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "configs/app_config.h"
#include "zero/comm/communicator.h"

namespace zt::app {

/// The files every command of `cfg` reads: the config file and its DeepSpeed JSON.
std::vector<std::string> config_inputs(const config::AppConfig& cfg);

/// Checks that the file `path`, given as `option` (e.g. "encode -o"), may be written: it is
/// not a folder; not one of `inputs` (what the command reads: files or folders; empty
/// entries are skipped); not inside saved checkpoints (a checkpoint folder, holding
/// meta.json and rank files, or a checkpoints root, holding `latest`); and not a run's own
/// metrics.jsonl, curves.svg or .lock. Each error names the option, the path and why.
void check_output_file(const std::string& option, const std::string& path,
                       const std::vector<std::string>& inputs);

/// check_output_file, then that the file can be created where it is to go (its folder is
/// created, and a probe file written and removed there): for a file written only at the
/// end of work (a timeline, eval's JSON), which should not fail after it.
void check_output_writable(const std::string& option, const std::string& path,
                           const std::vector<std::string>& inputs);

/// Checks that the folder `path`, given as `option`, may be filled: it is not a file and
/// is not, nor lies inside, saved checkpoints (as above).
void check_output_folder(const std::string& option, const std::string& path);

/// Runs `check` (the checks above) on rank 0 and throws its error on every rank.
void check_on_rank0(comm::Communicator& comm, const std::function<void()>& check);

}  // namespace zt::app
