// vqtok decode's output folder and its manifest (see decode_folder.h).
#include "apps/vqtok/decode_folder.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/text_file.h"

namespace zt::vqtok {

namespace fs = std::filesystem;

namespace {
// The staging folder's name, before the process id.
constexpr const char* kStagingPrefix = ".zt_decode.tmp-";
}  // namespace

bool is_decode_output_name(const std::string& name) {
  if (name == "grid.png") return true;
  size_t at = 0;
  auto word = [&](const char* w) {
    const size_t n = std::strlen(w);
    if (name.compare(at, n, w) != 0) return false;
    at += n;
    return true;
  };
  auto digits = [&](size_t least) {
    const size_t from = at;
    while (at < name.size() && std::isdigit(static_cast<unsigned char>(name[at]))) ++at;
    return at - from >= least;
  };
  const bool image = word("image_");
  if (!image && !word("clip_")) return false;
  if (!digits(6)) return false;
  if (!image && !(word("_frame_") && digits(2))) return false;
  return word(".png") && at == name.size();
}

DecodeFolder::DecodeFolder(std::string dir) : dir_(std::move(dir)) {
  ZT_CHECK(!fs::exists(dir_) || fs::is_directory(dir_), "decode: -o '", dir_,
           "' is a file; pass a folder for the PNG frames");
  if (!fs::exists(dir_)) return;
  const fs::path manifest = fs::path(dir_) / kDecodeManifest;
  if (fs::exists(manifest)) {
    const std::string odd = not_a_regular_file(manifest.string());  // a FIFO's open would wait
    ZT_CHECK(odd.empty(), "decode: '", manifest.string(),
             "' (the list of files an earlier decode wrote there) is ", odd,
             "; choose an empty folder for -o");
    std::ifstream f(manifest);
    try {
      const nlohmann::json j = nlohmann::json::parse(f);
      // Only names decode writes: a manifest never makes decode remove anything else.
      for (const auto& entry : j.at("files"))
        if (const auto name = entry.get<std::string>(); is_decode_output_name(name))
          earlier_.insert(name);
    } catch (const nlohmann::json::exception& e) {
      ZT_FAIL("decode: '", manifest.string(),
              "' (the list of files an earlier decode wrote there) is malformed: ", e.what(),
              "; choose an empty folder for -o");
    }
  }
  std::vector<std::string> foreign;
  for (const fs::directory_entry& e : fs::directory_iterator(dir_)) {
    const std::string name = e.path().filename().string();
    if (!is_decode_output_name(name)) continue;
    // Even one a manifest lists: the writer would refuse it only when decode reaches it.
    const std::string kind = not_a_regular_file(write_target(e.path().string()));
    ZT_CHECK(kind.empty(), "decode: -o '", dir_, "' holds '", name, "', ", kind,
             ", under a name decode writes; choose an empty folder for -o");
    if (!earlier_.count(name)) foreign.push_back(name);
  }
  if (foreign.empty()) return;
  std::sort(foreign.begin(), foreign.end());
  const size_t more = foreign.size() - 1;
  ZT_FAIL(
      "decode: -o '", dir_, "' holds '", foreign.front(), "'",
      more > 0 ? " and " + std::to_string(more) + (more == 1 ? " more file" : " more files") : "",
      " named as decode names its output (image_NNNNNN.png, clip_NNNNNN_frame_NN.png, "
      "grid.png) that no decode wrote there (",
      kDecodeManifest,
      " does not list them); decode would replace or remove such files. Choose an empty "
      "folder for -o");
}

DecodeFolder::~DecodeFolder() {
  std::error_code ec;
  if (!staging_.empty()) fs::remove_all(staging_, ec);
}

void DecodeFolder::begin(const std::set<std::string>& planned) {
  planned_ = planned;
  fs::create_directories(dir_);
  std::set<std::string> both = earlier_;
  both.insert(planned.begin(), planned.end());
  write_manifest(both);
  // The staging folders of decodes killed before they finished.
  const std::string prefix = std::string(kStagingPrefix);
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir_)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0 || name.size() == prefix.size() ||
        name.size() > prefix.size() + 9 ||
        name.find_first_not_of("0123456789", prefix.size()) != std::string::npos)
      continue;
    if (process_exited(std::stol(name.substr(prefix.size())))) fs::remove_all(e.path(), ec);
  }
  staging_ = (fs::path(dir_) / (prefix + std::to_string(::getpid()))).string();
  fs::remove_all(staging_);
  fs::create_directory(staging_);
}

std::string DecodeFolder::staged(const std::string& name) const {
  ZT_CHECK(!staging_.empty() && planned_.count(name), "DecodeFolder: '", name,
           "' is not a file this decode planned (or begin() was not called)");
  return (fs::path(staging_) / name).string();
}

int64_t DecodeFolder::finish() {
  ZT_CHECK(!staging_.empty(), "DecodeFolder: finish() without begin()");
  // Every file written, and every place it goes there (a link's folder may not be), before
  // any is moved: a move that fails midway would leave a mix of both decodes' files.
  std::vector<std::pair<fs::path, fs::path>> moves;  // (from, to)
  for (const std::string& name : planned_) {
    const fs::path from = fs::path(staging_) / name;
    const fs::path to(write_target((fs::path(dir_) / name).string()));
    std::error_code ec;
    ZT_CHECK(fs::is_regular_file(from, ec), "decode: '", from.string(), "' was not written");
    const fs::path folder = to.parent_path().empty() ? fs::path(".") : to.parent_path();
    ZT_CHECK(fs::is_directory(folder, ec), "decode: cannot write '",
             (fs::path(dir_) / name).string(), "': it links to '", to.string(),
             "', whose folder does not exist");
    moves.emplace_back(from, to);
  }
  std::set<std::string> folders;  // those files were moved into, to sync
  for (const auto& [from, to] : moves) {
    const std::string name = from.filename().string();
    if (std::rename(from.c_str(), to.c_str()) == 0) {
      folders.insert(to.parent_path().string());
      continue;
    }
    const int err = errno;
    ZT_CHECK(err == EXDEV, "decode: cannot move '", from.string(), "' to '", to.string(),
             "': ", std::strerror(err));
    // A link to a file on another file system: copied there, through a temporary.
    std::ifstream in(from, std::ios::binary);
    ZT_CHECK(in, "decode: cannot read '", from.string(), "': ", std::strerror(errno));
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    write_file_atomically((fs::path(dir_) / name).string(),
                          [&](std::FILE* f) { return write_all(f, bytes.data(), bytes.size()); });
  }
  for (const std::string& folder : folders) sync_folder(folder);
  int64_t removed = 0;
  for (const std::string& name : earlier_)
    if (!planned_.count(name) && fs::remove(fs::path(dir_) / name)) ++removed;
  write_manifest(planned_);
  earlier_ = planned_;
  fs::remove_all(staging_);
  staging_.clear();
  return removed;
}

void DecodeFolder::write_manifest(const std::set<std::string>& files) const {
  // Whole or not at all: the next decode reads one or the other.
  write_text_atomically(
      (fs::path(dir_) / kDecodeManifest).string(),
      nlohmann::json{{"written_by", "vqtok decode"}, {"files", files}}.dump(1) + "\n", "decode");
}

}  // namespace zt::vqtok
