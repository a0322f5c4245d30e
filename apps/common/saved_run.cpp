// What a checkpoint records of its run, and the checks that read it (see saved_run.h).
#include "apps/common/saved_run.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <type_traits>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "apps/common/run_checks.h"
#include "core/tensor.h"
#include "core/text_file.h"
#include "nn/json_text.h"
#include "nn/safetensors.h"
#include "zero/checkpoint.h"

namespace zt::app {

namespace fs = std::filesystem;

namespace {

template <typename T>
std::string text_of(const T& v) {
  std::ostringstream os;
  if constexpr (std::is_same_v<T, bool>) {
    os << (v ? "true" : "false");
  } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
    os << shape_str(v);
  } else {
    os << v;
  }
  return os.str();
}

// Appends {key, before, after} to `out` when the values differ.
template <typename T>
void compare(std::vector<KeyChange>& out, const std::string& key, const T& before, const T& after) {
  if (before != after) out.push_back({key, text_of(before), text_of(after)});
}

// key -> value of flatten_config's "key=value" lines whose key lies in one of `sections`.
std::map<std::string, std::string> section_values(const config::Node& root,
                                                  const std::vector<std::string>& sections) {
  std::map<std::string, std::string> m;
  std::istringstream in(flatten_config(root));
  for (std::string line; std::getline(in, line);) {
    const size_t eq = line.find('=');
    const std::string key = line.substr(0, eq);
    const std::string section = key.substr(0, key.find('.'));
    if (std::find(sections.begin(), sections.end(), section) != sections.end())
      m[key] = eq == std::string::npos ? "" : line.substr(eq + 1);
  }
  return m;
}

// Whether `key` ("train.betas.0") is one of `keys` or an element of one.
bool listed(const std::string& key, const std::vector<std::string>& keys) {
  return std::any_of(keys.begin(), keys.end(),
                     [&](const std::string& k) { return key == k || key.rfind(k + ".", 0) == 0; });
}

// The train.*, loss.* and data.* keys whose text differs from `saved` to `now` (numbers
// compare as numbers), but for resume_ignored_keys(); a key one of them lacks is "(not set)".
std::vector<KeyChange> settings_changes(const config::Node& saved, const config::Node& now) {
  const std::vector<std::string> sections = {"train", "loss", "data"};
  const auto before = section_values(saved, sections), after = section_values(now, sections);
  std::map<std::string, KeyChange> changes;
  auto add = [&](const std::string& key, const std::string& b, const std::string& a) {
    if (!listed(key, resume_ignored_keys()) && !same_config_value(b, a)) changes[key] = {key, b, a};
  };
  for (const auto& [key, v] : before) {
    const auto it = after.find(key);
    add(key, v, it == after.end() ? "(not set)" : it->second);
  }
  for (const auto& [key, v] : after)
    if (!before.count(key)) add(key, "(not set)", v);
  std::vector<KeyChange> out;
  for (auto& [key, c] : changes) out.push_back(std::move(c));
  return out;
}

// The training settings a DeepSpeed JSON may set, as resolved: a run configured by one
// differs from its checkpoint there, not (only) in the YAML's train section.
std::vector<KeyChange> train_changes(const config::TrainConfig& before,
                                     const config::TrainConfig& after) {
  std::vector<KeyChange> d;
  compare(d, "train.batch", before.batch, after.batch);
  compare(d, "train.gradient_accumulation_steps", before.gradient_accumulation_steps,
          after.gradient_accumulation_steps);
  compare(d, "train.optimizer", std::string(config::optimizer_name(before.optimizer)),
          std::string(config::optimizer_name(after.optimizer)));
  compare(d, "train.lr", before.lr, after.lr);
  compare(d, "train.schedule",
          config::schedule_name(before.schedule) +
              std::string(before.deepspeed_schedule ? " (DeepSpeed's)" : ""),
          config::schedule_name(after.schedule) +
              std::string(after.deepspeed_schedule ? " (DeepSpeed's)" : ""));
  compare(d, "train.warmup", before.warmup, after.warmup);
  compare(d, "train.min_lr", before.min_lr, after.min_lr);
  compare(d, "train.steps", before.steps, after.steps);
  compare(d, "train.weight_decay", before.weight_decay, after.weight_decay);
  compare(d, "train.betas[0]", before.betas[0], after.betas[0]);
  compare(d, "train.betas[1]", before.betas[1], after.betas[1]);
  compare(d, "train.eps", before.eps, after.eps);
  compare(d, "train.momentum", before.momentum, after.momentum);
  compare(d, "train.dampening", before.dampening, after.dampening);
  compare(d, "train.nesterov", before.nesterov, after.nesterov);
  compare(d, "train.gradient_clipping", before.gradient_clipping, after.gradient_clipping);
  return d;
}

// vqgpt's GPT keys (vocab_size and block_size as resolved): all but tokenizer_checkpoint,
// which a resume does not read (the checkpoint holds the tokenizer).
std::vector<KeyChange> gpt_changes(const config::GptConfig& before,
                                   const config::GptConfig& after) {
  std::vector<KeyChange> d;
  compare(d, "gpt.vocab_size", before.vocab_size, after.vocab_size);
  compare(d, "gpt.n_layer", before.n_layer, after.n_layer);
  compare(d, "gpt.n_head", before.n_head, after.n_head);
  compare(d, "gpt.n_embd", before.n_embd, after.n_embd);
  compare(d, "gpt.block_size", before.block_size, after.block_size);
  compare(d, "gpt.dropout", before.dropout, after.dropout);
  compare(d, "gpt.tie_embeddings", before.tie_embeddings, after.tie_embeddings);
  compare(d, "gpt.fused_qkv", before.fused_qkv, after.fused_qkv);
  return d;
}

// The keys that shape the model a checkpoint holds, from `saved` to `now`. vqgpt: the
// frozen tokenizer's weight-shaping model.* keys (its dropout and initialization play no
// part), the GPT's keys and the clip size data.frames/height/width, which fixes the token
// layout (rows, row ends, length) the GPT learned; gpt.dropout only for a resume. vqtok:
// every model.* key for a resume, the weight-shaping ones for a load of the weights.
std::vector<KeyChange> model_key_changes(const config::AppConfig& saved,
                                         const config::AppConfig& now, bool resume) {
  const bool gpt = saved.gpt && now.gpt;
  std::vector<KeyChange> d = model_changes(saved.model, now.model, /*weights_only=*/gpt || !resume);
  if (!gpt) return d;
  for (KeyChange& c : gpt_changes(*saved.gpt, *now.gpt))
    if (resume || c.key != "gpt.dropout") d.push_back(std::move(c));
  compare(d, "data.frames", saved.data.frames, now.data.frames);
  compare(d, "data.height", saved.data.height, now.data.height);
  compare(d, "data.width", saved.data.width, now.data.width);
  return d;
}

// Whether paths `a` and `b` name one file or folder (written alike, or resolving alike).
bool same_path(const std::string& a, const std::string& b) {
  if (a == b) return true;
  std::error_code ec, ec2;
  const fs::path x = fs::weakly_canonical(fs::absolute(a), ec),
                 y = fs::weakly_canonical(fs::absolute(b), ec2);
  return !ec && !ec2 && x == y;
}

// The error for a checkpoint of another app, or "" when it is `app`'s (or says nothing).
std::string foreign_app(const SavedRun& run, const std::string& app) {
  if (run.app.empty() || run.app == app) return "";
  std::string s = "'" + run.dir + "' is a " + run.app + " checkpoint; " + app +
                  " needs one of its own (" + app +
                  " train writes them into output_dir/checkpoints";
  if (app == "vqgpt" && run.app == "vqtok")
    s += "; a vqtok checkpoint is a tokenizer: vqgpt train reads one as gpt.tokenizer_checkpoint "
         "or --tokenizer";
  return s + ")";
}

}  // namespace

