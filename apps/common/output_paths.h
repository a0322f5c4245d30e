// What an app may write: checks, made before any work, that an output path named on the
// command line or in the config does not overwrite what the run reads or what was saved.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "configs/app_config.h"
#include "zero/comm/communicator.h"

namespace zt::app {

/// What every command of `cfg` may read: the config file, its DeepSpeed JSON, and the
/// dataset's data.path and data.eval_path (files or folders; synthetic data reads none).
std::vector<std::string> config_inputs(const config::AppConfig& cfg);

/// Whether `name` is one a training run writes in its output_dir: metrics.jsonl,
/// curves.svg, .lock or recon_step_* (its TensorBoard files go in tb/ beside them).
bool is_run_file_name(const std::string& name);

/// Whether `path` is `dir` or lies inside it (both made absolute and normal first).
bool within(const std::filesystem::path& path, const std::filesystem::path& dir);

/// Checks that the file `path`, given as `option` (e.g. "encode -o"), may be written: it is
/// not a folder, nor an existing device, FIFO or socket (a write would replace it with a
/// file). A symbolic link is followed: the file it leads to (write_target, which the
/// writers write) is what the rest judges. It is not one of `inputs` (what the command
/// reads: files or folders; empty entries are skipped); not inside saved checkpoints (a
/// checkpoint folder, holding meta.json and rank files, or a checkpoints root, holding
/// `latest`); not inside a folder of `inputs` (a folder of images); and not a run's own
/// metrics.jsonl, curves.svg, .lock, recon_step_*.png or TensorBoard folder (tb/ beside
/// metrics.jsonl). Each error names the option, the path and why (and the input it would
/// damage).
void check_output_file(const std::string& option, const std::string& path,
                       const std::vector<std::string>& inputs);

/// check_output_file, then that the file can be created where it is to go (a probe file
/// written and removed in the nearest of its folders that exists; none is made): for a
/// file written only at the end of work (a timeline, eval's JSON, samples), which should
/// not fail after it. The writer calls make_parent_folders first.
void check_output_writable(const std::string& option, const std::string& path,
                           const std::vector<std::string>& inputs);
/// Makes the folders `path` is to go in (an error naming them where they cannot be made).
void make_parent_folders(const std::string& path);

/// Checks that the folder `path`, given as `option`, may be filled: it is not a file, is
/// not, nor lies inside, saved checkpoints or a folder of `inputs` (as above), and it (or
/// the nearest of its parents that exists) takes a probe file.
void check_output_folder(const std::string& option, const std::string& path,
                         const std::vector<std::string>& inputs);

/// Runs `check` (the checks above) on rank 0 and throws its error on every rank.
void check_on_rank0(comm::Communicator& comm, const std::function<void()>& check);

}  // namespace zt::app
