// Checkpoint folders on disk: names and ids, meta.json, atomic writes and commits, pruning,
// finding a checkpoint, the resume point, and removing what interrupted saves left.
#include "zero/checkpoint_dir.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "core/text_file.h"
#include "nn/json_text.h"
#include "zero/checkpoint.h"
#include "zero/replicas.h"

namespace zt::zero {

namespace ckpt {

std::string rank_file(int r) {
  char b[48];
  std::snprintf(b, sizeof b, "rank_%05d.safetensors", r);
  return b;
}

std::string hex64(uint64_t h) {
  char b[20];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(h));
  return b;
}

// A short hash of this machine's host name: temporary names carry it with the owner's pid,
// so a later save on the same machine can tell whether their owner is still alive.
static std::string host_hash() {
  char name[256] = {0};
  if (::gethostname(name, sizeof name - 1) != 0) return "00000000";
  return hex64(fnv1a(name, std::strlen(name))).substr(8);
}

// The ids this process made: a temporary with this process's pid and another id is an
// earlier process's (a restarted container runs its app under the same pid).
static std::mutex g_ids_mutex;
static std::set<std::string>& ids_made_here() {
  static std::set<std::string> ids;
  return ids;
}

// Distinguishes this save's temporary names from any other process's:
// "p<pid>-h<host hash>-<random>".
std::string unique_id() {
  std::random_device rd;
  std::string id = "p" + std::to_string(::getpid()) + "-h" + host_hash() + "-" +
                   hex64((uint64_t{rd()} << 32) ^ rd()).substr(8);
  std::lock_guard<std::mutex> lock(g_ids_mutex);
  ids_made_here().insert(id);
  return id;
}

static bool made_here(const std::string& id) {
  std::lock_guard<std::mutex> lock(g_ids_mutex);
  return ids_made_here().count(id) > 0;
}

// Whether the process that made temporary id `id` may still be running: true unless the
// id names a pid on this machine that no longer exists, or has exited (a zombie), or is
// this process's pid but not an id this process made. Ids of the older form "<pid>-<hex>"
// are taken to be from this machine. With `run_lock_held` (the caller holds the RunLock of
// the run that saves here, so no other process writes here) only this process's own ids.
static bool owner_may_be_alive(const std::string& id, bool run_lock_held) {
  if (made_here(id)) return true;
  size_t i = id[0] == 'p' ? 1 : 0, j = i;
  while (j < id.size() && std::isdigit(static_cast<unsigned char>(id[j]))) ++j;
  if (j == i || j >= id.size() || id[j] != '-') return true;  // not an id we wrote: not ours
  if (run_lock_held) return false;
  if (i == 1 && id.compare(j + 1, 9, "h" + host_hash()) != 0) return true;  // another machine
  const long pid = std::strtol(id.substr(i, j - i).c_str(), nullptr, 10);
  if (pid <= 0) return true;
  if (pid == ::getpid()) return false;  // an earlier process's: this one did not make it
  return !process_exited(pid);
}

bool valid_tag(const std::string& t) {
  return !t.empty() && t[0] != '.' && t != kLatestFile && t.find('/') == std::string::npos &&
         t.find('\\') == std::string::npos;
}

std::optional<int64_t> tag_step(const std::string& name) {
  constexpr size_t kPrefix = 5;  // "step_"
  if (name.rfind("step_", 0) != 0 || name.size() == kPrefix || name.size() > kPrefix + 18)
    return std::nullopt;  // up to 18 digits: steps below 10^18, and stoll cannot overflow
  for (size_t i = kPrefix; i < name.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return std::nullopt;
  const int64_t step = std::stoll(name.substr(kPrefix));
  if (checkpoint_tag(step) != name) return std::nullopt;  // "step_4": not a tag a save writes
  return step;
}

// A JSON value as an error message quotes it (json_brief: a short scalar, or its type).
static std::string quoted(const json* v) {
  return v ? nn::json_brief(*v) : "none";
}

namespace {

constexpr const char* kMetaDigest = "meta_digest";

}  // namespace

// The tag the `latest` file at `path` names (its first word): "" when it is missing or
// empty, and when it is no regular file (*odd says what it is: a FIFO's open would wait
// for a writer forever).
static std::string latest_tag(const fs::path& path, std::string* odd = nullptr) {
  const std::string kind = not_a_regular_file(path.string());
  if (odd) *odd = kind;
  if (!kind.empty()) return "";
  std::ifstream f(path);
  std::string tag;
  f >> tag;
  return tag;
}

uint64_t meta_hash(json meta) {
  meta.erase(kMetaDigest);
  const std::string text = meta.dump();
  return fnv1a(text.data(), text.size());
}

// meta_hash as meta.json records it.
static std::string meta_digest(const json& meta) {
  return hex64(meta_hash(meta));
}

void seal_meta(json& meta) {
  meta[kMetaDigest] = meta_digest(meta);
}

json read_meta(const fs::path& dir) {
  fs::path p = dir / kMetaFile;
  const std::string odd = not_a_regular_file(p.string());  // a FIFO's open would wait forever
  ZT_CHECK(odd.empty(), "'", p.string(), "' is ", odd, ", not the file of a checkpoint's ",
           kMetaFile, " (a damaged checkpoint directory?)");
  std::ifstream f(p);
  ZT_CHECK(f.good(), "checkpoint '", dir.string(), "': cannot open ", kMetaFile,
           " (not a checkpoint directory, or an incomplete one)");
  std::stringstream text;
  text << f.rdbuf();
  // Nesting no save writes (damage, or a hand edit) is refused before anything recurses
  // into it: a resume passes such a folder over like any other incomplete one.
  nn::check_json_depth(text.view(), kMaxMetaDepth, "'" + p.string() + "'", "a meta.json nests 3");
  json j = json::parse(text.view(), nullptr, /*allow_exceptions=*/false);
  ZT_CHECK(!j.is_discarded() && j.is_object(), "'", p.string(), "' is not valid JSON (corrupt?)");
  if (j.contains(kMetaDigest))
    ZT_CHECK(j[kMetaDigest].is_string() && j[kMetaDigest].get<std::string>() == meta_digest(j), "'",
             p.string(),
             "' does not match its meta_digest: it was changed after the save (damage, "
             "or an edit by hand); the step, data position and optimizer counts it holds cannot "
             "be trusted");
  for (const char* key : {"format", "version"})
    ZT_CHECK(j.contains(key) && (key[0] == 'f' ? j[key].is_string() : j[key].is_number_integer()),
             "'", p.string(), "' is not a zt ZeRO-3 checkpoint's meta.json (no valid '", key, "')");
  ZT_CHECK(j.value("format", "") == kFormat, "'", p.string(), "' is not a zt ZeRO-3 checkpoint (",
           "format '", j.value("format", ""), "', expected '", kFormat, "')");
  ZT_CHECK(j.value("version", 0) == kVersion, "'", p.string(), "' has version ",
           j.value("version", 0), "; this build reads version ", kVersion);
  // What a resume ranks folders by and verifies them with: read here, once, so that no
  // caller meets a bare JSON type error that names no file.
  const json* step = j.contains("step") ? &j["step"] : nullptr;
  ZT_CHECK(step && step->is_number_integer() && step->get<int64_t>() >= 0, "'", p.string(),
           "': 'step' must be an integer >= 0, got ", quoted(step));
  const json* files = j.contains("files") ? &j["files"] : nullptr;
  ZT_CHECK(files && files->is_object(), "'", p.string(),
           "': 'files' must be an object of file names and their digests, got ", quoted(files));
  for (const auto& [name, d] : files->items())
    ZT_CHECK(d.is_string(), "'", p.string(), "': the digest of '", name,
             "' in 'files' must be a string, got ", quoted(&d));
  return j;
}

// The folders under root named for a step (tag_step), newest first.
static std::vector<std::pair<int64_t, std::string>> step_folders(const fs::path& root) {
  std::vector<std::pair<int64_t, std::string>> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string name = e.path().filename().string();
    const std::optional<int64_t> step = tag_step(name);
    if (step && e.is_directory(ec)) out.emplace_back(*step, name);
  }
  std::sort(out.rbegin(), out.rend());
  return out;
}

// Why step folder `dir`, named for `step`, is not a complete checkpoint ("" when it is):
// check_complete, and its meta.json records the step its name says (the step that ranks it).
static std::string incomplete(const fs::path& dir, int64_t step, bool digests) {
  return capture([&] {
    const int64_t saved = check_complete(dir, digests).at("step").get<int64_t>();
    ZT_CHECK(saved == step, "'", (dir / kMetaFile).string(), "' records step ", saved,
             ", but its folder is named for step ", step);
  });
}

// Deletes older checkpoints: keeps `keep_tag` and the keep_last - 1 complete step folders
// with the highest steps up to `keep_step`, and deletes the complete ones below them.
// Nothing else is counted or deleted: not a step folder that is incomplete or damaged, nor
// one a save set aside ("step_N.incomplete-<id>"), nor any folder not named for a step,
// nor checkpoints of later steps (an abandoned run's, after a resume from an earlier one).
// Complete here means whole without the digests (which would read every kept checkpoint at
// every save): meta.json reads and agrees with its folder, every file is there, uncut. The
// new checkpoint is already committed, so a failure here only warns. Each goes in two
// steps: renamed to a hidden ".<tag>.del-<id>" (atomic), then deleted, so that a process
// killed part-way leaves no half-deleted step folder, which nothing would count or delete;
// remove_stale_temporaries finishes what such a process left.
void prune(const fs::path& root, const std::string& keep_tag, int64_t keep_step, int64_t keep_last,
           const std::string& id) {
  int64_t kept = 1;  // keep_tag
  for (const auto& [step, name] : step_folders(root)) {
    if (name == keep_tag || step > keep_step) continue;
    if (!incomplete(root / name, step, /*digests=*/false).empty()) continue;
    if (kept < keep_last) {
      ++kept;
      continue;
    }
    std::error_code ec;
    const fs::path doomed = root / ("." + name + ".del-" + id);
    fs::rename(root / name, doomed, ec);
    if (!ec) fs::remove_all(doomed, ec);
    if (ec)
      std::fprintf(stderr, "zt: save_checkpoint: could not delete old checkpoint '%s': %s\n",
                   (root / name).c_str(), ec.message().c_str());
  }
}

fs::path set_aside_incomplete(const fs::path& dir, const std::string& id) {
  fs::path aside = dir;
  aside += ".incomplete-" + id;
  std::error_code ec;
  fs::rename(dir, aside, ec);
  ZT_CHECK(!ec, "cannot set the incomplete checkpoint '", dir.string(), "' aside as '",
           aside.string(), "': ", ec.message(), "; move or delete it");
  return aside;
}

// Moves the finished temporary directory to root/tag (replacing an older checkpoint of the
// same tag only once the new one is in place) and points root/latest at it.
void commit(const fs::path& tmp, const fs::path& root, const std::string& tag,
            const std::string& id) {
  fs::path dst = root / tag, old;
  if (fs::exists(fs::symlink_status(dst))) {
    ZT_CHECK(fs::is_directory(fs::symlink_status(dst)), "'", dst.string(),
             "' is in the way and is not a checkpoint; move or delete it");
    std::string damage;  // why dst is not a complete checkpoint ("" when it is)
    try {
      verify_checkpoint(dst.string());
    } catch (const std::exception& e) {
      damage = e.what();
    }
    if (!damage.empty()) {
      // An incomplete or damaged folder of this tag (a resume passed it over for an older
      // checkpoint): kept under another name rather than deleted, for whoever can mend it.
      const fs::path aside = set_aside_incomplete(dst, id);
      std::fprintf(
          stderr,
          "zt: save_checkpoint: '%s' was not a complete checkpoint (%s); moved it to '%s'\n",
          dst.c_str(), damage.c_str(), aside.c_str());
    } else {
      old = root / ("." + tag + ".old-" + id);
      fs::rename(dst, old);
    }
  }
  std::error_code ec;
  fs::rename(tmp, dst, ec);
  if (ec) {
    std::error_code ignore;
    if (!old.empty()) fs::rename(old, dst, ignore);
    ZT_FAIL("cannot rename '", tmp.string(), "' to '", dst.string(), "': ", ec.message());
  }
  // The rename made durable before `latest` names it, and before any prune deletes the
  // older checkpoints it replaces (a failure here fails the save, so nothing is pruned).
  sync_folder(root.string());
  if (!old.empty()) fs::remove_all(old, ec);
  const std::string latest = (root / kLatestFile).string();
  try {
    write_text_atomically(latest, tag + "\n", id);
  } catch (const std::exception& e) {
    // The checkpoint is whole and in place: say so, lest it be taken for a failed save.
    ZT_FAIL("'", dst.string(), "' is saved complete, but '", latest,
            "' could not be updated to name it (", e.what(),
            "); a resume or load of the folder above takes the newest complete step, this one");
  }
}

}  // namespace ckpt