std::string run_checkpoints(const std::string& dir) {
  const std::string run = (fs::path(dir) / "checkpoints").string();
  const bool is_run = !dir.empty() && fs::is_directory(dir) && !zero::has_checkpoint(dir) &&
                      zero::has_checkpoint(run);
  return is_run ? run : "";
}

std::string run_folder_hint(const std::string& dir) {
  const std::string run = run_checkpoints(dir);
  return run.empty() ? "" : " ('" + run + "' holds this run's checkpoints: pass that folder)";
}

SavedRun read_saved_run(const std::string& dir_or_root) {
  SavedRun run;
  run.dir = zero::find_checkpoint(dir_or_root, &run.note);
  const fs::path meta = fs::path(run.dir) / "meta.json";
  const std::string odd = not_a_regular_file(meta.string());  // a FIFO's open would wait forever
  ZT_CHECK(odd.empty(), "'", meta.string(), "' is ", odd,
           ", not the file of a checkpoint's meta.json (a damaged checkpoint directory?)");
  std::ifstream f(meta);
  ZT_CHECK(f.good(), "cannot read '", meta.string(), "'");
  std::stringstream contents;
  contents << f.rdbuf();
  nn::check_json_depth(contents.view(), zero::kMaxMetaDepth, "'" + meta.string() + "'",
                       "a meta.json nests 3");
  try {  // JSON errors here: a meta.json that does not parse, or keys of the wrong type
    const nlohmann::json j = nlohmann::json::parse(contents.view());
    ZT_CHECK(j.is_object(), "'", meta.string(), "' is malformed: not a JSON object");
    // A string field, "" when absent; of another type, an error naming it.
    auto text = [&](const nlohmann::json& o, const char* key, const char* path) -> std::string {
      const auto it = o.find(key);
      if (it == o.end()) return "";
      ZT_CHECK(it->is_string(), "'", meta.string(), "' is malformed: ", path, " is ",
               nn::json_brief(*it, 80), ", not a string");
      return it->get<std::string>();
    };
    if (const auto user = j.find("user"); user != j.end() && user->is_object()) {
      run.app = text(*user, "app", "user.app");
      run.deepspeed_json = text(*user, "deepspeed_json", "user.deepspeed_json");
    }
    run.config_yaml = text(j, "config_yaml", "config_yaml");
    if (const auto ws = j.find("world_size"); ws != j.end() && ws->is_number_integer())
      run.world_size = ws->get<int64_t>();
  } catch (const nlohmann::json::exception& e) {
    ZT_FAIL("'", meta.string(), "' is malformed: ", e.what());
  }
  return run;
}

