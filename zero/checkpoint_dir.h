// The on-disk layout of sharded checkpoints, shared by save/load (checkpoint.cpp) and by the
// directory-level functions (checkpoint_dir.cpp: finding, resuming, pruning, cleaning up).
// A checkpoint root holds step folders (<tag>/ with meta.json, rank_NNNNN.safetensors and
// replicated.safetensors), a `latest` file naming the newest, and while a save runs
// ".<tag>.tmp-<id>" folders whose <id> names the writing process. Internal to zero/.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace zt::zero::ckpt {

namespace fs = std::filesystem;
using json = nlohmann::json;

inline constexpr const char* kFormat = "zt.zero3.checkpoint";
inline constexpr int kVersion = 1;
inline constexpr const char* kMetaFile = "meta.json";
inline constexpr const char* kReplicatedFile = "replicated.safetensors";
inline constexpr const char* kLatestFile = "latest";

/// "rank_00003.safetensors".
std::string rank_file(int r);
/// 16 lower-case hex digits.
std::string hex64(uint64_t h);
/// "p<pid>-h<host hash>-<random>": names this process's temporaries.
std::string unique_id();
/// A step folder's name: not empty, not hidden, not `latest`, no path separators.
bool valid_tag(const std::string& t);
/// The step `name` stands for when it is exactly checkpoint_tag(step) for a step >= 0, as
/// the folders a resume chooses from and a prune deletes are named; nullopt for any other
/// name (a damaged folder set aside as "step_000004.incomplete-<id>", "step_4", "best").
std::optional<int64_t> tag_step(const std::string& name);

// Runs f; "" on success, else the error text.
template <typename F>
std::string capture(F&& f) {
  try {
    f();
    return "";
  } catch (const std::exception& e) {
    return std::string(*e.what() ? e.what() : "unknown error");
  }
}

/// meta.json of checkpoint `dir`, checked for its own digest (`meta_digest`: where it is
/// missing, a file saved before meta.json carried one, there is nothing to check), format,
/// version, a `step` >= 0 and a `files` table of digests (errors name the file).
json read_meta(const fs::path& dir);
/// The hash of meta.json's contents but its own digest, over their compact text
/// (nlohmann's objects are sorted by key and its numbers print back as they read, so the
/// text of what was read is the text of what was written): which checkpoint it is.
uint64_t meta_hash(json meta);
/// Sets meta["meta_digest"] to the digest of the rest of `meta`, as a save writes it; a
/// read checks it, so a changed counter (the step, the data position) is damage found.
void seal_meta(json& meta);
/// Checks that checkpoint `dir` is whole and returns its meta.json: it reads, its tensor
/// table agrees with its world size (check_layout), and every file it lists exists and is a
/// whole safetensors file; with `digests`, each also matches the digest recorded at save
/// (which reads every byte). Throws naming the first problem.
json check_complete(const fs::path& dir, bool digests);
/// Deletes older checkpoints under root (see save_checkpoint's keep_last); `id` names the
/// hidden folders each goes through on its way out.
void prune(const fs::path& root, const std::string& keep_tag, int64_t keep_step, int64_t keep_last,
           const std::string& id);
/// Renames an incomplete or damaged checkpoint folder to "<dir>.incomplete-<id>" (out of
/// the step folders a resume or a prune looks at; kept for whoever can mend it) and
/// returns the new path.
fs::path set_aside_incomplete(const fs::path& dir, const std::string& id);
/// Moves a finished temporary folder to root/tag and points root/latest at it.
void commit(const fs::path& tmp, const fs::path& root, const std::string& tag,
            const std::string& id);

}  // namespace zt::zero::ckpt
