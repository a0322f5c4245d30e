// What a checkpoint records of its run, and the check that reads it (see saved_run.h).
#include "apps/common/saved_run.h"

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "apps/common/run_checks.h"
#include "zero/checkpoint.h"

namespace zt::app {

namespace fs = std::filesystem;

namespace {

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

SavedRun read_saved_run(const std::string& dir_or_root) {
  SavedRun run;
  run.dir = zero::find_checkpoint(dir_or_root);
  const fs::path meta = fs::path(run.dir) / "meta.json";
  std::ifstream f(meta);
  ZT_CHECK(f.good(), "cannot read '", meta.string(), "'");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    ZT_FAIL("'", meta.string(), "' is malformed: ", e.what());
  }
  ZT_CHECK(j.is_object(), "'", meta.string(), "' is malformed: not a JSON object");
  const nlohmann::json user = j.value("user", nlohmann::json::object());
  if (user.is_object()) run.app = user.value("app", "");
  run.config_yaml = j.value("config_yaml", "");
  return run;
}

config::AppConfig saved_config(const SavedRun& run, config::App app) {
  const std::string meta = (fs::path(run.dir) / "meta.json").string();
  ZT_CHECK(!run.config_yaml.empty(), "'", meta, "' records no configuration");
  return config::parse_app_config(config::parse_yaml(run.config_yaml, meta), app);
}

void check_checkpoint_app(const std::string& dir_or_root, const std::string& app,
                          comm::Communicator& comm) {
  decided_by_rank0(comm, [&] {
    const std::string err = foreign_app(read_saved_run(dir_or_root), app);
    ZT_CHECK(err.empty(), err);
    return std::string();
  });
}

}  // namespace zt::app