using namespace ckpt;

std::string find_checkpoint(const std::string& dir_or_root, std::string* note) {
  fs::path p(dir_or_root);
  if (fs::exists(p / kMetaFile)) return p.string();
  fs::path latest = p / kLatestFile;
  const std::string tag = latest_tag(latest);
  const bool names_folder = valid_tag(tag) && fs::exists(p / tag / kMetaFile);
  int64_t latest_step = -1;
  std::string unread, misnamed;
  if (names_folder) {
    unread = capture([&] { latest_step = read_meta(p / tag).at("step").get<int64_t>(); });
    // A step folder whose meta.json records another step (an edit by hand): as a resume
    // does, it is passed over, not loaded as the step its name says.
    if (const std::optional<int64_t> named = tag_step(tag);
        unread.empty() && named && *named != latest_step)
      misnamed = "'" + (p / tag / kMetaFile).string() + "' records step " +
                 std::to_string(latest_step) + ", but its folder is named for step " +
                 std::to_string(*named) + "; passed over. ";
  }
  if (names_folder && misnamed.empty()) {
    // `latest` is a hint, as for a resume: a save killed between its rename and the update
    // of `latest` leaves a newer step folder. When one is there, the resume rule decides
    // (find_resume_point: the newest complete one), unless `latest` names a newer step.
    const auto folders = step_folders(p);
    if (!unread.empty() || folders.empty() || folders.front().first <= latest_step)
      return (p / tag).string();
    ResumePoint rp;
    if (!capture([&] { rp = find_resume_point(dir_or_root); }).empty() || rp.step <= latest_step)
      return (p / tag).string();
    if (note)
      *note = "'" + latest.string() + "' names '" + tag + "' (step " + std::to_string(latest_step) +
              "), but '" + rp.dir + "' is newer and complete; taking it";
    return rp.dir;
  }
  // `latest` missing, garbage or naming a folder that is gone: the newest complete one.
  std::error_code ec;
  const ResumePoint rp = fs::is_directory(p, ec) ? find_resume_point(dir_or_root) : ResumePoint{};
  ZT_CHECK(!rp.dir.empty(), "no checkpoint at '", dir_or_root, "': ", misnamed,
           "expected a checkpoint directory (with ", kMetaFile, ") or a checkpoint root (with a '",
           kLatestFile, "' file or step folders)");
  if (note) *note = misnamed + rp.note;
  return rp.dir;
}

