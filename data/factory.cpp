// DataConfig -> Dataset / DataLoader.
#include "data/factory.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/plural.h"
#include "data/image_folder.h"
#include "data/npy.h"
#include "data/synthetic_video.h"

namespace zt::data {

namespace fs = std::filesystem;

namespace {

// The image_folder or npy dataset at `path`, the value of `key` (data.path or
// data.eval_path), which its errors name first: the file's own error may not say which
// setting gave the path.
std::shared_ptr<const Dataset> open_files(const DataConfig& cfg, const char* key,
                                          const std::string& path, Headers headers) {
  try {
    if (cfg.kind == DataKind::image_folder) {
      ImageFolderOptions o = image_options(cfg);
      o.check_headers = headers == Headers::checked_here;
      return std::make_shared<ImageFolder>(path, o);
    }
    auto npy = std::make_shared<NpyArray>(path, cfg.frames);
    const Shape& s = npy->header().shape;
    ZT_CHECK(s[s.size() - 2] == cfg.height && s[s.size() - 1] == cfg.width, "'", path, "' holds ",
             s[s.size() - 2], "x", s[s.size() - 1],
             " clips but the config says data.height x data.width = ", cfg.height, "x", cfg.width);
    return npy;
  } catch (const Error& e) {
    throw Error(std::string(key) + ": " + e.what());
  }
}

// Error naming a file that both the training set and the held-out one list, by canonical
// path: the path check sees two folders side by side, but a link inside data.path to the
// eval folder (or to files of it) trains on eval items. npy data is one file each, which
// that check compares by its canonical path already.
void check_no_shared_file(const DataConfig& cfg, const Dataset& train, const Dataset& held) {
  const auto* t = dynamic_cast<const ImageFolder*>(&train);
  const auto* h = dynamic_cast<const ImageFolder*>(&held);
  if (t == nullptr || h == nullptr) return;
  // A file by its device and inode (links followed: a symbolic link or a hard link to one
  // file is that file); one stat() cannot read stands for its path.
  std::map<std::string, std::string> held_files;  // identity -> the path eval lists
  auto real = [](const std::string& f) {
    struct stat st {};
    if (::stat(f.c_str(), &st) == 0)
      return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
    return "path:" + f;
  };
  for (const std::string& f : h->files()) held_files.emplace(real(f), f);
  for (const std::string& f : t->files()) {
    const auto shared = held_files.find(real(f));
    ZT_CHECK(shared == held_files.end(), "data.eval_path '", cfg.eval_path,
             "' holds files that data.path '", cfg.path, "' lists too, such as '", shared->second,
             "', which training reads as '", f,
             "' (through a link, or a hard link of one file): items of it are trained on, so "
             "eval would not be held out. Remove the link from data.path, or leave eval_path "
             "out to draw eval items from the training data (the run then says so)");
  }
}

// An eval split of no items scores nothing: an error, where it is read, naming the key.
void check_eval_split(const DataConfig& cfg) {
  ZT_CHECK(cfg.eval_samples > 0,
           "the eval split is empty: data.eval_samples is 0; set data.eval_samples to the "
           "number of items to evaluate (--set data.eval_samples=64)");
}

}  // namespace

ImageFolderOptions image_options(const DataConfig& cfg) {
  ImageFolderOptions o;
  o.frames = cfg.frames;
  o.height = cfg.height;
  o.width = cfg.width;
  o.filter = cfg.resize;
  o.fit = cfg.fit;
  o.on_bad_image = cfg.on_bad_image;
  return o;
}

std::shared_ptr<const Dataset> make_dataset(const DataConfig& cfg, bool eval, int64_t scored,
                                            Headers headers) {
  if (cfg.kind == DataKind::synthetic) {
    SyntheticVideoOptions o;
    if (eval) check_eval_split(cfg);
    o.size = eval ? cfg.eval_samples : cfg.num_samples;
    o.frames = cfg.frames;
    o.height = cfg.height;
    o.width = cfg.width;
    o.num_shapes = cfg.num_shapes;
    // A disjoint stream for held-out clips.
    o.seed = static_cast<uint64_t>(cfg.seed) ^ (eval ? 0x5eed0fe7a1ull : 0);
    return std::make_shared<SyntheticVideo>(o);
  }
  if (!eval) return open_files(cfg, "data.path", cfg.path, headers);
  return make_eval_dataset(cfg, nullptr, scored, headers);
}

std::shared_ptr<const Dataset> make_eval_dataset(const DataConfig& cfg,
                                                 const std::shared_ptr<const Dataset>& train,
                                                 int64_t scored, Headers headers) {
  if (cfg.kind == DataKind::synthetic) return make_dataset(cfg, /*eval=*/true, scored);
  check_eval_split(cfg);
  std::shared_ptr<const Dataset> ds;
  if (cfg.eval_path.empty()) {
    // Eval items of the training data: its listing, when the run has it, rather than a
    // second walk and header check of every file.
    ds = train ? train : open_files(cfg, "data.path", cfg.path, headers);
  } else {
    // Held-out data that is also training data would be scored as held out.
    const fs::path train_dir = fs::weakly_canonical(cfg.path),
                   held_dir = fs::weakly_canonical(cfg.eval_path);
    const auto [t, h] =
        std::mismatch(train_dir.begin(), train_dir.end(), held_dir.begin(), held_dir.end());
    const char* overlap = t == train_dir.end() && h == held_dir.end() ? "is"
                          : t == train_dir.end()                      ? "lies inside"
                          : h == held_dir.end()                       ? "holds"
                                                                      : nullptr;
    // One file under two names (a hard link, as `cp -al` makes) is no path's prefix.
    std::error_code ec;
    const bool linked = !overlap && fs::equivalent(cfg.path, cfg.eval_path, ec);
    ZT_CHECK(!overlap && !linked, "data.eval_path '", cfg.eval_path, "' ", linked ? "is" : overlap,
             " data.path '", cfg.path, "'", linked ? " under another name (a hard link)" : "",
             ": items of it are trained on, so eval would not be held out. Name data that "
             "training does not read, or leave eval_path out to draw eval items from the "
             "training data (the run then says so)");
    ds = open_files(cfg, "data.eval_path", cfg.eval_path, headers);
    if (train) check_no_shared_file(cfg, *train, *ds);
  }
  int64_t n = cfg.eval_samples;
  if (scored > 0) n = std::min(n, scored);
  return spread(ds, n);
}

std::shared_ptr<const Dataset> spread(std::shared_ptr<const Dataset> ds, int64_t n) {
  n = std::min(n, ds->size());
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < n; ++i) idx.push_back(i * ds->size() / n);
  return std::make_shared<Subset>(std::move(ds), idx);
}

