// A table of bad configs: each fails with the message a user needs (file:line, key path,
// and what to do), every listed fragment present.
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "configs/app_config.h"
#include "configs/config.h"

namespace zt::config {
namespace {

// Each bad config and the message it must produce (every fragment must appear).
struct BadCase {
  const char* name;
  const char* yaml;
  std::vector<Override> overrides;
  std::vector<std::string> expect;
  App app = App::any;
};

const std::vector<BadCase> kBadConfigs = {
    {"unknown_key",
     "train:\n  steps: 10\n  stpes: 20\n",
     {},
     {"bad.yaml:3: train.stpes: unknown key; did you mean 'train.steps'?"}},
    {"unknown_top",
     "trian:\n  steps: 10\n",
     {},
     {"bad.yaml:1: trian: unknown key; did you mean 'train'?"}},
    // A section's key written at the top level is named with its section, not with the
    // nearest top-level key ('loss' for lr, 'replicated' for a ZeRO key).
    {"misplaced_train_key",
     "train:\n  steps: 10\nlr: 1.0e-3\n",
     {},
     {"bad.yaml:3: lr: unknown key here; it belongs in another section: did you mean "
      "'train.lr'?"}},
    {"misplaced_shared_key",  // every section that has it
     "seed: 3\n",
     {},
     {"did you mean 'data.seed' or 'train.seed'?"}},
    {"misplaced_zero_key",
     "stage3_max_live_parameters: 5\n",
     {},
     {"did you mean 'zero_optimization.stage3_max_live_parameters'?"}},
    // The same in a section that does not take it: the sections it belongs in, not the
    // section's nearest key ('model.ch' for lr).
    {"key_in_wrong_section",
     "model:\n  lr: 1.0e-3\n",
     {},
     {"bad.yaml:2: model.lr: unknown key here; it belongs in another section: did you mean "
      "'train.lr'?"}},
    {"key_in_wrong_nested_section",
     "zero_optimization:\n  offload_optimizer:\n    stage: 3\n",
     {},
     {"zero_optimization.offload_optimizer.stage: unknown key here",
      "did you mean 'zero_optimization.stage'?"}},
    {"engine_key_in_train",
     "train:\n  enabled: true\n",
     {},
     {"did you mean 'bf16.enabled' or 'fp16.enabled'?"}},
    {"gpt_key_in_model", "model:\n  n_layer: 2\n", {}, {"did you mean 'gpt.n_layer'?"}, App::vqgpt},
    {"wrong_type",
     "train:\n  steps: abc\n",
     {},
     {"bad.yaml:2: train.steps: expected an integer, got 'abc'"}},
    {"float_for_int",
     "train:\n  batch: 2.5\n",
     {},
     {"train.batch: expected an integer, got '2.5'"}},
    {"below_min",
     "train:\n  steps: 0\n",
     {},
     {"bad.yaml:2: train.steps: 0 is out of range: must be >= 1"}},
    {"above_max", "train:\n  lr: 20\n", {}, {"train.lr: 20 is out of range: must be in [0, 10]"}},
    // Past an int: it would wrap to a small count (deleting checkpoints asked to be kept) or a
    // negative one (failing the first save after training).
    {"keep_checkpoints_past_int",
     "train:\n  keep_checkpoints: 4294967297\n",
     {},
     {"bad.yaml:2: train.keep_checkpoints: 4294967297 is out of range: must be in [0, "
      "2147483647]"}},
    {"bad_enum",
     "train:\n  schedule: cosin\n",
     {},
     {"bad.yaml:2: train.schedule: 'cosin' is not one of: constant, cosine, linear, step",
      "did you mean 'cosine'?"}},
    // A name begun: the name it begins, not a short one a few edits away ('npy').
    {"enum_begun",
     "data:\n  kind: images\n",
     {},
     {"'images' is not one of: synthetic, image_folder, npy (did you mean 'image_folder'?)"}},
    {"tf32_mode",
     "train:\n  tf32: true\n",
     {},
     {"bad.yaml:2: train.tf32: 'true' is not one of: conv, all, none"}},
    {"cudnn_benchmark_flag",
     "train:\n  cudnn_benchmark: fastest\n",
     {},
     {"bad.yaml:2: train.cudnn_benchmark: expected true or false, got 'fastest'"}},
    {"gemm_benchmark_flag",
     "train:\n  gemm_benchmark: 1x\n",
     {},
     {"bad.yaml:2: train.gemm_benchmark: expected true or false, got '1x'"}},
    {"attention_kernel",
     "train:\n  attention: fast\n",
     {},
     {"bad.yaml:2: train.attention: 'fast' is not one of: auto, flash, math"}},
    {"flash_backward",
     "train:\n  flash_backward: atomics\n",
     {},
     {"bad.yaml:2: train.flash_backward: 'atomics' is not one of: split, atomic"}},
    {"cuda_graph_on_cpu",
     "train:\n  cuda_graph: true\n",
     {},
     {"bad.yaml:2: train.cuda_graph: CUDA graphs need device: cuda (the device is cpu)"}},
    {"cuda_graph_accumulates",
     "train:\n  device: cuda\n  gradient_accumulation_steps: 2\n  cuda_graph: true\n",
     {},
     {"train.cuda_graph: a graph holds one whole step: set gradient_accumulation_steps to 1"}},
    {"bool",
     "data:\n  shuffle: maybe\n",
     {},
     {"data.shuffle: expected true or false, got 'maybe'"}},
    {"list_expected", "model:\n  ch_mult: 4\n", {}, {"model.ch_mult: expected a list of integers"}},
    {"map_expected", "model: 5\n", {}, {"bad.yaml:1: model: expected a mapping"}},
    {"embed_ne_z",
     "model:\n  embed_dim: 8\n  z_channels: 4\n",
     {},
     {"bad.yaml:2: model.embed_dim: embed_dim (8) must equal z_channels (4)"}},
    {"groupnorm", "model:\n  ch: 48\n", {}, {"model.ch: must be a multiple of 32 (GroupNorm"}},
    {"temporal_pow2",
     "model:\n  temporal_downsample_factor: 3\n",
     {},
     {"model.temporal_downsample_factor: must be a power of two"}},
    {"attn_level",
     "model:\n  attn_resolutions: [5]\n",
     {},
     {"bad.yaml:2: model.attn_resolutions.0: level 5 does not exist", "level indices, not pixels"}},
    // A --set of one element of a list is named as the source of a bad value, as a --set of
    // the whole list is (not the file's line, whose values were valid); an element the file
    // set is named at the file's line.
    {"attn_level_by_set",
     "model:\n  attn_resolutions: [1]\n",
     {"model.attn_resolutions.0=9"},
     {"--set model.attn_resolutions.0=9: model.attn_resolutions.0: level 9 does not exist"}},
    {"beta_by_set",
     "train:\n  betas: [0.9, 0.99]\n",
     {"train.betas.1=-0.1"},
     {"--set train.betas.1=-0.1: train.betas.1: each beta must be in [0, 1)"}},
    {"beta_in_file_beside_a_set",
     "train:\n  betas: [0.9, 1.5]\n",
     {"train.betas.0=0.5"},
     {"bad.yaml:2: train.betas.1: each beta must be in [0, 1)"}},
    {"betas_by_set",
     "train:\n  steps: 2\n",
     {"train.betas=[0.5,2]"},
     {"--set train.betas=[0.5,2]: train.betas.1: each beta"}},
    {"height_multiple",
     "data:\n  height: 36\n",
     {},
     {"bad.yaml:2: data.height: height and width must be multiples of 8"}},
    {"frames_multiple",
     "data:\n  frames: 6\n",
     {},
     {"data.frames: frames (6) must be 1 (an image) or a multiple of"}},
    {"in_channels",
     "model:\n  in_channels: 1\n  out_channels: 1\n",
     {},
     {"bad.yaml:2: model.in_channels: in_channels (1) must be 3: synthetic data is RGB"}},
    {"in_channels_npy",  // no .npy file can supply another channel count
     "data:\n  kind: npy\n  path: clips.npy\nmodel:\n  in_channels: 1\n  out_channels: 1\n",
     {},
     {"bad.yaml:5: model.in_channels: in_channels (1) must be 3: npy clips are RGB"}},
    {"out_channels",
     "model:\n  out_channels: 4\n",
     {},
     {"model.out_channels: out_channels (4) must equal in_channels (3)"}},
    {"npy_needs_path", "data:\n  kind: npy\n", {}, {"data.path: data.kind npy needs data.path"}},
    {"bad_fit", "data:\n  fit: squash\n", {}, {"data.fit", "crop", "stretch"}},
    {"bad_on_bad_image",
     "data:\n  on_bad_image: ignore\n",
     {},
     {"data.on_bad_image", "error", "skip"}},
    {"negative_timeout",
     "data:\n  timeout: -1\n",
     {},
     {"bad.yaml:2: data.timeout: -1 is out of range: must be >= 0 and finite"}},
    {"infinite_timeout", "data:\n  timeout: .inf\n", {}, {"data.timeout", ">= 0 and finite"}},
    {"nan_timeout", "data:\n  timeout: .nan\n", {}, {"data.timeout", "NaN: not a number"}},
    // Past what a wait can time (its nanoseconds overflow): every batch would time out at once.
    {"timeout_past_timing",
     "data:\n  timeout: 1e10\n",
     {},
     {"bad.yaml:2: data.timeout: a timeout of 1e10 s is longer than a wait can be timed",
      "set 0 to wait without limit"}},
    {"timeout_without_prefetch",
     "data:\n  prefetch: 0\n  timeout: 30\n",
     {},
     {"bad.yaml:3: data.timeout: needs data.prefetch >= 1"}},
    {"synthetic_eval_path",
     "data:\n  eval_path: val.npy\n",
     {},
     {"data.eval_path: synthetic data holds out its eval clips already"}},
    {"betas_len", "train:\n  betas: [0.9]\n", {}, {"train.betas: expected two values"}},
    {"min_lr",
     "train:\n  lr: 0.1\n  min_lr: 0.2\n",
     {},
     {"bad.yaml:3: train.min_lr: min_lr (0.2) must not exceed lr (0.1, set at ", "bad.yaml:2)"}},
    // A number no double holds is named as out of range, not as no number at all.
    {"number_past_doubles",
     "train:\n  gradient_clipping: 1e999\n",
     {},
     {"bad.yaml:2: train.gradient_clipping: '1e999' is out of range: its magnitude is past the "
      "largest a double holds"}},
    {"number_below_doubles",
     "train:\n  lr: -1.5e-400\n",
     {},
     {"bad.yaml:2: train.lr: '-1.5e-400' is out of range: its magnitude is below the smallest",
      "write 0 for 0"}},
    {"integer_past_doubles",
     "train:\n  steps: 2E+999\n",
     {},
     {"bad.yaml:2: train.steps: the integer '2E+999' is out of range"}},
    // Products of batches, accumulation steps and ranks stay inside 64 bits.
    {"batch_past_2_27", "train:\n  batch: 4611686018427387904\n", {}, {"bad.yaml:2: train.batch"}},
    {"eval_batches_past_2_27",
     "train:\n  eval_batches: 4611686018427387904\n",
     {},
     {"bad.yaml:2: train.eval_batches"}},
    {"min_lr_default_lr",
     "train:\n  min_lr: 0.2\n",
     {},
     {"train.min_lr: min_lr (0.2) must not exceed lr (0.001, its default)"}},
    {"empty_no_weight_decay_pattern",
     "train:\n  no_weight_decay: [\"*.bias\", \"\"]\n",
     {},
     {"train.no_weight_decay: a pattern is empty"}},
    {"param_groups_not_a_list",
     "train:\n  param_groups: {params: [\"*.bias\"]}\n",
     {},
     {"train.param_groups: expected a list of {params: [name patterns], lr_scale: x, "
      "weight_decay: y}"}},
    {"param_group_without_params",
     "train:\n  param_groups:\n    - {lr_scale: 0.1}\n",
     {},
     {"bad.yaml:3: train.param_groups.0.params: each group needs params"}},
    {"param_group_unknown_key",
     "train:\n  param_groups:\n    - {params: [\"a.*\"], lr: 0.1}\n",
     {},
     {"train.param_groups.0.lr: unknown key"}},
    {"param_group_negative_decay",
     "train:\n  param_groups:\n    - {params: [\"a.*\"], weight_decay: -1}\n",
     {},
     {"train.param_groups.0.weight_decay: -1 is out of range"}},
    {"no_weight_decay_not_a_list",
     "train:\n  no_weight_decay: {bias: true}\n",
     {},
     {"train.no_weight_decay: expected a list"}},
    {"buffer_sync",
     "buffers:\n  sync: avg\n",
     {},
     {"buffers.sync: 'avg' is not one of: broadcast, average, none", "did you mean 'average'?"}},
    {"buffer_module_key",
     "buffers:\n  modules:\n    - {modul: encoder, sync: none}\n",
     {},
     {"buffers.modules.0.modul: unknown key; did you mean 'buffers.modules.0.module'?"}},
    {"buffer_module_twice",
     "buffers:\n  modules:\n    - {module: encoder, sync: none}\n    - {module: encoder}\n",
     {},
     {"bad.yaml:4: buffers.modules.1.module: 'encoder' has a policy in an earlier entry"}},
    {"merge_key",  // yaml-cpp reads '<<' as a plain key
     "train:\n  <<: {steps: 3}\n",
     {},
     {"bad.yaml:2: train.<<: YAML merge keys (<<: *anchor) are not supported"}},
    {"replicated_not_a_list",
     "replicated: 3\n",
     {},
     {"bad.yaml:1: replicated: expected a list, e.g. [a, b]"}},
    {"duplicate",
     "train:\n  steps: 1\n  steps: 2\n",
     {},
     {"bad.yaml:3: train.steps: duplicate key"}},
    {"parse_error", "train: [1, 2\n", {}, {"bad.yaml:", "YAML parse error"}},
    {"integer_out_of_range",
     "train:\n  steps: 1e20\n",
     {},
     {"bad.yaml:2: train.steps: the integer '1e20' is out of range (at most 9.2e18 in "
      "magnitude)"}},
    // Nested aliases: six levels of ten stand for a million values (nine, a billion).
    {"alias_bomb",
     "a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n"
     "a1: &a1 [*a0, *a0, *a0, *a0, *a0, *a0, *a0, *a0, *a0, *a0]\n"
     "a2: &a2 [*a1, *a1, *a1, *a1, *a1, *a1, *a1, *a1, *a1, *a1]\n"
     "a3: &a3 [*a2, *a2, *a2, *a2, *a2, *a2, *a2, *a2, *a2, *a2]\n"
     "a4: &a4 [*a3, *a3, *a3, *a3, *a3, *a3, *a3, *a3, *a3, *a3]\n"
     "a5: [*a4, *a4, *a4, *a4, *a4, *a4, *a4, *a4, *a4, *a4]\n",
     {},
     {"bad.yaml:", "the config expands to more than 100000 values (nested YAML aliases?)"}},
    // An alias inside what it names would nest without end (it overflowed the stack).
    {"alias_in_itself",
     "x: &x [*x]\n",
     {},
     {"bad.yaml:", "the config nests more than 64 levels (a YAML alias inside what it names?)"}},
    {"alias_in_itself_override",
     "train:\n  steps: 2\n",
     {"model.ch_mult=&a [1, *a]"},
     {"the config nests more than 64 levels"}},
    {"tab_indent",
     "train:\n  steps: 2\n\tlr: 0.1\n",
     {},
     {"bad.yaml:3: a tab in the indentation; YAML indents with spaces only"}},
    {"zero_not_map", "zero_optimization: 3\n", {}, {"zero_optimization: expected a mapping"}},
    // Latin-1 bytes: refused where they are, not when the first checkpoint is written.
    {"not_utf8",
     "output_dir: runs/caf\xe9\n",
     {},
     {"bad.yaml:1:21: byte 0xE9 is not UTF-8 text", "save the file as UTF-8"}},
    {"override_not_utf8",
     "train:\n  steps: 2\n",
     {"output_dir=caf\xe9"},
     {"--set output_dir=caf\xe9:1:4: byte 0xE9 is not UTF-8 text"}},
    {"utf8_is_fine_but_bad_key", "trian: {caf\xc3\xa9: 1}\n", {}, {"trian: unknown"}},
    {"empty_file", "", {}, {"bad.yaml: the config is empty", "configs/vqtok_tiny.yaml"}},
    {"two_documents",
     "train:\n  steps: 10\n---\ntrain:\n  steps: 20\n",
     {},
     {"bad.yaml:4: a second YAML document (after '---')"}},
    {"comments_only",
     "# nothing yet\n\n  # still nothing\n",
     {},
     {"bad.yaml: the config is empty"}},
    {"empty_mapping", "{}\n", {}, {"bad.yaml: the config is empty (no keys: only blank lines, "}},
    {"empty_value",
     "train:\n  steps: 10\n  lr:\n",
     {},
     {"bad.yaml:3: train.lr: the key has no value; give one (lr: ...) or delete the line"}},
    {"empty_section",
     "loss:\ntrain:\n  steps: 3\n",
     {},
     {"bad.yaml:1: loss: the key has no value"}},
    {"empty_nested_value",
     "zero_optimization:\n  stage: 3\n  reduce_bucket_size:\n",
     {},
     {"bad.yaml:3: zero_optimization.reduce_bucket_size: the key has no value"}},
    {"zero_unknown",
     "zero_optimization:\n  stage3_prefetch_bucket: 5\n",
     {},
     {"bad.yaml:2: zero_optimization.stage3_prefetch_bucket: unknown key; did you mean "
      "'zero_optimization.stage3_prefetch_bucket_size'?"}},
    // Said as what zt lacks, not as a range of one value ("must be in [3, 3]").
    {"zero_stage",
     "zero_optimization:\n  stage: 2\n",
     {},
     {"bad.yaml:2: zero_optimization.stage: stage 2 is not implemented: zt implements ZeRO "
      "stage 3 only",
      "set stage: 3"}},
    {"zero_stage_unknown",
     "zero_optimization:\n  stage: 4\n",
     {},
     {"bad.yaml:2: zero_optimization.stage: 4 is no ZeRO stage (DeepSpeed's are 0 to 3)"}},
    {"zero_offload",
     "zero_optimization:\n  offload_param: {device: nvme}\n",
     {},
     {"bad.yaml:2: zero_optimization.offload_param: not supported by zt (parameters stay on the "
      "training device)"}},
    {"offload_optimizer_nvme",
     "zero_optimization:\n  offload_optimizer:\n    device: nvme\n",
     {},
     {"bad.yaml:3: zero_optimization.offload_optimizer.device: device: nvme is not supported by "
      "zt (optimizer state offloads to host memory only); use device: cpu"}},
    {"offload_optimizer_device",
     "zero_optimization:\n  offload_optimizer: {device: gpu}\n",
     {},
     {"zero_optimization.offload_optimizer.device: unknown offload device 'gpu'; use cpu or none"}},
    {"offload_optimizer_unknown",
     "zero_optimization:\n  offload_optimizer:\n    device: cpu\n    pin_memroy: true\n",
     {},
     {"bad.yaml:4: zero_optimization.offload_optimizer.pin_memroy: unknown key; did you mean "
      "'zero_optimization.offload_optimizer.pin_memory'?"}},
    {"offload_optimizer_ratio",
     "zero_optimization:\n  offload_optimizer: {device: cpu, ratio: 0.5}\n",
     {},
     {"zero_optimization.offload_optimizer.ratio: partial offload is not supported by zt"}},
    {"bf16_unknown",
     "bf16:\n  enable: true\n",
     {},
     {"bad.yaml:2: bf16.enable: unknown key; did you mean 'bf16.enabled'?"}},
    {"fp16_unknown",
     "fp16:\n  enabled: true\n  loss_scale_windw: 10\n",
     {},
     {"bad.yaml:3: fp16.loss_scale_windw: unknown key; did you mean 'fp16.loss_scale_window'?"}},
    {"fp16_bad_value",
     "fp16:\n  loss_scale_window: 0\n",
     {},
     {"fp16.loss_scale_window: 0 is out of range"}},
    {"both_precisions",
     "bf16: {enabled: true}\nfp16: {enabled: true}\n",
     {},
     {"fp16.enabled: bf16 and fp16 cannot both be enabled"}},
    {"deepspeed_json_as_config",
     "{\"train_micro_batch_size_per_gpu\": 4, \"zero_optimization\": {\"stage\": 3}}\n",
     {},
     {"bad.yaml:1: train_micro_batch_size_per_gpu: a DeepSpeed key: this file looks like a "
      "DeepSpeed config; pass it with --deepspeed"}},
    // With comments (hjson, as DeepSpeed reads it), which no YAML parser takes: named for
    // what it is, not by the parse error.
    {"deepspeed_json_with_comments_as_config",
     "{\n  // the batch\n  \"train_batch_size\": 8,\n  \"zero_optimization\": {\"stage\": 3}\n}\n",
     {},
     {"bad.yaml: this file looks like a DeepSpeed config; pass it with --deepspeed"}},
    {"dtype_vs_bf16",
     "train:\n  dtype: f16\nbf16:\n  enabled: true\n",
     {},
     {"bad.yaml:2: train.dtype: train.dtype is f16 but bf16.enabled is true (",
      "bad.yaml:4); they must agree: set train.dtype: bf16"}},
    // Where the section was turned on by --set, the error says so.
    {"dtype_vs_set_bf16",
     "train:\n  dtype: f32\n",
     {"bf16.enabled=true"},
     {"bad.yaml:2: train.dtype: train.dtype is f32 but bf16.enabled is true (--set "
      "bf16.enabled=true)"}},
    {"dtype_f32_vs_fp16",
     "train:\n  dtype: f32\nfp16:\n  enabled: true\n",
     {},
     {"train.dtype: train.dtype is f32 but fp16.enabled is true"}},
    // The dtype's own section turned off in so many words contradicts it too.
    {"dtype_section_off",
     "train:\n  dtype: f16\nfp16:\n  enabled: false\n",
     {},
     {"bad.yaml:2: train.dtype: train.dtype is f16 but fp16.enabled is false (",
      "bad.yaml:4); they must agree"}},
    {"loss_scale_tiny",
     "fp16:\n  enabled: true\n  loss_scale: 1.0e-300\n",
     {},
     {"bad.yaml:3: fp16.loss_scale: must be 0 (dynamic) or at least 2^-126"}},
    // No key takes an infinity (it would fail later, unlocated, or at the first step).
    {"infinite_clipping",
     "train:\n  gradient_clipping: .inf\n",
     {},
     {"bad.yaml:2: train.gradient_clipping: .inf is out of range: must be >= 0 and finite"}},
    {"nesterov_without_momentum",
     "train:\n  optimizer: sgd\n  nesterov: true\n  momentum: 0\n",
     {},
     {"train.nesterov: Nesterov momentum needs momentum > 0 and dampening 0"}},
    {"dtype_unknown",
     "train:\n  dtype: fp8\n",
     {},
     {"train.dtype: 'fp8' is not one of: f32, bf16, f16"}},
    {"set_unknown",
     "train:\n  steps: 10\n",
     {"train.stpes=5"},
     {"--set train.stpes=5: train.stpes: unknown key; did you mean 'train.steps'?"}},
    {"set_blank_key",
     "train:\n  steps: 10\n",
     {" \t=5"},
     {"--set  \t=5: expected key.path=value (e.g. --set train.lr=1e-3): the key is blank"}},
    // A path through a single value names where that value was set: the culprit may be an
    // earlier --set.
    {"set_through_a_value",
     "train:\n  steps: 10\n",
     {"train=3", "train.steps=1"},
     {"--set train.steps=1: cannot set 'train.steps': 'train' is a single value, not a mapping "
      "(set by --set train=3)"}},
    {"set_wrong_type",
     "train:\n  steps: 10\n",
     {"train.steps=abc"},
     {"--set train.steps=abc: train.steps: expected an integer, got 'abc'"}},
    // A value that YAML reads as syntax, leaving nothing ('%' a directive, '!' a tag, '&' an
    // anchor), is said to be that, not "the key has no value".
    {"set_directive",
     "train:\n  steps: 10\n",
     {"output_dir=%x"},
     {"--set output_dir=%x: the value '%x' reads as no value in YAML ('%' starts a directive)",
      "--set 'output_dir=\"%x\"'"}},
    {"set_tag",
     "train:\n  steps: 10\n",
     {"output_dir=!x"},
     {"--set output_dir=!x: the value '!x' reads as no value in YAML ('!' starts a tag)"}},
    {"set_anchor",
     "train:\n  steps: 10\n",
     {"output_dir=&x"},
     {"--set output_dir=&x: the value '&x' reads as no value in YAML ('&' starts an anchor)"}},
    {"set_alias",
     "train:\n  steps: 10\n",
     {"output_dir=*x"},
     {"YAML parse error: the referenced anchor is not defined", "quote it"}},
    {"set_unknown_section",
     "train:\n  steps: 10\n",
     {"trainn.steps=5"},
     {"trainn: unknown key; did you mean 'train'?"}},
    {"gpt_in_vqtok",
     "gpt:\n  n_layer: 2\n",
     {},
     {"bad.yaml:1: gpt: the gpt section is for vqgpt"},
     App::vqtok},
    // A constraint of two keys is located at the one a --set changed (the other is valid
    // as written), and names where the other was set.
    {"gpt_heads",
     "gpt:\n  n_head: 4\n  n_embd: 130\n  tokenizer_checkpoint: x\n",
     {},
     {"bad.yaml:3: gpt.n_embd: gpt.n_embd (130) must be a multiple of gpt.n_head (4, set at ",
      "bad.yaml:2)"},
     App::vqgpt},
    {"gpt_heads_set",
     "gpt:\n  n_head: 4\n  n_embd: 128\n  tokenizer_checkpoint: x\n",
     {"gpt.n_head=3"},
     {"--set gpt.n_head=3: gpt.n_head: gpt.n_head (3) must divide gpt.n_embd (128, set at ",
      "bad.yaml:3)"},
     App::vqgpt},
    {"gpt_embd_set",
     "gpt:\n  n_head: 4\n  n_embd: 128\n  tokenizer_checkpoint: x\n",
     {"gpt.n_embd=130"},
     {"--set gpt.n_embd=130: gpt.n_embd: gpt.n_embd (130) must be a multiple of gpt.n_head (4, "
      "set at ",
      "bad.yaml:2)"},
     App::vqgpt},
    {"gpt_heads_with_the_default_embd",
     "gpt:\n  n_head: 3\n  tokenizer_checkpoint: x\n",
     {},
     {"bad.yaml:2: gpt.n_head: gpt.n_head (3) must divide gpt.n_embd (128, default)"},
     App::vqgpt},
    // vqgpt's tokenizer is a replica; a config without gpt.tokenizer_checkpoint loads (the
    // commands that need one say so).
    {"gpt_replicates_the_tokenizer",
     "gpt:\n  n_layer: 2\nreplicated: [encoder]\n",
     {},
     {"bad.yaml:3: replicated: must name the frozen tokenizer (replicated: [tokenizer])"},
     App::vqgpt},
    {"gpt_replicated_by_set",
     "gpt:\n  n_layer: 2\nreplicated: [tokenizer]\n",
     {"replicated=[]"},
     {"--set replicated=[]: replicated: must name the frozen tokenizer"},
     App::vqgpt},
    {"gpt_block",
     "gpt:\n  block_size: 8\n  tokenizer_checkpoint: x\nreplicated: [tokenizer]\n",
     {},
     {"gpt.block_size: block_size (8) must hold BOS, a clip's codes and an end-of-row token per "
      "row (21)"},
     App::vqgpt},
};

void PrintTo(const BadCase& c, std::ostream* os) {
  *os << c.name;
}

class BadConfig : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadConfig, FailsWithMessage) {
  const BadCase& c = GetParam();
  const std::string path = test::write_temp_file("zt_config_test", c.name, "bad.yaml", c.yaml);
  const std::string msg = test::error_of([&] { load_app_config(path, c.overrides, c.app); });
  for (const auto& frag : c.expect) EXPECT_NE(msg.find(frag), std::string::npos) << msg;
}

// An enum value near none of the names gets no suggestion: 'foo' is no misspelled 'npy'.
TEST(BadConfigEnum, AValueNearNoNameGetsNoSuggestion) {
  const std::string path =
      test::write_temp_file("zt_config_test", "enum_far", "bad.yaml", "data:\n  kind: foo\n");
  const std::string msg = test::error_of([&] { load_app_config(path); });
  EXPECT_NE(msg.find("'foo' is not one of: synthetic, image_folder, npy"), std::string::npos)
      << msg;
  EXPECT_EQ(msg.find("did you mean"), std::string::npos) << msg;
}

// An unknown key near no key gets no suggestion: 'xyz' begins no key, however long the
// key that begins with 'sy'.
TEST(BadConfigKey, AKeyNearNoKeyGetsNoSuggestion) {
  EXPECT_EQ(close_name("xyz", {"stage", "sync_batchnorm"}), "");
  const std::string path = test::write_temp_file("zt_config_test", "key_far", "bad.yaml",
                                                 "zero_optimization:\n  xyz: 1\n");
  const std::string msg = test::error_of([&] { load_app_config(path); });
  EXPECT_NE(msg.find("zero_optimization.xyz: unknown key; 'zero_optimization' takes"),
            std::string::npos)
      << msg;
  EXPECT_EQ(msg.find("did you mean"), std::string::npos) << msg;
}

INSTANTIATE_TEST_SUITE_P(Table, BadConfig, ::testing::ValuesIn(kBadConfigs),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace zt::config
