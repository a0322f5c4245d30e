// ImageFolder: directory walk, class ids, and per-item decode + resize + normalize.
#include "data/image_folder.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>

#include "core/ascii.h"
#include "core/error.h"
#include "core/ops/factory.h"
#include "core/plural.h"
#include "data/tensorboard.h"

namespace fs = std::filesystem;

namespace zt::data {

std::string extension_of(const std::string& path) {
  const std::string ext = ascii_lower(fs::path(path).extension().string());
  return ext.empty() ? "(no extension)" : ext;
}

namespace {

// Whether `path`, as the walk from `root` names it, is reached through a link: the path
// itself or a folder between it and `root` is a symbolic link.
bool through_link(const fs::path& path, const fs::path& root) {
  fs::path at = root;
  std::error_code ec;
  for (const fs::path& part : path.lexically_relative(root)) {
    at /= part;
    if (fs::is_symlink(at, ec)) return true;
  }
  return false;
}

// The error for a folder the walk reaches twice, `seen` first and then `again`, both
// `real`. Which one comes first depends on the directory's order, so the link to remove is
// the one that goes through a link, whichever that is.
[[noreturn]] void refuse_second_visit(const fs::path& seen, const fs::path& again,
                                      const fs::path& real, const fs::path& root) {
  const bool seen_linked = through_link(seen, root), again_linked = through_link(again, root);
  if (seen_linked && again_linked)
    ZT_FAIL("ImageFolder: '", seen.string(), "' and '", again.string(), "' are both links to '",
            real.string(), "': its images would be read twice; remove one of the two links");
  const fs::path& link = seen_linked ? seen : again;
  const fs::path& folder = seen_linked ? again : seen;
  const bool loop =
      !link.lexically_relative(folder).empty() && *link.lexically_relative(folder).begin() != "..";
  ZT_FAIL("ImageFolder: '", link.string(), "' is a link to '", folder.string(),
          "', a folder listed already", loop ? " above it (a loop)" : "",
          ": its images would be read twice; remove the link '", link.string(), "'");
}

}  // namespace

bool is_image_file(const std::string& path) {
  const std::string ext = extension_of(path);
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg" || ext == ".bmp" || ext == ".tga";
}

ImageFolder::ImageFolder(const std::string& dir, ImageFolderOptions options)
    : dir_(dir), options_(options) {
  ZT_CHECK(options_.frames >= 1, "ImageFolder: frames must be >= 1, got ", options_.frames);
  ZT_CHECK(options_.multiple >= 1, "ImageFolder: multiple must be >= 1");
  ZT_CHECK((options_.height > 0) == (options_.width > 0),
           "ImageFolder: set both height and width (fixed size) or neither, got ", options_.height,
           "x", options_.width);
  std::error_code ec;
  ZT_CHECK(fs::is_directory(dir, ec), "ImageFolder: '", dir,
           "' is not a directory (data.path must name a folder of PNG/JPEG images)");
  // Linked folders are followed, each folder once: a link back up (a loop, which the
  // listing would follow 40 levels deep) or a second link to one folder would list its
  // images again. Hidden entries (".*", such as macOS's "._x.png" metadata files) are left
  // out.
  std::map<fs::path, fs::path> listed = {{fs::canonical(dir, ec), dir}};  // real -> as walked
  fs::path entering;  // the folder the next increment opens, if any: named if it fails
  for (auto it = fs::recursive_directory_iterator(
           dir, fs::directory_options::follow_directory_symlink, ec);
       !ec && it != fs::end(it); it.increment(ec)) {
    std::error_code entry;  // the non-throwing queries: a broken link is named below
    entering.clear();
    if (it->path().filename().string().rfind('.', 0) == 0) {
      if (it->is_directory(entry)) it.disable_recursion_pending();
      continue;
    }
    if (it->is_directory(entry)) {
      entering = it->path();
      const fs::path real = fs::canonical(it->path(), entry);
      const auto [first, fresh] = listed.emplace(real, it->path());
      if (!fresh) refuse_second_visit(first->second, it->path(), real, dir);
      continue;
    }
    if (!is_image_file(it->path().string())) {
      // Counted, not named: a folder of .webp files should say why it trains on nothing.
      if (it->is_regular_file(entry)) ++skipped_[extension_of(it->path().string())];
      continue;
    }
    if (it->is_symlink(entry)) {
      // A link whose target is gone, or that cannot be followed (a loop of links: ELOOP).
      std::error_code target;
      const bool there = fs::exists(it->path(), target);
      ZT_CHECK(there, "ImageFolder: '", it->path().string(), "' is a link ",
               target ? "that cannot be followed (" + target.message() + ": a loop of links?)"
                      : std::string("to a file that does not exist"),
               "; remove it or restore its target");
    }
    if (it->is_regular_file(entry))
      files_.push_back(it->path().string());
    else  // a named pipe, socket or device called x.png: not read, but said
      ++skipped_[extension_of(it->path().string()) + " (not a regular file)"];
  }
  ZT_CHECK(!ec, "ImageFolder: cannot list '", entering.empty() ? dir : entering.string(), "'",
           entering.empty() ? "" : " (under data.path '" + dir + "')", ": ", ec.message(),
           entering.empty() ? "" : "; make it readable, or move it out of the data folder");
  std::sort(files_.begin(), files_.end());
  ZT_CHECK(!files_.empty(), "ImageFolder: no images (.png, .jpg, .jpeg, .bmp, .tga) under '", dir,
           "'",
           skipped_.empty() ? std::string()
                            : "; it holds " + skipped_files() +
                                  ", which zt does not read: convert them to PNG or JPEG");

  std::map<std::string, int64_t> class_ids;
  std::vector<std::string> class_of;
  for (const auto& f : files_) {
    const fs::path rel = fs::path(f).lexically_relative(dir);
    const std::string cls = std::distance(rel.begin(), rel.end()) > 1 ? rel.begin()->string() : ".";
    class_of.push_back(cls);
    class_ids[cls] = 0;
  }
  for (auto& [name, id] : class_ids) {
    id = static_cast<int64_t>(classes_.size());
    classes_.push_back(name);
  }
  for (const auto& c : class_of) labels_.push_back(class_ids[c]);
  if (options_.check_headers) report_unreadable(unreadable());
}

// Header check: files that are not images fail before training, by name, not mid-run;
// all of them in one error (a scraped set's empty downloads and saved web pages come in
// numbers), the first ten by name.
std::map<int64_t, std::string> ImageFolder::unreadable(int64_t part, int64_t parts) const {
  ZT_CHECK(parts >= 1 && part >= 0 && part < parts, "ImageFolder::unreadable: part ", part, " of ",
           parts);
  std::map<int64_t, std::string> bad;
  for (int64_t i = part; i < size(); i += parts) {
    try {
      image_size(files_[static_cast<size_t>(i)]);
    } catch (const Error& e) {
      bad.emplace(i, e.what());
    }
  }
  return bad;
}

void ImageFolder::report_unreadable(const std::map<int64_t, std::string>& bad) const {
  if (bad.empty()) return;
  std::string names;
  for (auto it = bad.begin(); it != bad.end() && std::distance(bad.begin(), it) < 10; ++it)
    names += "\n  " + it->second;
  if (bad.size() > 10) names += detail::cat("\n  and ", bad.size() - 10, " more");
  const std::string what = detail::cat(bad.size(), " of the ", files_.size(),
                                       " image files under '", dir_, "' cannot be read:", names);
  ZT_CHECK(options_.on_bad_image == OnBadImage::skip, "ImageFolder: ", what,
           "\nremove or replace them, or set data.on_bad_image: skip to read the next image in "
           "each one's place");
  ZT_CHECK(bad.size() < files_.size(), "ImageFolder: ", what,
           "\nnone is left to read in their place (data.on_bad_image: skip)");
  static std::mutex mutex;
  static std::set<std::string> reported;  // per process: every rank says it once
  const std::lock_guard<std::mutex> lock(mutex);
  if (reported.insert(dir_).second)
    std::fprintf(stderr,
                 "data: %s\nskipped (data.on_bad_image: skip): the next image that "
                 "decodes is read in each one's place\n",
                 what.c_str());
}

std::pair<int64_t, int64_t> ImageFolder::target_size(int64_t h, int64_t w) const {
  if (options_.height > 0) return {options_.height, options_.width};
  return emu3_target_size(h, w, options_.multiple, options_.min_area, options_.max_area);
}

Sample ImageFolder::get(int64_t index) const {
  ZT_CHECK(index >= 0 && index < size(), "ImageFolder: index ", index, " out of range [0, ", size(),
           ")");
  Image img;
  const int64_t at = decodable(index, img);
  const auto [h, w] = target_size(img.height, img.width);
  img = options_.height > 0 ? fit_image(img, h, w, options_.filter, options_.fit)
                            : resize_image(img, h, w, options_.filter);
  const Tensor frame = image_to_tensor(img);
  Tensor clip = empty({options_.frames, 3, h, w}, DType::f32);
  const int64_t n = frame.numel();
  for (int64_t t = 0; t < options_.frames; ++t)
    std::memcpy(clip.data<float>() + t * n, frame.data<float>(), static_cast<size_t>(n) * 4);
  return Sample{clip, labels_[static_cast<size_t>(at)], at};
}

int64_t ImageFolder::decodable(int64_t index, Image& img) const {
  std::string why;
  for (int64_t k = 0; k < size(); ++k) {
    // The stand-in depends on the index alone, so every run, rank and resume reads the same
    // samples in the same order.
    const int64_t at = (index + k) % size();
    const std::string& path = files_[static_cast<size_t>(at)];
    if (try_load_image(path, img, why)) return at;
    ZT_CHECK(options_.on_bad_image == OnBadImage::skip, "cannot read image '", path, "': ", why,
             "; remove or replace the file, or set data.on_bad_image: skip to read the next "
             "image in its place");
    static std::mutex mutex;
    static std::set<std::string> reported;  // per process: every rank and epoch says it once
    const std::lock_guard<std::mutex> lock(mutex);
    if (reported.insert(path).second)
      std::fprintf(stderr, "data: skipping unreadable image '%s': %s\n", path.c_str(), why.c_str());
  }
  ZT_FAIL("ImageFolder: no image under '", dir_, "' decodes (", size(),
          " files, data.on_bad_image: skip); the last one tried, '",
          files_[static_cast<size_t>((index + size() - 1) % size())], "': ", why);
}

std::string ImageFolder::describe() const {
  return "ImageFolder('" + dir_ + "', " + counted(files_.size(), "image") +
         (skipped_.empty() ? "" : "; skipped " + skipped_files()) + ")";
}

std::string ImageFolder::identity() const {
  uint32_t crc = 0;
  for (const std::string& f : files_) {
    std::error_code ec;
    const std::string entry = fs::path(f).lexically_relative(dir_).generic_string() + '\0' +
                              std::to_string(fs::file_size(f, ec)) + '\0';
    crc = crc32c(entry.data(), entry.size(), crc);
  }
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", crc);
  return std::string("files and sizes crc32c ") + hex;
}

std::string ImageFolder::skipped_files() const {
  std::vector<std::pair<int64_t, std::string>> by_count;
  int64_t total = 0;
  for (const auto& [ext, n] : skipped_) {
    by_count.emplace_back(-n, ext);
    total += n;
  }
  std::sort(by_count.begin(), by_count.end());  // most first, then by name
  std::string s = counted(total, "file") + ":";
  for (size_t i = 0; i < by_count.size(); ++i)
    s += (i ? ", " : " ") + by_count[i].second + " " + std::to_string(-by_count[i].first);
  return s;
}

}  // namespace zt::data
