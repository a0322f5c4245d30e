// Start-of-run and non-finite checks of the training apps (see run_checks.h).
#include "apps/common/run_checks.h"

#include "apps/common/output_paths.h"
#include "apps/common/saved_run.h"
#include "configs/deepspeed.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "core/ops.h"
#include "core/text_file.h"
#include "data/image_folder.h"
#include "zero/checkpoint.h"
#include "zero/checkpoint_dir.h"
#include "zero/param.h"

namespace zt::app {

namespace fs = std::filesystem;

std::string decided_by_rank0(comm::Communicator& comm, const std::function<std::string()>& decide) {
  std::string mine;
  if (comm.rank() == 0) {
    try {
      mine = "ok\n" + decide();
    } catch (const std::exception& e) {
      mine = std::string("error\n") + e.what();
    }
  }
  const std::string all = comm.all_gather_bytes(mine)[0];
  const size_t nl = all.find('\n');
  if (all.compare(0, nl, "ok") != 0) throw comm::AgreedError(all.substr(nl + 1), comm.rank());
  return all.substr(nl + 1);
}

namespace {

// What --overwrite sets aside, until the new run has taken a step: the results in
// output_dir/.overwritten, the checkpoints in <root>/.overwritten (on the checkpoints' own
// filesystem: a root that links to another disk stays a link, and what it holds there is
// what goes). Dot-names are not checkpoints to the readers of a root.
fs::path set_aside_dir(const fs::path& parent) {
  return parent / ".overwritten";
}

// Moves every entry of `from` but `into` (created) into `into`.
void move_entries(const fs::path& from, const fs::path& into) {
  fs::create_directories(into);
  for (const auto& e : fs::directory_iterator(from))
    if (e.path() != into) fs::rename(e.path(), into / e.path().filename());
}

// The results of a training run in output_dir besides `root` (its checkpoints): metrics,
// curves, reconstruction images and TensorBoard events. An empty metrics.jsonl is no result:
// a run that failed before its first record (bad data, a diverged first step) left it, and
// its tb/ then holds no event either (each one mirrors a record).
std::vector<fs::path> result_files(const fs::path& output_dir) {
  std::error_code ec;
  const fs::path metrics = output_dir / "metrics.jsonl";
  const bool recorded = !fs::is_regular_file(metrics, ec) || fs::file_size(metrics, ec) != 0;
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(output_dir, ec)) {
    const std::string n = e.path().filename().string();
    if (((n == "metrics.jsonl" || n == "tb") && recorded) || n == "curves.svg" ||
        (n.rfind("recon_step_", 0) == 0 && e.path().extension() == ".png"))
      out.push_back(e.path());
  }
  return out;
}

// The names of result_files, for messages: "curves.svg, metrics.jsonl", "" when none.
std::string result_names(const fs::path& output_dir) {
  std::vector<std::string> names;
  for (const fs::path& p : result_files(output_dir)) names.push_back(p.filename().string());
  std::sort(names.begin(), names.end());
  return names.empty() ? "" : list_names(names, 3);
}

// --overwrite: moves the earlier run's checkpoints (`root`) and result files into
// set_aside_dir, whence finish_start deletes them once the new run has taken a step, and
// restore_set_aside puts them back if it never did.
std::string set_aside(const std::string& output_dir, const fs::path& root) {
  const fs::path dir = set_aside_dir(output_dir), inner = set_aside_dir(root);
  // Older ones the start could not put back (see restore_set_aside).
  fs::remove_all(dir);
  fs::remove_all(inner);
  fs::create_directories(dir);
  if (fs::is_directory(root)) move_entries(root, inner);
  for (const fs::path& p : result_files(output_dir)) fs::rename(p, dir / p.filename());
  return dir.string();
}

// An --overwrite run that stopped before its first step left the earlier run's results in
// set_aside_dir: they go back where they were, replacing what the failed start wrote,
// unless that start got as far as saving checkpoints (then they stay, with a note).
void restore_set_aside(const std::string& output_dir, const fs::path& root, const char* app) {
  const fs::path dir = set_aside_dir(output_dir), inner = set_aside_dir(root);
  if (!fs::is_directory(dir) && !fs::is_directory(inner)) return;
  if (zero::holds_checkpoints(root.string())) {
    std::fprintf(stderr,
                 "%s: note: '%s' and '%s' hold results an --overwrite run set aside; they are "
                 "deleted when the next --overwrite run starts (move them elsewhere to keep "
                 "them)\n",
                 app, dir.string().c_str(), inner.string().c_str());
    return;
  }
  if (fs::is_directory(inner)) {
    for (const auto& e : fs::directory_iterator(root))
      if (e.path() != inner) fs::remove_all(e.path());
    move_entries(inner, root);
    fs::remove(inner);
  }
  for (const fs::path& p : result_files(output_dir)) fs::remove_all(p);
  // (Checkpoints set aside whole by an earlier version of zt go back whole.)
  if (fs::exists(dir / root.filename())) fs::remove_all(root);
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    fs::rename(e.path(), fs::path(output_dir) / e.path().filename());
  fs::remove(dir, ec);
  std::fprintf(stderr,
               "%s: put back the results of the run in %s that an --overwrite run set "
               "aside and stopped before its first step\n",
               app, output_dir.c_str());
}

// Where a resume from `dir_or_root` starts: a checkpoint directory itself; for a root of
// step folders, as --resume reads one, the newest complete checkpoint
// (zero::find_resume_point: a damaged one `latest` names is passed over); for a root whose
// `latest` names another tag, that checkpoint. Throws when it names none.
zero::ResumePoint resume_point_of(const std::string& dir_or_root) {
  zero::ResumePoint rp;
  rp.dir = zero::find_checkpoint(dir_or_root, &rp.note);
  const bool root = !fs::exists(fs::path(dir_or_root) / "meta.json");
  if (root && zero::ckpt::tag_step(fs::path(rp.dir).filename().string()))
    rp = zero::find_resume_point(dir_or_root);
  return rp;
}

// The checkpoint a resume from `dir_or_root` starts from (resume_point_of), or "" when it
// names none.
std::string checkpoint_of(const std::string& dir_or_root) {
  try {
    return fs::weakly_canonical(resume_point_of(dir_or_root).dir).string();
  } catch (const std::exception&) {
    return "";
  }
}

// The checkpoint a run in `output_dir` started from with train.resume: DIR, kept in this
// file there, so that a launcher's restart of that command line (--resume with the same
// DIR) after a stop before the first save knows the results it finds as its own.
fs::path started_from_file(const std::string& output_dir) {
  return fs::path(output_dir) / ".started_from";
}

std::string started_from(const std::string& output_dir) {
  const fs::path path = started_from_file(output_dir);
  const std::string odd = not_a_regular_file(path.string());  // a FIFO's open would wait
  ZT_CHECK(odd.empty(), "'", path.string(), "' (the checkpoint a run there started from) is ", odd,
           ", not a file zt wrote; remove it");
  std::ifstream f(path);
  std::string from;
  std::getline(f, from);
  return from;
}

void flatten(const config::Node& n, std::vector<std::string>& out) {
  if (n.is_map()) {
    for (const std::string& k : n.keys()) flatten(n.get(k), out);
  } else if (n.is_sequence()) {
    if (n.size() == 0) out.push_back(n.path() + "=[]");
    for (size_t i = 0; i < n.size(); ++i) flatten(n.at(i), out);
  } else {
    out.push_back(n.path() + "=" + (n.is_scalar() ? n.scalar() : std::string("null")));
  }
}

// key -> value of "key=value" lines.
std::map<std::string, std::string> lines_by_key(const std::string& text) {
  std::map<std::string, std::string> m;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const size_t eq = line.find('=');
    m[line.substr(0, eq)] = eq == std::string::npos ? "" : line.substr(eq + 1);
  }
  return m;
}

}  // namespace

