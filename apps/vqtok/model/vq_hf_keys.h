// The tokenizer's two state-dict namings: the original BAAI Emu3-VisionTokenizer names that
// VqModel registers (encoder.down.{i}, encoder.mid, decoder.up.{i}, attention as 1x1
// convolutions q / k / v / proj_out with its norm inside), and the names of Hugging Face
// transformers' Emu3VQVAE (encoder.down_block.down.{i}, encoder.middle_block,
// decoder.up_block.up.{i}, attention as q_proj / k_proj / v_proj / out_proj linear layers
// with the norm in attn_norms.{j} / attn_norm). The map is a pure renaming plus the
// reshape [C, C, 1, 1] <-> [C, C] of the projection weights; values are untouched, so the
// two models compute the same tokens and frames.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "configs/app_config.h"
#include "nn/state_dict.h"

namespace zt::vq {

/// Which naming a tokenizer state dict uses.
enum class KeyNaming { baai, transformers };

/// The naming of `keys`: transformers when any key has a down_block / middle_block /
/// up_block / attn_norm(s) segment, BAAI otherwise.
KeyNaming detect_naming(const std::vector<std::string>& keys);

/// The transformers name of BAAI state-dict key `name` (other names are returned as is).
std::string transformers_name(const std::string& name);
/// The BAAI name of transformers state-dict key `name` (other names are returned as is).
std::string baai_name(const std::string& name);

/// `state` (BAAI names) renamed to transformers names, attention projection weights
/// reshaped from [C, C, 1, 1] to [C, C] (views of the same storage).
nn::NamedTensors to_transformers(const nn::NamedTensors& state);
/// `state` (either naming) with BAAI names, projection weights back to [C, C, 1, 1].
nn::NamedTensors to_baai(const nn::NamedTensors& state);

/// transformers' Emu3VQVAE state-dict names and shapes for `cfg` (VqModel::expected_keys
/// mapped), in VqModel's order.
std::vector<std::pair<std::string, Shape>> transformers_keys(const config::ModelConfig& cfg);

/// The Emu3VQVAEConfig (config.json) describing `cfg`. Fails when `cfg` has attention at a
/// level whose width differs from the middle block's: Emu3VQVAE gives every attention
/// block the one width hidden_size.
nlohmann::json transformers_config(const config::ModelConfig& cfg);

}  // namespace zt::vq
