// ImageFolder: every image file under a directory (recursively, following linked
// folders, sorted by path; hidden files and folders, named ".*", left out) as a dataset of
// still clips: each image decoded, brought to a fixed height x width (cropped to its middle
// or stretched, ImageFolderOptions::fit) or, without one, to Emu3's size (H and W
// multiples of 8, aspect kept), scaled to [-1, 1] and repeated to `frames` frames.
// Images in subdirectories get the subdirectory's class id (sorted names; files at
// the top level form a class "." of their own). EXIF orientation is not applied.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/image.h"

namespace zt::data {

/// How images become clips.
struct ImageFolderOptions {
  int64_t frames = 4;    ///< T: copies of the image
  int64_t height = 0;    ///< fixed output size when both are > 0 (needed to batch
  int64_t width = 0;     ///< images of different sizes)
  int64_t multiple = 8;  ///< otherwise: emu3_target_size(h, w, multiple, min_area, max_area)
  int64_t min_area = 0;
  int64_t max_area = 0;
  Filter filter = Filter::bicubic;
  Fit fit = Fit::crop;  ///< at a fixed size: crop to the middle or stretch
  /// A file that does not decode: an error, or skipped (the next index that decodes,
  /// wrapping, stands in for it; each such file is named once per process on stderr).
  OnBadImage on_bad_image = OnBadImage::error;
  /// Whether the constructor reads every file's header. false leaves it to the caller
  /// (unreadable(), report_unreadable()): ranks that list one folder split the reading.
  bool check_headers = true;
};

class ImageFolder : public Dataset {
 public:
  /// Lists the images under `dir` and, unless options.check_headers is false, reads their
  /// headers (report_unreadable); error naming the directory if it is missing or holds no
  /// image (and what it holds instead). Files of other extensions are counted
  /// (describe()), not read.
  ImageFolder(const std::string& dir, ImageFolderOptions options = {});
  int64_t size() const override { return static_cast<int64_t>(files_.size()); }
  /// The image as a (frames, 3, H, W) clip; label = class id. A file that does not decode
  /// is an error naming it, or with OnBadImage::skip the sample of the next index that
  /// decodes (Sample::index says which); an error when none does.
  Sample get(int64_t index) const override;
  /// "ImageFolder('dir', 10 images)", with "; skipped 3 files: .webp 2, .txt 1" when the
  /// folder holds files of other extensions.
  std::string describe() const override;
  /// A digest of the files' paths under the folder and their sizes: copies of one folder
  /// agree wherever they are; folders of other files (the same count, or a relative
  /// data.path from other working directories) do not.
  std::string identity() const override;

  const std::vector<std::string>& files() const { return files_; }
  const std::vector<std::string>& classes() const { return classes_; }
  /// The (H, W) an image of size h x w becomes.
  std::pair<int64_t, int64_t> target_size(int64_t h, int64_t w) const;
  /// The header check of files part, part + parts, part + 2 x parts, ... (0 <= part <
  /// parts): for each that is not an image, its index -> a message naming it.
  std::map<int64_t, std::string> unreadable(int64_t part = 0, int64_t parts = 1) const;
  /// An error listing `bad` (unreadable() of every part, merged), the first ten by name;
  /// with OnBadImage::skip the same list on stderr, once per process, as the files are
  /// skipped when read. Nothing when `bad` is empty.
  void report_unreadable(const std::map<int64_t, std::string>& bad) const;

 private:
  /// Decodes the file at `index` into img, or with OnBadImage::skip the first of the
  /// following ones (wrapping) that decodes; returns the index read.
  int64_t decodable(int64_t index, Image& img) const;
  /// "3 files: .webp 2, .txt 1" (most first).
  std::string skipped_files() const;

  std::string dir_;
  ImageFolderOptions options_;
  std::vector<std::string> files_;
  std::vector<int64_t> labels_;
  std::vector<std::string> classes_;
  /// Files of other extensions, and special files named like images, by extension.
  std::map<std::string, int64_t> skipped_;
};

/// A file's extension in lower case: ".webp" for "a/b.WebP"; "(no extension)" for "a/README".
std::string extension_of(const std::string& path);
/// True for the file extensions ImageFolder reads (.png .jpg .jpeg .bmp .tga, any case).
bool is_image_file(const std::string& path);

}  // namespace zt::data