config::AppConfig saved_config(const SavedRun& run, config::App app) {
  const std::string meta = (fs::path(run.dir) / "meta.json").string();
  ZT_CHECK(!run.config_yaml.empty(), "'", meta, "' records no configuration");
  const config::Node root = config::parse_yaml(run.config_yaml, meta);
  if (run.deepspeed_json.empty()) return config::parse_app_config(root, app);
  // The DeepSpeed config as it was, through a file of this process's own (the parser reads
  // deepspeed_config as a path). That file is gone once parsed: what names it (errors,
  // warnings, where train_batch_size was set) names the record in meta.json instead.
  const fs::path ds =
      fs::temp_directory_path() / ("zt_saved_deepspeed_" + std::to_string(::getpid()) + ".json");
  const std::string recorded = meta + ": user.deepspeed_json";
  auto as_recorded = [&](std::string text) {
    for (size_t at = text.find(ds.string()); at != std::string::npos;
         at = text.find(ds.string(), at + recorded.size()))
      text.replace(at, ds.string().size(), recorded);
    return text;
  };
  write_text_atomically(ds.string(), run.deepspeed_json);
  struct Remove {
    fs::path p;
    ~Remove() {
      std::error_code ec;
      fs::remove(p, ec);
    }
  } remove{ds};
  config::apply_override(
      root, config::Override("deepspeed_config=" + config::yaml_quoted(ds.string()), recorded));
  config::AppConfig cfg;
  try {
    cfg = config::parse_app_config(root, app);
  } catch (const Error& e) {
    throw Error(as_recorded(e.what()));
  }
  cfg.deepspeed_config = recorded;
  cfg.train_batch_size_where = as_recorded(cfg.train_batch_size_where);
  for (auto* said : {&cfg.warnings, &cfg.training_warnings})
    for (std::string& w : *said) w = as_recorded(w);
  return cfg;
}

std::string describe(const std::vector<KeyChange>& changes, const std::string& before_name,
                     const std::string& after_name) {
  std::string s;
  for (const KeyChange& c : changes)
    s += (s.empty() ? "" : ", ") + c.key + " (" + c.before + " in " + before_name + ", " + c.after +
         " in " + after_name + ")";
  return s;
}

