// The output folder of `vqtok decode`. Decode names its files image_NNNNNN.png or
// clip_NNNNNN_frame_NN.png, plus grid.png: names a dataset folder may hold too. So the
// folder keeps a manifest, .zt_decode.json, of the files decode wrote there; a later decode
// replaces exactly those, and refuses, before it writes anything, a folder holding a file
// so named that no manifest lists (the user's, not decode's). The files are written into a
// hidden folder of the decode's own there and moved into place once every one is written,
// so a decode that fails leaves the earlier decode's files as they were, not a mix of both.
#pragma once

#include <cstdint>
#include <set>
#include <string>

namespace zt::vqtok {

/// The manifest's file name, inside the output folder.
inline constexpr const char* kDecodeManifest = ".zt_decode.json";

/// Whether `name` is one decode writes: image_<6+ digits>.png,
/// clip_<6+ digits>_frame_<2+ digits>.png or grid.png.
bool is_decode_output_name(const std::string& name);

/// One decode's use of its output folder (rank 0). Constructing it writes nothing.
class DecodeFolder {
 public:
  /// Reads `dir`'s manifest (none when `dir` does not exist yet). Error when `dir` is a
  /// file, or holds a file named as decode names its outputs that the manifest does not
  /// list, or anything but a regular file (a FIFO, a device) under such a name, naming
  /// one and saying to choose an empty folder.
  explicit DecodeFolder(std::string dir);
  /// Removes the staging folder, and with it what a decode that did not finish wrote.
  ~DecodeFolder();
  DecodeFolder(const DecodeFolder&) = delete;
  DecodeFolder& operator=(const DecodeFolder&) = delete;

  /// Before the files `planned` (names inside the folder) are written: creates the folder
  /// and records them in the manifest beside the earlier decode's, so that a decode cut
  /// short leaves no file the next one would refuse; makes the staging folder
  /// (.zt_decode.tmp-<pid>), and removes those of decodes whose process has exited.
  void begin(const std::set<std::string>& planned);
  /// Where the planned file `name` is written: in the staging folder.
  std::string staged(const std::string& name) const;
  /// After they are written: moves them into the folder (a file that is a symbolic link
  /// there: into the file it leads to), removes the earlier decode's files this one did not
  /// rewrite and leaves the manifest listing `planned` alone. Returns how many files it
  /// removed.
  int64_t finish();

  const std::string& dir() const { return dir_; }

 private:
  void write_manifest(const std::set<std::string>& files) const;

  std::string dir_;
  std::string staging_;            // "" before begin() and after finish()
  std::set<std::string> earlier_;  // what the manifest listed
  std::set<std::string> planned_;
};

}  // namespace zt::vqtok