bool has_checkpoint(const std::string& dir_or_root) {
  return capture([&] { find_checkpoint(dir_or_root); }).empty();
}

bool holds_checkpoints(const std::string& root) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string name = e.path().filename().string();
    if (name == kLatestFile || (name[0] != '.' && e.is_directory(ec))) return true;
  }
  return false;
}

RunLock::RunLock(const std::string& dir) : id_(ckpt::unique_id()) {
  fs::create_directories(dir);
  path_ = (fs::path(dir) / ".lock").string();
  // A kernel lock on the file: held until this process closes it or ends, killed included,
  // so a lock is never left behind (a restarted container with our pid starts at once).
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) ZT_FAIL("cannot open '", path_, "': ", std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    if (err != EWOULDBLOCK) ZT_FAIL("cannot lock '", path_, "': ", std::strerror(err));
    std::ifstream f(path_);
    std::string holder, who;
    std::getline(f, holder);
    std::getline(f, who);
    ZT_FAIL("'", dir, "' is in use by another run (", who.empty() ? "just starting" : who,
            "); wait for it to end or write elsewhere");
  }
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  char since[32];
  std::strftime(since, sizeof since, "%Y-%m-%d %H:%M:%S", ::localtime_r(&now, &local));
  // Who holds it, for the message another run gets; synced, so that ranks on other machines
  // read this run's id (start_run compares it) rather than an earlier run's.
  const std::string text =
      detail::cat(id_, "\npid ", ::getpid(), " on ", host, ", since ", since, "\n");
  const bool written =
      ::ftruncate(fd_, 0) == 0 &&
      ::pwrite(fd_, text.data(), text.size(), 0) == static_cast<ssize_t>(text.size()) &&
      ::fsync(fd_) == 0;
  if (!written) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    ZT_FAIL("cannot write '", path_, "': ", std::strerror(err));
  }
}

