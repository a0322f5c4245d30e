// Output-path checks (output_paths.h).
#include "apps/common/output_paths.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "apps/common/run_checks.h"
#include "core/error.h"
#include "core/text_file.h"
#include "data/dataset.h"
#include "zero/checkpoint_dir.h"

namespace zt::app {

namespace fs = std::filesystem;

namespace {

// What `dir` is, when it is part of saved checkpoints: "" when it is not.
std::string checkpoint_part(const fs::path& dir) {
  std::error_code ec;
  if (fs::is_regular_file(dir / "latest", ec)) return "a checkpoints folder (it holds 'latest')";
  if (fs::is_regular_file(dir / "meta.json", ec) &&
      fs::is_regular_file(dir / zero::ckpt::rank_file(0), ec))
    return "a checkpoint (it holds meta.json and " + zero::ckpt::rank_file(0) + ")";
  return "";
}

// The nearest of `path` and its ancestors that is part of saved checkpoints, with what it
// is; {"", ""} when none is.
std::pair<std::string, std::string> inside_checkpoints(const fs::path& path) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(path), ec);
  if (ec) p = fs::absolute(path);
  for (; !p.empty(); p = p.parent_path()) {
    if (std::string what = checkpoint_part(p); !what.empty()) return {p.string(), what};
    if (p == p.root_path()) break;
  }
  return {"", ""};
}

// Errors unless `path` lies outside every folder of `inputs` (their data: a write there
// would add to it or replace a file of it).
void check_outside_inputs(const std::string& option, const std::string& path,
                          const std::vector<std::string>& inputs) {
  std::error_code ec;
  for (const std::string& in : inputs)
    ZT_CHECK(in.empty() || !fs::is_directory(in, ec) || !within(path, in), option, " '", path,
             "' is or lies in '", in,
             "', a folder this command reads (its data): writing there would change what it "
             "reads; pass a path outside it");
}

// Checks that `path`, given as `option`, can be written at `folder`: a probe file is
// written and removed in the nearest of `folder` and its parents that exists (those below
// it are made when the output is written, so a command that fails before then leaves no
// empty folders behind).
void check_can_write_in(const std::string& option, const std::string& path, fs::path folder) {
  std::error_code ec;
  while (!fs::exists(folder, ec) && folder.has_relative_path()) folder = folder.parent_path();
  ZT_CHECK(fs::is_directory(folder, ec), option, " '", path, "' cannot be written: '",
           folder.string(), "' is a file, not a folder; pass a path in a writable folder");
  const fs::path probe = folder / (".zt-probe-" + std::to_string(::getpid()));
  std::FILE* f = std::fopen(probe.c_str(), "w");
  const int err = errno;
  if (f) {
    std::fclose(f);
    fs::remove(probe, ec);
    return;
  }
  ZT_FAIL(option, " '", path, "' cannot be written: ", std::strerror(err), " (in '",
          folder.string(), "'); pass a path in a writable folder");
}

}  // namespace

std::vector<std::string> config_inputs(const config::AppConfig& cfg) {
  std::vector<std::string> inputs = {cfg.source, cfg.deepspeed_config};
  if (cfg.data.kind != data::DataKind::synthetic)
    inputs.insert(inputs.end(), {cfg.data.path, cfg.data.eval_path});
  return inputs;
}

bool is_run_file_name(const std::string& name) {
  return name == "metrics.jsonl" || name == "curves.svg" || name == ".lock" ||
         name.rfind("recon_step_", 0) == 0;
}

bool within(const fs::path& path, const fs::path& dir) {
  const fs::path rel = fs::weakly_canonical(fs::absolute(path))
                           .lexically_relative(fs::weakly_canonical(fs::absolute(dir)));
  return !rel.empty() && *rel.begin() != "..";
}

