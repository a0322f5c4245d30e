// Builds the dataset and loader an app's DataConfig describes, so apps need not know
// the dataset classes.
#pragma once

#include <memory>

#include "data/data_config.h"
#include "data/dataset.h"
#include "data/loader.h"

namespace zt::data {

/// The training dataset (eval = false) or the held-out one (eval = true): synthetic
/// eval clips use another seed; image_folder/npy eval clips are the first
/// `eval_samples` items (evenly spaced) of the same files.
std::shared_ptr<const Dataset> make_dataset(const DataConfig& cfg, bool eval = false);

/// A loader over `dataset` for this rank: batch = per-rank batch size, shuffled from
/// data.seed (eval: no shuffle, incomplete batches kept), prefetch and workers from cfg.
std::unique_ptr<DataLoader> make_loader(std::shared_ptr<const Dataset> dataset,
                                        const DataConfig& cfg, int64_t batch, int64_t rank,
                                        int64_t world, bool eval = false);

}  // namespace zt::data
