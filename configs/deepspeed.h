// DeepSpeed users at home: a DeepSpeed JSON config (`--deepspeed ds_config.json`, or
// `deepspeed_config: path` in the app's YAML) mapped onto zt's structs. The YAML still
// describes the model, the data and the run; the JSON's keys take over the batch,
// accumulation, clipping, optimizer, schedule, ZeRO and mixed-precision settings (each
// YAML value replaced is reported). Every key is mapped or rejected with its key path;
// README's "DeepSpeed configs" table lists the mapping.
#pragma once

#include <string>
#include <vector>

#include "configs/app_config.h"
#include "configs/config.h"

namespace zt::config {

/// The file's text as it is (a checkpoint records it); an error naming it if unreadable.
std::string read_deepspeed_file(const std::string& path);
/// Parses a DeepSpeed config's `text` (read_deepspeed_file) as DeepSpeed does (with hjson):
/// JSON, plus `#`, `//` and `/* */` comments, trailing commas, a line break in place of the
/// comma between two members, and single-quoted and '''multi-line''' strings; a key given twice is
/// an error, and so are, at their line and column, a key without quotes and without a blank after
/// its ':' (hjson's {lr:0.1}) and a value without quotes that the line goes on after (hjson reads
/// it to the end of the line, a comment or comma included). Messages name `path`.
Node parse_deepspeed_text(const std::string& text, const std::string& path);

/// Applies the train keys of the DeepSpeed config `ds` (parse_deepspeed_text) to `c`, parsed from
/// the YAML tree `yaml`: the JSON wins, and each YAML train key it replaces with another value adds
/// a warning naming both places (its zero_optimization, bf16 and fp16 sections replace the YAML's
/// the same way, read by parse_app_config). Keys DeepSpeed has that zt does not implement are
/// errors naming the key path; keys that change nothing add a warning.
void apply_deepspeed(const Node& ds, const Node& yaml, AppConfig& c);

/// DeepSpeed's rule train_batch_size = micro batch x accumulation x world size, checked
/// when the config gave train_batch_size (the world size is known only at launch).
void check_world_size(const AppConfig& c, int world_size);

}  // namespace zt::config
