// The engine's sections of a config file, read into zero/'s plain structs:
// `zero_optimization`, `bf16`, `fp16` (DeepSpeed's key names, shared by the YAML and
// DeepSpeed JSON front ends) and zt's `buffers`. zero/ itself reads no files.
#pragma once

#include <string>
#include <vector>

#include "configs/config.h"
#include "zero/config.h"

namespace zt::config {

/// Reads a `zero_optimization` mapping into `out` (fields it does not name are kept).
/// Keys DeepSpeed has that change nothing in zt (contiguous_gradients: false,
/// stage3_gather_16bit_weights_on_model_save: true, sub_group_size, ZeRO-1/2 keys) are
/// accepted and add one located message each to `warnings`; features zt lacks (offload
/// of parameters, offload to NVMe, ZeRO++, MiCS) are errors unless turned off;
/// `offload_optimizer: {device: cpu, pin_memory}` fills out.offload_optimizer; unknown keys are
/// errors naming the nearest valid key.
void read_zero_optimization(Section s, zero::Config& out, std::vector<std::string>& warnings);

/// Reads the `bf16` ({enabled}) and `fp16` ({enabled, loss_scale, initial_scale_power,
/// loss_scale_window, hysteresis, consecutive_hysteresis, min_loss_scale}) sections; both
/// enabled is an error. DeepSpeed's other keys there are accepted at the values that ask
/// for what zt does (with a warning where they change nothing), refused otherwise.
zero::MixedPrecision read_mixed_precision(Section bf16, Section fp16,
                                          std::vector<std::string>& warnings);

/// Reads zt's `buffers` section: {sync, verify_every, modules: [{module, sync}]}.
void read_buffers(Section s, zero::BuffersConfig& out);

/// Makes `precision` agree with train.dtype when the key is given (`dtype_node`: "f32",
/// "bf16" or "f16"): bf16 / f16 enable that section; a section enabled against the
/// dtype, or the dtype's own section with `enabled: false` (`bf16`, `fp16`: the YAML's
/// sections, absent when not given), is an error located at the key. An absent node
/// changes nothing.
void apply_dtype(const Node& dtype_node, const Node& bf16, const Node& fp16,
                 zero::MixedPrecision& precision);

/// The spelling of the parameter dtype `precision` implies ("f32", "bf16", "f16").
const char* precision_dtype_name(const zero::MixedPrecision& precision);

struct AppConfig;
/// The engine's sections of config `s` into c.zero: zero_optimization, bf16 / fp16
/// reconciled with train.dtype, buffers, and the train keys DeepSpeed keeps at the top
/// level. A DeepSpeed config `ds` (absent: none) replaces each of zero_optimization and the
/// precision sections it holds, with a warning where the YAML had them too, naming the
/// YAML's keys that go back to their defaults; fp16 keys where fp16 is off warn.
void read_engine_sections(Section& s, const Node& ds, AppConfig& c);

}  // namespace zt::config
