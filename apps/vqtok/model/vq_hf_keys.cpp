// The BAAI <-> transformers naming map of the tokenizer's state dict, segment by segment:
//   encoder.down.{i}.*              <-> encoder.down_block.down.{i}.*
//   decoder.up.{i}.*                <-> decoder.up_block.up.{i}.*
//   {encoder,decoder}.mid.*         <-> {encoder,decoder}.middle_block.*
//   ...attn.{j}.norm.*              <-> ...attn_norms.{j}.*
//   ...mid.attn_1.norm.*            <-> ...middle_block.attn_norm.*
//   ...attn(.{j}|_1).{q,k,v,proj_out} <-> ...attn(.{j}|_1).{q,k,v,out}_proj
// Every other name (conv_in, time_conv, time_res_stack, quantize, quant_conv, ...) is the
// same in both.
#include "apps/vqtok/model/vq_hf_keys.h"

#include <algorithm>

#include "apps/vqtok/model/vq_model.h"

namespace zt::vq {

namespace {

using Segments = std::vector<std::string>;

Segments split(const std::string& name) {
  Segments out;
  size_t start = 0;
  for (;;) {
    const size_t dot = name.find('.', start);
    out.push_back(name.substr(start, dot - start));
    if (dot == std::string::npos) return out;
    start = dot + 1;
  }
}

std::string join(const Segments& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "." : "") + s[i];
  return out;
}

// BAAI projection name -> transformers projection name.
const std::pair<const char*, const char*> kProjections[] = {
    {"q", "q_proj"}, {"k", "k_proj"}, {"v", "v_proj"}, {"proj_out", "out_proj"}};

std::string projection_to_hf(const std::string& s) {
  for (const auto& [baai, hf] : kProjections)
    if (s == baai) return hf;
  return s;
}

std::string projection_to_baai(const std::string& s) {
  for (const auto& [baai, hf] : kProjections)
    if (s == hf) return baai;
  return s;
}

bool is_coder(const std::string& s) {
  return s == "encoder" || s == "decoder";
}

// A transformers attention projection weight: [C, C] there, [C, C, 1, 1] in BAAI's.
bool is_hf_projection_weight(const std::string& hf_name) {
  const Segments s = split(hf_name);
  if (s.size() < 3 || s.back() != "weight") return false;
  const std::string& layer = s[s.size() - 2];
  const bool proj = projection_to_baai(layer) != layer;
  return proj && (s[s.size() - 3] == "attn_1" || (s.size() >= 4 && s[s.size() - 4] == "attn"));
}

}  // namespace

KeyNaming detect_naming(const std::vector<std::string>& keys) {
  for (const auto& k : keys)
    for (const auto& s : split(k))
      if (s == "down_block" || s == "up_block" || s == "middle_block" || s == "attn_norms" ||
          s == "attn_norm")
        return KeyNaming::transformers;
  return KeyNaming::baai;
}

std::string transformers_name(const std::string& name) {
  Segments s = split(name);
  if (s.size() < 3 || !is_coder(s[0])) return name;
  if (s[0] == "encoder" && s[1] == "down")
    s.insert(s.begin() + 1, "down_block");
  else if (s[0] == "decoder" && s[1] == "up")
    s.insert(s.begin() + 1, "up_block");
  else if (s[1] == "mid")
    s[1] = "middle_block";
  else
    return name;
  for (size_t k = 0; k < s.size(); ++k) {
    if (s[k] == "attn" && k + 2 < s.size()) {  // attn.{j}.X
      if (s[k + 2] == "norm") {
        s[k] = "attn_norms";
        s.erase(s.begin() + static_cast<std::ptrdiff_t>(k + 2));
      } else {
        s[k + 2] = projection_to_hf(s[k + 2]);
      }
      break;
    }
    if (s[k] == "attn_1" && k + 1 < s.size()) {  // attn_1.X
      if (s[k + 1] == "norm") {
        s[k] = "attn_norm";
        s.erase(s.begin() + static_cast<std::ptrdiff_t>(k + 1));
      } else {
        s[k + 1] = projection_to_hf(s[k + 1]);
      }
      break;
    }
  }
  return join(s);
}

