// Builds the dataset and loader an app's DataConfig describes, so apps need not know
// the dataset classes.
#pragma once

#include <memory>

#include "data/data_config.h"
#include "data/dataset.h"
#include "data/image_folder.h"
#include "data/loader.h"

namespace zt::data {

/// cfg's image settings for an ImageFolder (or a single image): frames, fixed size,
/// resize filter, fit and what a file that does not decode does.
ImageFolderOptions image_options(const DataConfig& cfg);

/// Who reads an image folder's headers (ImageFolderOptions::check_headers): the dataset as
/// it lists its files, or the caller, which splits the reading between the ranks that list
/// one folder (the apps' check_image_headers).
enum class Headers { checked_here, left_to_caller };

/// The training dataset (eval = false) or the eval one (eval = true): `eval_samples`
/// clips, for synthetic data drawn with another seed, for image_folder/npy evenly spaced
/// items of data.eval_path, or of data.path (the training data) when that is empty.
/// `scored` > 0: only that many will be evaluated (train.eval_batches x batch x ranks), so
/// the files are spread over the data in that many, not in eval_samples of which an
/// evaluation would read the first ones only. An eval split of eval_samples 0 is an error
/// saying that it is empty (nothing would be scored).
std::shared_ptr<const Dataset> make_dataset(const DataConfig& cfg, bool eval = false,
                                            int64_t scored = 0,
                                            Headers headers = Headers::checked_here);

/// The eval dataset of a run that holds its training dataset `train` (make_dataset(cfg)):
/// the items of make_dataset(cfg, true, scored), but without data.eval_path they are
/// drawn from `train` itself (data.path is not listed again), and with one it is also
/// refused when a file of it is one `train` lists (by canonical path: a link inside
/// data.path to the eval folder counts). make_dataset(cfg, true) compares the two paths
/// alone.
std::shared_ptr<const Dataset> make_eval_dataset(const DataConfig& cfg,
                                                 const std::shared_ptr<const Dataset>& train,
                                                 int64_t scored = 0,
                                                 Headers headers = Headers::checked_here);

/// `n` items of `ds` evenly spaced over it (item i * size / n), all of it where n >= size:
/// a part that samples the whole, where the first n items would be its first folders.
std::shared_ptr<const Dataset> spread(std::shared_ptr<const Dataset> ds, int64_t n);

/// Whether cfg's eval clips are held out from training (synthetic, or an eval_path).
bool eval_held_out(const DataConfig& cfg);

/// The eval dataset's description for a run's start-up line; says so when its clips are
/// training data.
std::string describe_eval(const DataConfig& cfg, const Dataset& eval);

/// A loader over `dataset` for this rank: batch = per-rank batch size, shuffled from
/// data.seed (eval: no shuffle, incomplete batches kept), prefetch and workers from cfg.
std::unique_ptr<DataLoader> make_loader(std::shared_ptr<const Dataset> dataset,
                                        const DataConfig& cfg, int64_t batch, int64_t rank,
                                        int64_t world, bool eval = false);

}  // namespace zt::data