// Integers compare exactly (seeds past 2^53 differ in their last digits).
bool same_config_value(const std::string& a, const std::string& b) {
  if (a == b) return true;
  if (a.empty() || b.empty()) return false;
  char *end_a = nullptr, *end_b = nullptr;
  const long long i = std::strtoll(a.c_str(), &end_a, 10), j = std::strtoll(b.c_str(), &end_b, 10);
  if (*end_a == '\0' && *end_b == '\0') return i == j;
  const double x = std::strtod(a.c_str(), &end_a), y = std::strtod(b.c_str(), &end_b);
  return *end_a == '\0' && *end_b == '\0' && x == y;
}

namespace {

// Gathers every rank's `mine` text ("key=value" lines) and errors on every rank, naming the
// first key whose value differs from rank 0's, unless none does.
void check_same(comm::Communicator& comm, const std::string& mine, const std::string& what,
                const char* app, const std::string& fix) {
  const std::vector<std::string> all = comm.all_gather_bytes(mine);
  for (size_t r = 1; r < all.size(); ++r) {
    if (all[r] == all[0]) continue;
    auto a = lines_by_key(all[0]), b = lines_by_key(all[r]);
    std::string key, va = "(absent)", vb = "(absent)";
    for (const auto& [k, v] : a) {
      auto it = b.find(k);
      if (it == b.end() || !same_config_value(it->second, v)) {
        key = k;
        va = v;
        if (it != b.end()) vb = it->second;
        break;
      }
    }
    if (key.empty())
      for (const auto& [k, v] : b)
        if (!a.count(k)) {
          key = k;
          vb = v;
          break;
        }
    if (key.empty()) continue;  // the same values, written differently
    throw comm::AgreedError(std::string(app) + ": the ranks were started with different " + what +
                                ": '" + key + "' is " + va + " on rank 0 but " + vb + " on rank " +
                                std::to_string(r) + "; " + fix,
                            comm.rank());
  }
}

// What start_run checks before it takes the lock: output_dir and the checkpoint root are
// folders (or not there yet), output_dir is no place a run must not write, and the trace
// file overwrites nothing the run reads.
void check_run_paths(const config::AppConfig& cfg, const std::string& root,
                     const StartRequest& request) {
  const config::TrainConfig& tc = cfg.train;
  const std::string& app = request.app;
  ZT_CHECK(!fs::exists(cfg.output_dir) || fs::is_directory(cfg.output_dir), app, ": output_dir '",
           cfg.output_dir,
           "' is a file, not a folder; set output_dir to a folder (--set output_dir=...)");
  std::vector<std::string> read = config_inputs(cfg);
  for (const auto& [key, path] : request.inputs) read.push_back(path);
  if (!tc.resume.empty() && tc.resume != "auto") read.push_back(tc.resume);
  check_output_folder(app + ": output_dir", cfg.output_dir, read);
  check_output_writable(app + ": train.trace", tc.trace, read);
  if (!tc.trace.empty()) {
    // Nor a file the run writes itself, existing yet or not: its record, lock, images,
    // TensorBoard folder or checkpoints.
    const fs::path out = cfg.output_dir;
    const std::string name = fs::path(tc.trace).filename().string();
    const bool beside = fs::weakly_canonical(fs::absolute(tc.trace)).parent_path() ==
                        fs::weakly_canonical(fs::absolute(out));
    ZT_CHECK(!(beside && is_run_file_name(name)) && !within(tc.trace, out / "tb") &&
                 !within(tc.trace, root),
             app, ": train.trace '", tc.trace,
             "' is a file this run writes itself (in output_dir '", cfg.output_dir,
             "': its metrics, lock, images, TensorBoard folder or checkpoints); name another "
             "file, e.g. ",
             (out / "trace.json").string());
    make_parent_folders(tc.trace);  // the engine writes it mid-run
  }
  ZT_CHECK(!fs::exists(root) || fs::is_directory(root), app, ": '", root,
           "' is a file, not a folder, and this run saves its checkpoints there; move it away "
           "or set another output_dir (--set output_dir=...)");
}

// Every rank writes its checkpoint shard into output_dir, so each must see the folder rank
// 0 locked (whose lock holds `lock_id`), not another of that name (another working
// directory, or a machine that does not share rank 0's disk: found at the first save
// otherwise). An error on every rank otherwise.
void check_lock_seen_by_all(const std::string& output_dir, const std::string& lock_id,
                            comm::Communicator& comm, const std::string& app) {
  std::string seen = "missing";
  for (int look = 0; look < 5 && seen != "rank 0's"; ++look) {
    if (look > 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));  // NFS caches
    std::ifstream f(fs::path(output_dir) / ".lock");
    if (std::string holder; std::getline(f, holder))
      seen = holder == lock_id ? "rank 0's" : "another run's";
  }
  check_same(comm, "lock in output_dir " + output_dir + "=" + seen, "views of output_dir",
             app.c_str(),
             "every rank writes its shard of each checkpoint there: start the ranks in one "
             "working directory, with output_dir on a filesystem they all share");
}

}  // namespace