RunLock::~RunLock() {
  if (fd_ < 0) return;
  // The file stays (another run may have it open, about to lock it); it names nobody now.
  const int cleared = ::ftruncate(fd_, 0);
  (void)cleared;
  ::close(fd_);
}

std::vector<std::string> remove_stale_temporaries(const std::string& root, bool run_lock_held) {
  std::vector<std::string> removed;
  std::error_code ec;
  std::vector<fs::path> entries;
  for (const auto& e : fs::directory_iterator(root, ec)) entries.push_back(e.path());
  for (const fs::path& p : entries) {
    const std::string name = p.filename().string();
    if (name.empty() || name[0] != '.') continue;
    for (const char* mark : {".tmp-", ".old-", ".del-"}) {
      const size_t at = name.rfind(mark);
      if (at == std::string::npos || at < 2) continue;
      const std::string id = name.substr(at + 5);
      if (id.empty() || owner_may_be_alive(id, run_lock_held)) break;
      std::error_code err;
      const fs::path restored = p.parent_path() / name.substr(1, at - 1);
      if (mark[1] == 'o' && !fs::exists(fs::symlink_status(restored))) {
        // A save was killed between moving the old checkpoint aside and putting the new
        // one in its place: the old one is still good, so it goes back.
        fs::rename(p, restored, err);
        if (!err) removed.push_back(p.string() + " (restored as " + restored.string() + ")");
      } else {
        fs::remove_all(p, err);
        if (!err) removed.push_back(p.string());
      }
      break;
    }
  }
  return removed;
}