std::string baai_name(const std::string& name) {
  Segments s = split(name);
  if (s.size() < 3 || !is_coder(s[0])) return name;
  if ((s[1] == "down_block" && s[2] == "down") || (s[1] == "up_block" && s[2] == "up"))
    s.erase(s.begin() + 1);
  else if (s[1] == "middle_block")
    s[1] = "mid";
  else
    return name;
  for (size_t k = 0; k < s.size(); ++k) {
    if (s[k] == "attn_norms" && k + 1 < s.size()) {  // attn_norms.{j} -> attn.{j}.norm
      s[k] = "attn";
      s.insert(s.begin() + static_cast<std::ptrdiff_t>(k + 2), "norm");
      break;
    }
    if (s[k] == "attn_norm") {  // attn_norm -> attn_1.norm
      s[k] = "attn_1";
      s.insert(s.begin() + static_cast<std::ptrdiff_t>(k + 1), "norm");
      break;
    }
    if (s[k] == "attn" && k + 2 < s.size()) {
      s[k + 2] = projection_to_baai(s[k + 2]);
      break;
    }
    if (s[k] == "attn_1" && k + 1 < s.size()) {
      s[k + 1] = projection_to_baai(s[k + 1]);
      break;
    }
  }
  return join(s);
}

nn::NamedTensors to_transformers(const nn::NamedTensors& state) {
  nn::NamedTensors out;
  out.reserve(state.size());
  for (const auto& [name, t] : state) {
    std::string hf = transformers_name(name);
    Tensor v = t;
    if (is_hf_projection_weight(hf)) {
      ZT_CHECK(t.sizes().size() == 4 && t.size(2) == 1 && t.size(3) == 1, "'", name,
               "' should be a 1x1 convolution weight [C, C, 1, 1], got ", shape_str(t.sizes()));
      v = t.reshape({t.size(0), t.size(1)});
    }
    out.emplace_back(std::move(hf), v);
  }
  return out;
}

nn::NamedTensors to_baai(const nn::NamedTensors& state) {
  nn::NamedTensors out;
  out.reserve(state.size());
  for (const auto& [name, t] : state) {
    Tensor v = t;
    if (is_hf_projection_weight(name) && t.sizes().size() == 2)
      v = t.reshape({t.size(0), t.size(1), 1, 1});
    out.emplace_back(baai_name(name), v);
  }
  return out;
}

std::vector<std::pair<std::string, Shape>> transformers_keys(const config::ModelConfig& cfg) {
  auto keys = VqModel::expected_keys(cfg);
  for (auto& [name, shape] : keys) {
    name = transformers_name(name);
    if (is_hf_projection_weight(name)) shape.resize(2);
  }
  return keys;
}

nlohmann::json transformers_config(const config::ModelConfig& cfg) {
  validate(cfg);
  const int64_t hidden = cfg.ch * cfg.ch_mult.back();
  for (int64_t a : cfg.attn_resolutions)
    ZT_CHECK(cfg.ch * cfg.ch_mult[static_cast<size_t>(a)] == hidden,
             "export --format transformers: model.attn_resolutions has level ", a, " of width ",
             cfg.ch * cfg.ch_mult[static_cast<size_t>(a)], " but Emu3VQVAE gives every attention ",
             "block the middle block's width ", hidden,
             "; attend only at levels whose ch_mult equals the last one, or export --format baai");
  nlohmann::json j;
  j["architectures"] = {"Emu3VQVAE"};
  j["model_type"] = "emu3_vqgan";
  j["codebook_size"] = cfg.codebook_size;
  j["embed_dim"] = cfg.embed_dim;
  j["latent_channels"] = cfg.z_channels;
  j["double_latent"] = false;
  j["in_channels"] = cfg.in_channels;
  j["out_channels"] = cfg.out_channels;
  j["temporal_downsample_factor"] = cfg.temporal_downsample_factor;
  j["base_channels"] = cfg.ch;
  j["channel_multiplier"] = cfg.ch_mult;
  j["num_res_blocks"] = cfg.num_res_blocks;
  j["attn_resolutions"] = cfg.attn_resolutions;
  j["hidden_size"] = hidden;
  j["num_attention_heads"] = 1;
  j["attention_dropout"] = 0.0;
  j["dtype"] = "float32";
  return j;
}

}  // namespace zt::vq