RunStart start_run(const config::AppConfig& cfg, const std::string& root,
                   const StartRequest& request, comm::Communicator& comm) {
  const config::TrainConfig& tc = cfg.train;
  const std::string app = request.app;
  // Rank 0 decides how the run starts: another rank's flags would be passed over.
  check_same_options({{"--resume", request.resume ? "true" : "false"},
                      {"--overwrite", request.overwrite ? "true" : "false"}},
                     comm, app.c_str());
  const bool explicit_dir = !tc.resume.empty() && tc.resume != "auto";
  // --overwrite: the earlier run's results go aside until this run has taken a step.
  auto replace_earlier = [&]() {
    const std::string dir = set_aside(cfg.output_dir, root);
    if (request.say)
      std::printf(
          "--overwrite: set the earlier run's checkpoints and metrics aside in %s and %s; "
          "they are deleted once this run has taken its first step\n",
          set_aside_dir(root).string().c_str(), dir.c_str());
    return dir;
  };
  std::shared_ptr<zero::RunLock> lock;
  auto decide = [&]() -> std::string {
    check_run_paths(cfg, root, request);
    try {  // first: nothing below may touch a folder another run is writing
      lock = std::make_shared<zero::RunLock>(cfg.output_dir);
    } catch (const std::exception& e) {
      throw Error(app + ": " + e.what());
    }
    for (const std::string& gone : zero::remove_stale_temporaries(root, /*run_lock_held=*/true))
      std::fprintf(stderr, "%s: removed '%s' (left by an interrupted checkpoint save)\n",
                   app.c_str(), gone.c_str());
    restore_set_aside(cfg.output_dir, root, app.c_str());
    const bool earlier = zero::holds_checkpoints(root);
    // --resume with train.resume: DIR (a run started from another run's checkpoint, and a
    // launcher that passes --resume every time): DIR starts the run, and once the run has
    // saved, its own newest checkpoint continues it, as a plain --resume does.
    const bool from_dir = explicit_dir && !(request.resume && earlier);
    if (explicit_dir && !from_dir && request.say)
      std::printf(
          "--resume: '%s' holds this run's checkpoints: continuing from the newest "
          "(train.resume '%s' only started the run)\n",
          root.c_str(), tc.resume.c_str());
    ZT_CHECK(!request.overwrite || !(request.resume || tc.resume == "auto"), app,
             ": --overwrite starts a new run and --resume (or train.resume: auto) continues the "
             "last one; pass one of them");
    std::vector<std::pair<std::string, std::string>> inputs = request.inputs;
    if (explicit_dir) inputs.emplace_back("train.resume", tc.resume);
    for (const auto& [key, path] : inputs)
      ZT_CHECK(!request.overwrite || path.empty() || !within(path, root), app,
               ": --overwrite would delete '", path, "' (", key,
               "), which this run reads: it lies in this run's checkpoint folder '", root,
               "'; set another output_dir (--set output_dir=...)");
    // An earlier run's metrics, curves or images, also of a run that saved no checkpoint.
    const std::string results = result_names(cfg.output_dir);
    if (from_dir) {
      ZT_CHECK(zero::has_checkpoint(tc.resume), "train.resume: no checkpoint at '", tc.resume, "'",
               run_folder_hint(tc.resume),
               "; pass a checkpoint directory (holding meta.json), a root holding 'latest', or "
               "'auto'");
      zero::ResumePoint rp;
      try {
        rp = resume_point_of(tc.resume);
      } catch (const std::exception& e) {
        throw Error(std::string("train.resume: ") + e.what());
      }
      const std::string from = fs::weakly_canonical(rp.dir).string();
      const bool own_root = fs::weakly_canonical(tc.resume) == fs::weakly_canonical(root);
      // Resuming from root's own newest checkpoint continues that run; from any other, the
      // new run's saves would land among (and replace) the earlier run's checkpoints.
      if (earlier && !request.overwrite && !own_root && from != checkpoint_of(root))
        throw Error(app + ": '" + root + "' already holds checkpoints, and train.resume '" +
                    tc.resume + "' is not the newest of them: the resumed run would save among " +
                    "(and over) them. Pass --resume to continue this run from its newest, " +
                    "set another output_dir (--set output_dir=...), or pass --overwrite to " +
                    "replace them");
      // The results of this command line's earlier launch, which stopped before it saved:
      // that launch started over (its records past DIR's step are dropped).
      const bool own = request.resume && !earlier && !results.empty() && !from.empty() &&
                       started_from(cfg.output_dir) == from;
      if (own && request.say)
        std::printf(
            "--resume: '%s' holds the results of a start from '%s' that saved no checkpoint: "
            "starting from it again\n",
            cfg.output_dir.c_str(), tc.resume.c_str());
      if (!earlier && !results.empty() && !request.overwrite && !own)
        throw Error(app + ": '" + cfg.output_dir + "' holds an earlier run's results (" + results +
                    ") and train.resume '" + tc.resume + "' is another run's checkpoint: " +
                    "the resumed run would write its own over them. Set another output_dir " +
                    "(--set output_dir=...), or pass --overwrite to replace them");
      if (!rp.note.empty())
        std::fprintf(stderr, "%s: note: train.resume: %s\n", app.c_str(), rp.note.c_str());
      // In this run's own root, damaged newer checkpoints go aside as --resume sets them
      // (another run's root is that run's to mend).
      if (own_root)
        for (const std::string& aside : zero::set_aside_passed_over(rp, lock->id()))
          std::fprintf(stderr, "%s: note: set the incomplete checkpoint aside as '%s'\n",
                       app.c_str(), aside.c_str());
      const bool replace = (earlier || !results.empty()) && request.overwrite;
      const std::string aside = replace ? replace_earlier() : std::string();
      write_text_atomically(started_from_file(cfg.output_dir).string(), from + "\n");
      return aside + "\n" + rp.dir;
    }
    std::error_code ec;  // a run started otherwise is no restart of one started from a DIR
    fs::remove(started_from_file(cfg.output_dir), ec);
    if (request.resume || tc.resume == "auto") {
      zero::ResumePoint rp;
      try {
        rp = zero::find_resume_point(root);
      } catch (const std::exception& e) {
        throw Error(app + " --resume: " + e.what() +
                    " (or start a new run: another output_dir, or --overwrite to replace them)");
      }
      if (!rp.note.empty()) std::fprintf(stderr, "%s: note: %s\n", app.c_str(), rp.note.c_str());
      for (const std::string& aside : zero::set_aside_passed_over(rp, lock->id()))
        std::fprintf(stderr, "%s: note: set the incomplete checkpoint aside as '%s'\n", app.c_str(),
                     aside.c_str());
      if (rp.dir.empty() && request.say)
        std::printf("no checkpoint under %s: starting at step 0\n", root.c_str());
      return "\n" + rp.dir;
    }
    if (!earlier && results.empty()) return "\n";
    ZT_CHECK(earlier || request.overwrite, app, ": '", cfg.output_dir,
             "' holds the results of an earlier run (", results,
             ") that saved no checkpoint; a new run would replace them. Set another output_dir "
             "(--set output_dir=...) for a new run, pass --overwrite to replace them, or "
             "--resume to start that run over from step 0");
    ZT_CHECK(request.overwrite, app, ": '", root,
             "' already holds checkpoints of an earlier run; pass --resume to continue it, "
             "set another output_dir (--set output_dir=...) for a new run, or pass "
             "--overwrite to replace its checkpoints and metrics");
    return replace_earlier() + "\n";
  };
  // "<lock id>\n<set aside>\n<resume from>"
  const std::string decided = decided_by_rank0(comm, [&] {
    const std::string d = decide();
    return lock->id() + "\n" + d;
  });
  const size_t a = decided.find('\n'), b = decided.find('\n', a + 1);
  check_lock_seen_by_all(cfg.output_dir, decided.substr(0, a), comm, app);
  return RunStart{decided.substr(b + 1), decided.substr(a + 1, b - a - 1), root, lock};
}