bool eval_held_out(const DataConfig& cfg) {
  return cfg.kind == DataKind::synthetic || !cfg.eval_path.empty();
}

std::string describe_eval(const DataConfig& cfg, const Dataset& eval) {
  if (eval_held_out(cfg)) return eval.describe();
  return eval.describe() + ", drawn from the training data (data.eval_path names held-out data)";
}

std::unique_ptr<DataLoader> make_loader(std::shared_ptr<const Dataset> dataset,
                                        const DataConfig& cfg, int64_t batch, int64_t rank,
                                        int64_t world, bool eval) {
  const bool drop_last = !eval;
  // (Training data of 0 samples meets the check of one batch per rank below.)
  ZT_CHECK(!eval || dataset->size() >= 1, "the eval data (", dataset->describe(),
           ") holds 0 samples: there is nothing to evaluate; give it at least one");
  ZT_CHECK(!drop_last || dataset->size() >= world * batch, "the training data (",
           dataset->describe(), ") holds ", counted(dataset->size(), "sample"),
           ", fewer than one batch of ", batch, " (train.batch) for each of ",
           counted(world, "rank"),
           ": use more data (data.num_samples for synthetic data), a smaller train.batch, "
           "or fewer ranks");
  DistributedSampler sampler(dataset->size(), rank, world, static_cast<uint64_t>(cfg.seed),
                             cfg.shuffle && !eval, drop_last);
  LoaderOptions o;
  o.batch_size = batch;
  o.prefetch = cfg.prefetch;
  o.workers = cfg.workers;
  o.timeout = cfg.timeout;
  o.drop_last = drop_last;
  return std::make_unique<DataLoader>(std::move(dataset), sampler, o);
}

}  // namespace zt::data
