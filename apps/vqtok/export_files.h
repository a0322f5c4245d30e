// What vqtok export does to the state it writes and to the files beside it (export_model in
// infer.cpp): unit codebook rows for cosine codes, and the transformers format's
// config.json.
#pragma once

#include <filesystem>
#include <string>

#include "core/tensor.h"

namespace zt::vqtok {

/// Divides each row of quantize.embedding.weight in `state` by its length; error when the
/// state has none.
void unit_codebook_rows(NamedTensors& state);

/// Error when `json_path` exists and is not a config of `model_type` (a DeepSpeed config,
/// say), which the transformers export would replace.
void refuse_foreign_config(const std::filesystem::path& json_path, const std::string& model_type);

/// Writes `text` to `json_path`, the config.json beside the weights just written to
/// `weights`. When it cannot, an earlier config.json there that differs (another model's)
/// is removed, and the error says the weights were written.
void write_transformers_config(const std::filesystem::path& json_path, const std::string& text,
                               const std::string& weights);

}  // namespace zt::vqtok