void finish_start(const RunStart& start, comm::Communicator& comm) {
  if (comm.rank() != 0 || start.set_aside.empty()) return;
  fs::remove_all(start.set_aside);
  fs::remove_all(set_aside_dir(start.root));
}

std::string flatten_config(const config::Node& root) {
  std::vector<std::string> lines;
  flatten(root, lines);
  std::sort(lines.begin(), lines.end());
  std::string s;
  for (const std::string& l : lines) s += l + "\n";
  return s;
}

void warn_config(const std::vector<std::string>& warnings, comm::Communicator& comm) {
  if (comm.rank() != 0) return;
  static std::mutex mu;
  static std::set<std::string> said;
  std::lock_guard<std::mutex> lock(mu);
  for (const std::string& w : warnings)
    if (said.insert(w).second) std::fprintf(stderr, "warning: %s\n", w.c_str());
}

void check_same_command(const std::string& command, comm::Communicator& comm) {
  check_same(comm, "command=" + command, "commands", command.c_str(),
             "give every rank the same app and subcommand (mpirun's 'A : B' form gives each "
             "part its own command line)");
}

void check_same_config(const config::AppConfig& cfg, comm::Communicator& comm, const char* app) {
  std::vector<std::string> lines;
  flatten(cfg.root, lines);
  // A DeepSpeed config by its settings, not its path: each process reads its own copy of
  // the file (another machine's may differ), and one file may be named two ways.
  if (!cfg.deepspeed_json.empty()) {
    std::erase_if(lines, [](const std::string& l) { return l.starts_with("deepspeed_config="); });
    std::vector<std::string> ds;
    flatten(config::parse_deepspeed_text(cfg.deepspeed_json, cfg.deepspeed_config), ds);
    for (const std::string& l : ds) lines.push_back("deepspeed_config." + l);
  }
  std::sort(lines.begin(), lines.end());
  std::string text;
  for (const std::string& l : lines) text += l + "\n";
  check_same(comm, text, "configurations", app,
             "give every rank the same --config, --set and --deepspeed options, and the same "
             "files under those paths");
}