std::vector<KeyChange> model_changes(const config::ModelConfig& before,
                                     const config::ModelConfig& after, bool weights_only) {
  std::vector<KeyChange> d;
  config::for_each_model_key([&](const char* key, auto member, auto, auto, bool shapes_weights) {
    if (shapes_weights || !weights_only)
      compare(d, std::string("model.") + key, before.*member, after.*member);
  });
  return d;
}

void check_checkpoint_app(const std::string& dir_or_root, const std::string& app,
                          comm::Communicator& comm, const config::AppConfig* cfg,
                          const std::string& dtype_advice) {
  const std::string note = decided_by_rank0(comm, [&] {
    const SavedRun run = read_saved_run(dir_or_root);
    const std::string err = foreign_app(run, app);
    ZT_CHECK(err.empty(), err);
    if (!cfg || run.config_yaml.empty()) return run.note;
    config::AppConfig saved;
    try {
      saved = saved_config(run, config::App::any);
    } catch (const std::exception&) {
      return run.note;  // a config this build cannot read: the tensors are compared instead
    }
    const std::vector<KeyChange> model = model_key_changes(saved, *cfg, /*resume=*/false);
    ZT_CHECK(model.empty(), "this config describes another model than the checkpoint '", run.dir,
             "' holds: ", describe(model, "the checkpoint", "this config"),
             ". Pass the config it was trained with (its meta.json records it as config_yaml), "
             "or set these keys to the checkpoint's values");
    // Its parameters are stored in their training precision: a load into another fails.
    ZT_CHECK(saved.train.dtype == cfg->train.dtype, "the checkpoint '", run.dir, "' trained in ",
             saved.train.dtype, " and this config reads it in ", cfg->train.dtype,
             " (train.dtype, or the bf16/fp16 sections): set train.dtype: ", saved.train.dtype,
             " to read it", dtype_advice);
    return run.note;
  });
  if (!note.empty() && comm.rank() == 0)
    std::fprintf(stderr, "%s: note: %s\n", app.c_str(), note.c_str());
}

// Whether checkpoint `run` holds the ranks' random generator states (resume_training
// restores them); false when its replicated file does not read.
static bool holds_rng_state(const SavedRun& run) {
  try {
    return nn::SafetensorsFile((fs::path(run.dir) / "replicated.safetensors").string())
        .contains("state/rng_state");
  } catch (const std::exception&) {
    return false;
  }
}

