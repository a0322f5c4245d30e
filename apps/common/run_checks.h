// Checks a training run makes before and while it trains, so that a mistake stops it with
// a message instead of costing results: where the run starts (a resume never replaces
// checkpoints with a fresh run; a new run never silently overwrites an earlier one),
// that every rank was given the same configuration and built the same model, and which
// tensor holds non-finite values when a loss or metric is not finite.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "configs/app_config.h"
#include "data/dataset.h"
#include "nn/module.h"
#include "zero/checkpoint.h"
#include "zero/comm/communicator.h"
#include "zero/engine.h"

namespace zt::app {

/// How a training run was asked to start.
struct StartRequest {
  const char* app = "train";  ///< "vqtok train": names the command in messages
  bool resume = false;        ///< --resume
  bool overwrite = false;     ///< --overwrite: a new run may replace earlier results
  bool say = false;           ///< print what was decided on stdout (rank 0)
  /// (what names it, path) of files the run reads, e.g. {"gpt.tokenizer_checkpoint", dir}:
  /// --overwrite refuses to set aside a folder holding one.
  std::vector<std::pair<std::string, std::string>> inputs = {};
};

/// Where a training run starts, as start_run decided it.
struct RunStart {
  std::string resume_from;  ///< the checkpoint to resume from; "" to start at step 0
  /// Where --overwrite set the earlier run's results aside ("" when it did not); its
  /// checkpoints went to <root>/.overwritten.
  std::string set_aside;
  std::string root;  ///< the run's checkpoint root
  /// Rank 0: output_dir/.lock (zero::RunLock), held while this (or a copy) lives.
  std::shared_ptr<zero::RunLock> lock;
};

/// Decides where a training run starts, after checking the output folder. Every rank calls
/// it; rank 0 inspects the files and every rank returns its answer or throws the same error.
///  - first, rank 0 takes output_dir/.lock (zero::RunLock): a folder another live run is
///    writing is an error naming that run; last, every rank checks that it sees that lock
///    (ranks in other working directories, or on machines without rank 0's disk, do not);
///  - train.resume names a directory: that checkpoint (error when it holds none); a root of
///    step folders is read as --resume reads one (its newest complete checkpoint, with a
///    note; damaged newer ones in this run's own root are set aside). When `root` already
///    holds checkpoints and that one is not its newest, the run would save among another
///    run's checkpoints: an error, unless --overwrite (then as below).
///  - --resume or train.resume 'auto': the newest complete checkpoint under `root`
///    (zero::find_resume_point; a note on stderr says when `latest` named another); step 0
///    when nothing was saved there; an error, changing nothing, when checkpoints are there
///    but none is complete. With --overwrite too: an error.
///  - otherwise a new run: an error naming --resume, another output_dir and --overwrite
///    when `root` already holds checkpoints. With --overwrite, rank 0 moves what `root`
///    holds into `root`/.overwritten (on its own disk, a linked root staying a link) and the
///    output_dir's metrics.jsonl, curves.svg and recon_step_*.png into
///    output_dir/.overwritten; finish_start deletes them once the new run has taken its
///    first step, and if it stops before that, the next start_run puts them back. An
///    --overwrite that would set aside one of request.inputs is an error.
/// Temporaries of interrupted saves whose process is gone are removed in every case.
RunStart start_run(const config::AppConfig& cfg, const std::string& root,
                   const StartRequest& request, comm::Communicator& comm);

/// Called by every rank once the run has taken its first step: rank 0 deletes what
/// --overwrite set aside (start.set_aside), which no failed start can need any more.
void finish_start(const RunStart& start, comm::Communicator& comm);

/// Rank 0 runs `decide`; every rank returns its answer, or throws its error as a
/// comm::AgreedError (every rank calls it).
std::string decided_by_rank0(comm::Communicator& comm, const std::function<std::string()>& decide);

/// Whether two values of a config key are the same: equal text, or numbers equal as
/// numbers (YAML's 1.0e-3 and 0.001 are one learning rate).
bool same_config_value(const std::string& a, const std::string& b);

/// The configuration as sorted "key.path=value" lines (sequences by index), for comparing.
std::string flatten_config(const config::Node& root);

/// Errors on every rank unless every rank runs the same `command` ("vqtok eval"): ranks of
/// one mpirun job started as different apps or subcommands (mpirun's 'A : B' form) would
/// issue different collectives and wait for each other until the communicator's timeout.
/// The first check after launch, before any other collective of the command.
void check_same_command(const std::string& command, comm::Communicator& comm);
/// Errors on every rank unless every rank holds the same configuration (compared as
/// flatten_config text, a DeepSpeed config's keys by their settings as
/// "deepspeed_config.<key>" in place of its path), naming the first key that differs and its
/// value on both ranks.
void check_same_config(const config::AppConfig& cfg, comm::Communicator& comm, const char* app);
/// One command-line option's name and value as a rank was given it: {"--batch", "4"}.
using OptionValue = std::pair<std::string, std::string>;
/// Errors on every rank unless every rank was given the same `options` (each value as
/// text, an empty one shown as "(not given)"; numbers compare as numbers): under mpirun each
/// process reads its own command line, and ranks that differ in an option of how the work is split
/// or what it reads would give a silently mixed result. The error names the first option that
/// differs and its value on rank 0 and on that rank.
void check_same_options(const std::vector<OptionValue>& options, comm::Communicator& comm,
                        const char* app);
/// Prints the config's warnings (config::AppConfig::warnings) on rank 0, each once per
/// process: every command does, at its start, whether or not it builds an engine.
void warn_config(const std::vector<std::string>& warnings, comm::Communicator& comm);

/// Errors on every rank unless every rank reads the same data, as far as describe() and
/// the size tell (a relative data.path under another working directory, say).
void check_same_data(const data::Dataset& dataset, comm::Communicator& comm, const char* app);
/// Errors on every rank unless every rank read the same contents from the file `option`
/// names (`fingerprint`: what it held, such as its dtype, shape and a hash of its values):
/// under mpirun each process reads its own copy, and ranks in other working directories
/// (a relative path) or on machines without a shared filesystem would each work on their own.
void check_same_input(const std::string& option, const std::string& fingerprint,
                      comm::Communicator& comm, const char* app);

/// The header check of an image folder (or a subset of one) listed with
/// data::Headers::left_to_caller, after check_same_data: each rank reads every world-th
/// file, and every rank then fails with the same error naming all that are not images
/// (ranks on one folder of a million files do not each open all of them), after `key`, the
/// setting that named the folder. Other datasets pass.
void check_image_headers(const data::Dataset& dataset, comm::Communicator& comm, const char* key);

/// Errors on every rank unless every rank's model has the same parameter and buffer names
/// and (full, unpartitioned) shapes, naming the first that differs.
void check_same_model(const nn::Module& model, comm::Communicator& comm, const char* app);

/// True when every element of a floating tensor is finite (other dtypes: true).
bool all_finite(const Tensor& t);

/// The first parameter or buffer of a plain (not partitioned) module holding a non-finite
/// value, as "name (module path, dtype shape)", or "" when all are finite.
std::string first_nonfinite(const nn::Module& model);

}  // namespace zt::app