void check_same_options(const std::vector<OptionValue>& options, comm::Communicator& comm,
                        const char* app) {
  std::string mine;
  for (const auto& [name, value] : options)
    mine += name + "=" + (value.empty() ? "(not given)" : value) + "\n";
  check_same(comm, mine, "options", app,
             "give every rank the same command-line options (mpirun's 'A : B' form gives each "
             "part its own)");
}

void check_same_data(const data::Dataset& dataset, comm::Communicator& comm, const char* app) {
  check_same(comm,
             detail::cat("data=", dataset.describe(), ", ", dataset.size(),
                         " items\nlisting=", dataset.identity()),
             "data", app,
             "every rank must read the same data: start the ranks in one working directory, "
             "with data.path on a filesystem they all share");
}

void check_same_input(const std::string& option, const std::string& fingerprint,
                      comm::Communicator& comm, const char* app) {
  check_same(comm, option + "=" + fingerprint, "inputs", app,
             "every rank must read the same file: start the ranks in one working directory, "
             "with the file on a filesystem they all share");
}

void check_image_headers(const data::Dataset& dataset, comm::Communicator& comm, const char* key) {
  const auto* subset = dynamic_cast<const data::Subset*>(&dataset);
  const auto* folder = dynamic_cast<const data::ImageFolder*>(subset ? &subset->base() : &dataset);
  if (folder == nullptr) return;
  std::string mine;  // "index length message" for each file of this rank's part that fails
  for (const auto& [i, why] : folder->unreadable(comm.rank(), comm.size()))
    mine += detail::cat(i, " ", why.size(), " ", why);
  std::map<int64_t, std::string> bad;
  for (const std::string& part : comm.all_gather_bytes(mine, "image headers")) {
    std::istringstream in(part);
    int64_t i = 0;
    size_t n = 0;
    while (in >> i >> n && in.get() == ' ') {
      std::string why(n, '\0');
      in.read(why.data(), static_cast<std::streamsize>(n));
      bad.emplace(i, std::move(why));
    }
  }
  try {
    folder->report_unreadable(bad);
  } catch (const Error& e) {
    throw Error(std::string(key) + ": " + e.what());
  }
}

