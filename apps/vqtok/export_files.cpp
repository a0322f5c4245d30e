// vqtok export's unit codebook rows and transformers config.json (see export_files.h).
#include "apps/vqtok/export_files.h"

#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "apps/vqtok/model/vq_quantizer.h"
#include "core/autograd.h"
#include "core/error.h"
#include "core/text_file.h"

namespace zt::vqtok {

namespace fs = std::filesystem;

// Cosine codes (model.l2_norm_codes) use each codebook row divided by its length; the
// export writes the rows so divided. Emu3's and transformers' quantizers take the nearest
// row by Euclidean distance, which for rows of one length picks the row of the largest
// dot product, as zt's cosine choice does, and decode from the row itself: the same codes
// and frames as in zt (whose normalizing of a unit row changes it by rounding at most).
void unit_codebook_rows(NamedTensors& state) {
  for (auto& [name, t] : state)
    if (name == "quantize.embedding.weight") {
      autograd::NoGradGuard ng;
      t = vq::l2_normalize_last(t).contiguous();
      return;
    }
  ZT_FAIL("export: the model has no quantize.embedding.weight to normalize");
}

void refuse_foreign_config(const fs::path& json_path, const std::string& model_type) {
  if (!fs::exists(json_path)) return;
  std::ifstream in(json_path);
  const nlohmann::json old = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  ZT_CHECK(old.is_object() && old.value("model_type", nlohmann::json()) == model_type, "export: '",
           json_path.string(), "' exists and is not a config of model_type '", model_type,
           "'; the transformers format writes config.json beside --out, so export into "
           "another folder (or move that file)");
}

void write_transformers_config(const fs::path& json_path, const std::string& text,
                               const std::string& weights) {
  try {
    write_text_atomically(json_path.string(), text);
  } catch (const Error& e) {
    // The weights are this model's now: an earlier export's config.json that says
    // otherwise would pass for theirs, a pair that looks whole. It goes.
    std::ifstream in(json_path);
    const std::string old((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::error_code ec;
    const bool removed = in.is_open() && old != text && fs::remove(json_path, ec);
    ZT_FAIL(e.what(), "; the weights in '", weights, "' were written",
            removed ? ", and the earlier config.json beside them (another model's) removed" : "",
            ": export again");
  }
}

}  // namespace zt::vqtok
