// The `data` section of an app config: its enums' names and its reader.
#include "configs/data_section.h"

#include "configs/app_config.h"

namespace zt::config {

const std::vector<std::pair<std::string, data::DataKind>> kDataKindNames = {
    {"synthetic", data::DataKind::synthetic},
    {"image_folder", data::DataKind::image_folder},
    {"npy", data::DataKind::npy}};
const std::vector<std::pair<std::string, data::Filter>> kFilterNames = {
    {"bilinear", data::Filter::bilinear}, {"bicubic", data::Filter::bicubic}};
const std::vector<std::pair<std::string, data::Fit>> kFitNames = {{"crop", data::Fit::crop},
                                                                  {"stretch", data::Fit::stretch}};
const std::vector<std::pair<std::string, data::OnBadImage>> kBadImageNames = {
    {"error", data::OnBadImage::error}, {"skip", data::OnBadImage::skip}};

const char* data_kind_name(data::DataKind k) {
  return enum_name(kDataKindNames, k);
}

const char* filter_name(data::Filter f) {
  return enum_name(kFilterNames, f);
}

const char* fit_name(data::Fit f) {
  return enum_name(kFitNames, f);
}

const char* bad_image_name(data::OnBadImage b) {
  return enum_name(kBadImageNames, b);
}

void read_data(Section s, data::DataConfig& d) {
  using data::DataKind;
  s.get_enum("kind", d.kind, kDataKindNames)
      .get("path", d.path)
      .get("eval_path", d.eval_path)
      .get("frames", d.frames, 1, 4096)
      .get("height", d.height, 8, 1 << 15)
      .get("width", d.width, 8, 1 << 15)
      // A permutation of the samples is 8 bytes each: at most 2^27 (1 GiB) per epoch.
      .get("num_samples", d.num_samples, 1, int64_t{1} << 27)
      .get("eval_samples", d.eval_samples, 0, int64_t{1} << 27)
      .get("seed", d.seed, 0)
      .get("shuffle", d.shuffle)
      .get("workers", d.workers, 1, 256)
      .get("prefetch", d.prefetch, 0, 1024)
      .get("timeout", d.timeout, 0.0)
      .get_enum("resize", d.resize, kFilterNames)
      .get_enum("fit", d.fit, kFitNames)
      .get_enum("on_bad_image", d.on_bad_image, kBadImageNames)
      .get("num_shapes", d.num_shapes, 1, 16);
  s.finish();
  if (d.kind != DataKind::synthetic && d.path.empty())
    s.fail("path", std::string("data.kind ") + (d.kind == DataKind::npy
                                                    ? "npy needs data.path: a .npy file"
                                                    : "image_folder needs data.path: a directory"));
  if (d.timeout > data::kMaxTimeout)
    s.fail("timeout", "a timeout of " + s.node().get("timeout").scalar() +
                          " s is longer than a wait can be timed (at most 1e9 s, about 31 "
                          "years); set 0 to wait without limit");
  if (d.timeout > 0 && d.prefetch == 0)
    s.fail("timeout",
           "needs data.prefetch >= 1: with prefetch 0 the training loop reads each batch "
           "itself and cannot stop waiting for it; set data.prefetch to 1 or more, or "
           "data.timeout to 0");
  if (d.kind == DataKind::synthetic && !d.eval_path.empty())
    s.fail("eval_path",
           "synthetic data holds out its eval clips already (another seed); eval_path is for "
           "image_folder and npy data");
}

}  // namespace zt::config