void check_same_model(const nn::Module& model, comm::Communicator& comm, const char* app) {
  std::string mine;
  for (const auto& [n, p] : model.named_parameters()) {
    const zero::ZeroParam* z = zero::zero_param(p);
    mine += "parameter " + n + "=" + shape_str(z ? z->shape : p.sizes()) + "\n";
  }
  for (const auto& [n, b] : model.named_buffers())
    mine += "buffer " + n + "=" + shape_str(b.sizes()) + "\n";
  check_same(comm, mine, "models", app,
             "every rank must build the same model (same model config and build)");
}

bool all_finite(const Tensor& t) {
  if (!t.defined() || !is_floating(t.dtype()) || t.numel() == 0) return true;
  const Tensor c = t.detach().to(Device::cpu()).to(DType::f64).contiguous();
  const double* d = c.data<double>();
  for (int64_t i = 0; i < c.numel(); ++i)
    if (!std::isfinite(d[i])) return false;
  return true;
}

std::string first_nonfinite(const nn::Module& model) {
  auto describe = [](const std::string& name, const Tensor& t, const char* kind) {
    const size_t dot = name.rfind('.');
    const std::string module = dot == std::string::npos ? "(root)" : name.substr(0, dot);
    return std::string(kind) + " '" + name + "' (module " + module + ", " + dtype_name(t.dtype()) +
           " " + shape_str(t.sizes()) + ")";
  };
  for (const auto& [n, p] : model.named_parameters())
    if (!all_finite(p)) return describe(n, p, "parameter");
  for (const auto& [n, b] : model.named_buffers())
    if (!all_finite(b)) return describe(n, b, "buffer");
  return "";
}

}  // namespace zt::app