std::vector<std::string> set_aside_passed_over(const ResumePoint& rp, const std::string& id) {
  std::vector<std::string> moved;
  for (const std::string& dir : rp.passed_over)
    moved.push_back(ckpt::set_aside_incomplete(dir, id).string());
  return moved;
}

ResumePoint find_resume_point(const std::string& root) {
  ResumePoint rp;
  const fs::path r(root);
  std::error_code ec;
  if (!fs::exists(r, ec)) return rp;  // nothing was ever saved here
  // A file in the way: saves would fail, so this is no place to start from scratch either.
  ZT_CHECK(fs::is_directory(r, ec), "'", root,
           "' is a file, not a folder of checkpoints; move it away or save elsewhere");
  // What `latest` says (a hint: the newest complete checkpoint wins).
  const bool has_latest = fs::exists(r / kLatestFile);
  std::string odd;
  const std::string latest = latest_tag(r / kLatestFile, &odd);
  // The step folders, newest first, until a complete one: those passed over are newer.
  std::vector<std::string> problems, passed;
  for (const auto& [step, name] : step_folders(r)) {
    const std::string err = incomplete(r / name, step, /*digests=*/true);
    if (err.empty()) {
      rp.dir = (r / name).string();
      rp.step = step;
      break;
    }
    problems.push_back(err);
    passed.push_back("'" + name + "'");
    rp.passed_over.push_back((r / name).string());
  }
  auto listed = [&] {
    std::string s;
    for (const std::string& p : problems) s += "\n  " + p;
    return s;
  };
  if (rp.dir.empty()) {
    if (!has_latest && problems.empty()) return rp;  // nothing was ever saved here
    // Only `latest` is left: the step folders were removed (to free space, or to discard
    // the run). Nothing to repair, so say what is gone and the way out.
    ZT_CHECK(!problems.empty(), "no checkpoint under '", root, "': '", kLatestFile, "' names '",
             latest, "', but no step folder is left (removed?). Delete '",
             (r / kLatestFile).string(), "' to start over there, or set another output_dir");
    ZT_FAIL("no complete checkpoint under '", root, "' (", kLatestFile, ": ",
            has_latest ? "'" + latest + "'" : std::string("missing"), ")", listed(),
            "\nNothing was changed; repair or move these folders to continue");
  }
  const std::string tag = fs::path(rp.dir).filename().string();
  if (!has_latest)
    rp.note = "'" + (r / kLatestFile).string() + "' is missing";
  else if (latest.empty())
    rp.note = "'" + (r / kLatestFile).string() + "' is " + (odd.empty() ? "empty" : odd);
  else if (latest != tag)
    rp.note = "'" + (r / kLatestFile).string() + "' names '" + latest + "'" +
              (valid_tag(latest) ? "" : " (not a checkpoint name)");
  if (!rp.note.empty() || !problems.empty()) {
    if (rp.note.empty()) {
      rp.note = "newer checkpoint folder" + std::string(passed.size() > 1 ? "s " : " ") +
                list_names(passed) + (passed.size() > 1 ? " are" : " is") + " incomplete";
    }
    rp.note += "; taking the newest complete checkpoint, '" + rp.dir + "'" + listed();
  }
  return rp;
}

}  // namespace zt::zero