void check_output_file(const std::string& option, const std::string& path,
                       const std::vector<std::string>& inputs) {
  if (path.empty()) return;
  std::error_code ec;
  ZT_CHECK(!fs::is_directory(path, ec), option, " '", path,
           "' is a folder; pass the file to write (a path in that folder, or another)");
  // 'out/' (or 'out/.') names a folder whether or not it is there yet: the write, at the
  // end of the work, would fail on it.
  const std::string last = fs::path(path).filename().string();
  ZT_CHECK(!last.empty() && last != "." && last != "..", option, " '", path,
           "' names a folder; pass the file to write (a path in that folder, or another)");
  // A link is followed: the file it leads to is the one written, and the one checked.
  const std::string out = write_target(path);
  const std::string through = out == path ? "" : " (a link to '" + out + "')";
  const std::string kind = not_a_regular_file(out);
  ZT_CHECK(kind.empty(), option, " '", path, "'", through, " is ", kind,
           ", not a regular file: the output would replace it with one; pass a file's path");
  const bool exists = fs::exists(out, ec);
  const fs::path real = fs::weakly_canonical(fs::absolute(out), ec);
  for (const std::string& in : inputs) {
    if (in.empty()) continue;
    // The same path (also one not written yet), or another name of the same file.
    const bool same = real == fs::weakly_canonical(fs::absolute(in), ec) ||
                      (exists && fs::equivalent(out, in, ec));
    ZT_CHECK(!same, option, " '", path, "'", through, " is a file this command reads ('", in,
             "'): writing it would destroy it; pass another file");
  }
  const auto [where, what] = inside_checkpoints(
      fs::path(out).parent_path().empty() ? fs::path(".") : fs::path(out).parent_path());
  ZT_CHECK(where.empty(), option, " '", path, "'", through, " lies in ", what, ", '", where,
           "': writing there would damage what was saved; pass a path outside it");
  check_outside_inputs(option, out, inputs);
  const std::string name = fs::path(out).filename().string();
  // A run's own files: its record, its lock, and what it wrote beside its metrics.jsonl
  // (reconstruction images, the TensorBoard folder).
  const fs::path folder = fs::absolute(out).parent_path();
  const bool in_run = fs::exists(folder / "metrics.jsonl", ec);
  const bool in_tb =
      folder.filename() == "tb" && fs::exists(folder.parent_path() / "metrics.jsonl", ec);
  // An image named like a run's is one only beside a run's record.
  const bool image = name.rfind("recon_step_", 0) == 0;
  ZT_CHECK(!(exists && is_run_file_name(name) && (in_run || !image)) && !in_tb, option, " '", path,
           "'", through, " is ",
           in_tb ? "in a training run's TensorBoard folder" : "a training run's " + name,
           ": writing it would destroy that run's record; pass another file");
}

void check_output_writable(const std::string& option, const std::string& path,
                           const std::vector<std::string>& inputs) {
  if (path.empty()) return;
  check_output_file(option, path, inputs);
  check_can_write_in(option, path, fs::absolute(write_target(path)).parent_path());
}

void make_parent_folders(const std::string& path) {
  const fs::path folder = fs::absolute(path).parent_path();
  std::error_code ec;
  fs::create_directories(folder, ec);
  ZT_CHECK(!ec, "cannot make the folder '", folder.string(), "' for '", path, "': ", ec.message());
}

void check_output_folder(const std::string& option, const std::string& path,
                         const std::vector<std::string>& inputs) {
  if (path.empty()) return;
  std::error_code ec;
  ZT_CHECK(!fs::exists(path, ec) || fs::is_directory(path, ec), option, " '", path,
           "' is a file; pass a folder");
  const auto [where, what] = inside_checkpoints(path);
  ZT_CHECK(where.empty(), option, " '", path, "' is or lies in ", what, ", '", where,
           "': writing there would mix with what was saved, and pruning old checkpoints "
           "would delete it; pass a folder outside it");
  check_outside_inputs(option, path, inputs);
  check_can_write_in(option, path, fs::absolute(path));
}

void check_on_rank0(comm::Communicator& comm, const std::function<void()>& check) {
  decided_by_rank0(comm, [&] {
    check();
    return std::string();
  });
}

}  // namespace zt::app
