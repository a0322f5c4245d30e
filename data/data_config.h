// What the data factory builds: the dataset kind, its files, clip geometry and the
// loader's settings. A plain struct owned by data/; configs/ fills it from the YAML
// `data` section (data/ includes nothing from configs/).
#pragma once

#include <cstdint>
#include <string>

#include "data/image_options.h"

namespace zt::data {

enum class DataKind { synthetic, image_folder, npy };

/// The longest timeout a loader takes, in seconds (about 31 years): past some 292 years a
/// wait cannot be timed (its nanoseconds overflow the clock's count), and 0 waits without
/// limit.
constexpr double kMaxTimeout = 1e9;

/// Where clips come from. Clips are (frames, 3, height, width) in [-1, 1].
struct DataConfig {
  DataKind kind = DataKind::synthetic;
  std::string path{};  ///< image_folder: a directory; npy: a .npy file
  /// image_folder/npy: held-out data of the same kind for eval (a directory or a .npy
  /// file), of which eval reads eval_samples items spread over it; empty: eval reads them
  /// from `path`, the training data.
  std::string eval_path{};
  int64_t frames = 4;   ///< a single image is repeated to this many frames
  int64_t height = 32;  ///< images are resized to height x width
  int64_t width = 32;
  int64_t num_samples = 4096;  ///< synthetic only: dataset size
  int64_t eval_samples = 64;   ///< clips for eval (synthetic: held out, from another seed)
  int64_t seed = 1234;         ///< synthetic content and sampler shuffling
  bool shuffle = true;
  int64_t workers = 1;   ///< threads preparing samples of a batch
  int64_t prefetch = 2;  ///< batches prepared ahead
  /// Seconds a step waits for its batch before the run ends with an error naming the
  /// samples whose reading has not returned; 0: no limit. At most kMaxTimeout; needs
  /// prefetch >= 1.
  double timeout = 0;
  Filter resize = Filter::bicubic;
  /// image_folder: an image of another aspect ratio than height x width is scaled to
  /// cover it and cropped to its middle (crop), or scaled to it (stretch).
  Fit fit = Fit::crop;
  /// image_folder: a file whose header reads but whose data does not decode (corrupt or
  /// truncated) ends the run (error), or the next image stands in for it (skip).
  OnBadImage on_bad_image = OnBadImage::error;
  int64_t num_shapes = 2;  ///< synthetic: moving shapes per clip
};

}  // namespace zt::data