void check_resume_config(const config::AppConfig& cfg, const std::string& dir,
                         const std::string& app, const std::string& command,
                         comm::Communicator& comm, bool quiet) {
  const std::string note = decided_by_rank0(comm, [&]() -> std::string {
    const SavedRun run = read_saved_run(dir);
    const std::string other_app = foreign_app(run, app);
    ZT_CHECK(other_app.empty(), other_app);
    // Why `dir` (a root) resumes from another checkpoint than its `latest` names.
    std::string picked = run.note.empty() ? "" : command + ": note: " + run.note + "\n";
    if (run.config_yaml.empty()) return picked;  // saved without it: nothing to compare
    config::AppConfig saved;
    try {
      saved = saved_config(run, config::App::any);
    } catch (const std::exception& e) {
      return picked + command + ": note: the configuration '" + run.dir +
             "' was saved with does not read here, so it was not compared with this one (" +
             e.what() + ")\n";
    }
    const std::vector<KeyChange> model = model_key_changes(saved, cfg, /*resume=*/true);
    ZT_CHECK(model.empty(), command, ": this config describes another model than the checkpoint '",
             run.dir, "' holds: ", describe(model, "the checkpoint", "this config"),
             ". A resume continues the same model: set these keys back to the checkpoint's "
             "values (its meta.json records its config as config_yaml), or train this model "
             "as a new run (another output_dir, or --overwrite)");
    // The parameters are stored in the checkpoint's precision; a load into another fails.
    ZT_CHECK(saved.train.dtype == cfg.train.dtype, command, ": the checkpoint '", run.dir,
             "' trained in ", saved.train.dtype, " and this config trains in ", cfg.train.dtype,
             " (train.dtype, or the bf16/fp16 sections). A resume continues in the checkpoint's "
             "precision: set train.dtype: ",
             saved.train.dtype, ", or train in ", cfg.train.dtype,
             " as a new run (another output_dir, or --overwrite)");
    // The optimizer's state is loaded as saved: Adam's or AdamW's moments (the load refuses
    // another optimizer's: the weight decay differs), or SGD's momentum buffers (none at
    // momentum 0).
    auto state_kind = [](const config::TrainConfig& t) {
      if (t.optimizer == config::Optimizer::adam) return std::string("Adam's moments");
      if (t.optimizer == config::Optimizer::adamw) return std::string("AdamW's moments");
      return std::string(t.momentum != 0 ? "SGD's momentum buffers" : "no state (SGD, momentum 0)");
    };
    ZT_CHECK(state_kind(saved.train) == state_kind(cfg.train), command, ": the checkpoint '",
             run.dir, "' holds ", state_kind(saved.train), " and this config's optimizer keeps ",
             state_kind(cfg.train), " (",
             saved.train.optimizer != cfg.train.optimizer ? "train.optimizer" : "train.momentum",
             "). A resume continues the optimizer's state: set "
             "them back, or train with this optimizer as a new run (another output_dir, or "
             "--overwrite)");
    std::vector<KeyChange> changed = settings_changes(saved.root, cfg.root);
    // train.seed seeds the initial weights (loaded instead) and each rank's dropout
    // generator, whose states the checkpoint restores at the world size it was saved on
    // (when it holds them: older checkpoints do not).
    if (run.world_size == comm.size() && holds_rng_state(run))
      std::erase_if(changed, [](const KeyChange& c) { return c.key == "train.seed"; });
    if (!saved.deepspeed_config.empty() || !cfg.deepspeed_config.empty()) {
      // The JSON's settings are in neither YAML tree: compare what they resolved to.
      std::map<std::string, KeyChange> by_key;
      for (KeyChange& c : changed) by_key[c.key] = std::move(c);
      for (KeyChange& c : train_changes(saved.train, cfg.train))
        by_key.try_emplace(c.key, std::move(c));
      changed.clear();
      for (auto& [key, c] : by_key) changed.push_back(std::move(c));
    }
    // vqgpt: the checkpoint holds the tokenizer it trained with; another one named now (the
    // caller's cfg names the one given by --tokenizer or the config) is not read, which a run
    // that meant to switch tokenizers must be told.
    if (saved.gpt && cfg.gpt &&
        !same_path(saved.gpt->tokenizer_checkpoint, cfg.gpt->tokenizer_checkpoint))
      picked += command + ": note: the tokenizer named here, '" + cfg.gpt->tokenizer_checkpoint +
                "', is not the one the checkpoint's config records (gpt.tokenizer_checkpoint: '" +
                saved.gpt->tokenizer_checkpoint +
                "'), and a resume does not read it: the checkpoint holds the tokenizer it "
                "trained with; to train on another tokenizer, start a new run (another "
                "output_dir, or --overwrite)\n";
    if (changed.empty()) return picked;
    return picked + command + ": note: resuming with settings that differ from the checkpoint's: " +
           describe(changed, "the checkpoint", "this config") +
           "; the run goes on with this config's values\n";
  });
  if (comm.rank() == 0 && !quiet && !note.empty()) std::fprintf(stderr, "%s", note.c_str());
}

const std::vector<std::string>& resume_ignored_keys() {
  static const std::vector<std::string> keys = {"train.resume",
                                                "train.device",
                                                "train.tf32",
                                                "train.cudnn_benchmark",
                                                "train.cudnn_deterministic",
                                                "train.gemm_benchmark",
                                                "train.attention",
                                                "train.flash_backward",
                                                "train.cuda_graph",
                                                "train.activation_checkpointing",
                                                "train.log_every",
                                                "train.tensorboard",
                                                "train.trace",
                                                "train.trace_steps",
                                                "train.eval_every",
                                                "train.eval_batches",
                                                "train.checkpoint_every",
                                                "train.keep_checkpoints",
                                                "data.workers",
                                                "data.prefetch",
                                                "data.timeout"};
  return keys;
}

}  // namespace zt::app
