// Shared pieces of the app tests: the tiny vqtok configuration they train (a 16x16,
// 4-frame clip model that runs a step in well under a second) and fresh output folders.
#pragma once

#include <string>
#include <vector>

#include "apps/vqgpt/vqgpt_app.h"
#include "apps/vqtok/vqtok_app.h"
#include "configs/app_config.h"

namespace zt::apptest {

/// The tiny vqtok config: 8 steps, checkpoints every 4 (2 kept), eval at step 8, 2 ranks'
/// worth of small batches. `sets` are `--set key=value` overrides applied after it, then
/// output_dir = `out_dir`.
config::AppConfig tiny_vqtok_config(const std::string& out_dir, std::vector<std::string> sets = {});

/// An empty folder under the temp directory, unique to this process: <prefix>_<name>_<pid>.
std::string fresh_dir(const std::string& prefix, const std::string& name);
/// vqtok::train on `ranks` thread ranks, quiet (resuming if `resume`, with --overwrite if
/// `overwrite`); rank 0's result.
vqtok::TrainResult train_vqtok(const config::AppConfig& cfg, bool resume = false, int ranks = 2,
                               bool overwrite = false);

/// Saves a freshly initialized tokenizer of cfg.model (seed 5) to `weights`.
void save_fresh_tokenizer(const config::AppConfig& cfg, const std::string& weights);
/// vqtok::encode on one thread rank (errors propagate as from the call itself).
void encode_on_one_rank(const config::AppConfig& cfg, const vqtok::EncodeOptions& o);

/// Saves a freshly initialized tokenizer of cfg.model (seed 5) to `weights`, trains vqgpt
/// on it quietly on `ranks` thread ranks and returns each rank's result.
std::vector<vqgpt::TrainResult> train_vqgpt_with_fresh_tokenizer(const config::AppConfig& cfg,
                                                                 const std::string& weights,
                                                                 int ranks = 2);

/// Expects `steps` logged losses from both runs, each of the CUDA-graph run's within 1e-5
/// relative of the eager run's (cuBLAS and cuDNN may add in another order on another
/// stream; a replay that kept stale constants would be far off).
void expect_losses_follow(const std::vector<double>& eager, const std::vector<double>& graphed,
                          size_t steps);

}  // namespace zt::apptest
