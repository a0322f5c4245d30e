// What a checkpoint records of the run that saved it (its meta.json: the app and the
// configuration), and the checks that read it: a checkpoint handed to an app is that app's
// own, and a resume builds the model the checkpoint was trained as (other settings that
// changed are said in a note).
#pragma once

#include <string>
#include <vector>

#include "configs/app_config.h"
#include "zero/comm/communicator.h"

namespace zt::app {

/// The run a checkpoint came from, as its meta.json records it.
struct SavedRun {
  std::string dir;          ///< the checkpoint directory (zero::find_checkpoint's answer)
  std::string app;          ///< "vqtok", "vqgpt", or "" when not recorded
  std::string config_yaml;  ///< the configuration it ran with ("" when not recorded)
  /// The DeepSpeed JSON config_yaml's deepspeed_config named, as it was then ("" when none
  /// or not recorded): saved_config() reads this, not the file as it is now.
  std::string deepspeed_json;
  std::string note;        ///< why `dir` is not the one a root's `latest` names ("" when it is)
  int64_t world_size = 0;  ///< the ranks it was saved on (0 when not recorded)
};

/// dir/checkpoints where `dir` is a run's output_dir (it holds no checkpoint, and its
/// checkpoints folder does); else "".
std::string run_checkpoints(const std::string& dir);
/// For a path that holds no checkpoint: where `dir` is a run's output_dir
/// (run_checkpoints), " ('DIR/checkpoints' holds this run's checkpoints: pass that
/// folder)" to end the error with; else "".
std::string run_folder_hint(const std::string& dir);

/// Reads the meta.json of the checkpoint `dir_or_root` names (a step folder, or a root
/// holding `latest`); an error naming the file when it is missing or malformed.
SavedRun read_saved_run(const std::string& dir_or_root);

/// The saved configuration parsed for `app`; an error naming meta.json when none is
/// recorded or it does not parse. A recorded DeepSpeed JSON is read as it was saved;
/// deepspeed_config, and every message about it, name it as "<meta.json>: user.deepspeed_json".
config::AppConfig saved_config(const SavedRun& run, config::App app);

/// One key whose value differs between two configurations.
struct KeyChange {
  std::string key;     ///< "model.ch"
  std::string before;  ///< the value in the saved (or the other) configuration
  std::string after;   ///< the value in this one
};

/// "model.ch (32 in <before_name>, 64 in <after_name>), ...".
std::string describe(const std::vector<KeyChange>& changes, const std::string& before_name,
                     const std::string& after_name);

/// The model.* keys whose effective values (defaults filled in) differ from `before` to
/// `after`: every key, or with `weights_only` those that trained weights depend on (not
/// model.dropout, which a frozen model does not apply, nor model.out_init_scale, which only
/// sets the initial values).
std::vector<KeyChange> model_changes(const config::ModelConfig& before,
                                     const config::ModelConfig& after, bool weights_only = false);

/// Errors on every rank when the checkpoint `dir_or_root` names records another app than
/// `app` ("vqtok", "vqgpt"): "'DIR' is a vqgpt checkpoint; vqtok needs one of its own",
/// saying where its own come from. A checkpoint that records no app passes. With `cfg`,
/// the model it describes must be the one the checkpoint recorded (model.* keys that the
/// weights depend on; for vqgpt also gpt.* but dropout, and the clip size
/// data.frames/height/width that fixes the token layout): an error naming the keys that differ,
/// before any tensor is read; and so must its train.dtype (the parameters are stored in it):
/// an error saying which to set, followed by `dtype_advice`, what else the command at hand
/// offers (vqtok's readers: ", or pass --weights an exported file"; "" for none). Rank 0
/// reads, and prints SavedRun::note on stderr when a root's `latest` was passed over.
void check_checkpoint_app(const std::string& dir_or_root, const std::string& app,
                          comm::Communicator& comm, const config::AppConfig* cfg = nullptr,
                          const std::string& dtype_advice = "");
/// check_checkpoint_app's dtype_advice for an export, which writes fp32 from any precision.
inline constexpr char kExportIsFp32[] =
    " (the export is fp32 whatever precision the checkpoint is read in)";

/// Before training resumes from the checkpoint `dir` (every rank calls it; rank 0 reads):
/// a checkpoint of another app than `app` is the error check_checkpoint_app raises; else
/// compares the configuration the checkpoint recorded with `cfg`. Model keys
/// whose effective values differ (model.*, and for vqgpt the gpt.* keys but
/// gpt.tokenizer_checkpoint, the clip size data.frames/height/width that fixes the token
/// layout, and of model.* only those that shape the frozen tokenizer's weights) are an
/// error on every rank naming them, both values and how to go on; train.*, loss.* and
/// data.* keys written with other values are listed in a note on stderr (rank 0, unless
/// `quiet`), but for those that only say where and how the run is carried out
/// (resume_ignored_keys()). Another train.dtype or optimizer state is an error too, saying
/// to set them back or to train anew (neither app starts a run from a checkpoint's
/// weights). `command` ("vqtok train") starts the messages.
void check_resume_config(const config::AppConfig& cfg, const std::string& dir,
                         const std::string& app, const std::string& command,
                         comm::Communicator& comm, bool quiet);

/// The train.* and data.* keys (and their elements) a resume does not compare: where the
/// run reads and writes, its device and kernels, and how often it logs, evaluates and saves.
const std::vector<std::string>& resume_ignored_keys();

}  // namespace zt::app
