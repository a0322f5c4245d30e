// What a checkpoint records of the run that saved it (its meta.json: the app and the
// configuration), and the check that reads it: a checkpoint handed to an app is that app's
// own.
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
};

/// Reads the meta.json of the checkpoint `dir_or_root` names (a step folder, or a root
/// holding `latest`); an error naming the file when it is missing or malformed.
SavedRun read_saved_run(const std::string& dir_or_root);

/// The saved configuration parsed for `app`; an error naming meta.json when none is
/// recorded or it does not parse.
config::AppConfig saved_config(const SavedRun& run, config::App app);

/// Errors on every rank when the checkpoint `dir_or_root` names records another app than
/// `app` ("vqtok", "vqgpt"): "'DIR' is a vqgpt checkpoint; vqtok needs one of its own",
/// saying where its own come from. A checkpoint that records no app passes. Rank 0 reads.
void check_checkpoint_app(const std::string& dir_or_root, const std::string& app,
                          comm::Communicator& comm);

}  // namespace zt::app
