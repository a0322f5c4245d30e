// A run's metrics: the JSON-lines file (mirrored to TensorBoard on request), read back and
// filtered when a run resumes.
#pragma once

#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/image.h"
#include "data/tensorboard.h"

namespace zt::app {

/// A JSON-lines file: one object per line, flushed after each write; optionally also
/// TensorBoard event files (train.tensorboard).
class MetricsWriter {
 public:
  /// Opens `path` (creating folders); `append` keeps existing lines.
  MetricsWriter(const std::string& path, bool append);
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;
  /// Appends `record`; with TensorBoard on, each of its numeric fields (nested objects
  /// flattened with "/") also becomes a scalar at the record's "step", tagged
  /// "<kind>/<field>" when the record has a string "kind" (e.g. train/loss, eval/psnr).
  void write(const nlohmann::json& record);
  /// From now on, also writes TensorBoard event files into `dir` (a new file per call).
  /// A run resumed at `resumed_step` (> 0) starts its file with a session start at the
  /// next step, so that TensorBoard drops what an earlier run logged past the checkpoint,
  /// as filter_metrics does for metrics.jsonl.
  void enable_tensorboard(const std::string& dir, int64_t resumed_step = 0);
  /// With TensorBoard on, logs `img` (as PNG) under `tag` at `step`; otherwise nothing.
  void image(const std::string& tag, int64_t step, const data::Image& img);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* f_ = nullptr;
  std::unique_ptr<data::TensorBoardWriter> tb_;
};

/// The records of a JSON-lines file (missing file: none); a bad line is an error naming
/// the file and line. With `torn` given, a bad last line (a write cut short by a crash) is
/// dropped instead and *torn says so; otherwise *torn is left "".
std::vector<nlohmann::json> read_metrics(const std::string& path, std::string* torn = nullptr);
/// Rewrites `path` (through a temporary file and a rename) keeping only the records for
/// which keep(record) is true, and dropping a torn last line. Returns a note for the user
/// naming what it dropped (the torn line, how many records), else "".
std::string filter_metrics(const std::string& path,
                           const std::function<bool(const nlohmann::json&)>& keep);
/// Rank 0's metrics.jsonl in `output_dir` (created) for a run from step `start`: a new run
/// (start 0) starts the file afresh; a resumed one first drops the records past `start`
/// (a run that went further before it stopped; a note on stderr after "`what`: note:"
/// says so) and appends. With `tensorboard`, event files under output_dir/tb too. A
/// metrics.jsonl that is not a regular file (a FIFO, a device, a folder; its links
/// followed) is an error naming it.
std::unique_ptr<MetricsWriter> open_run_metrics(const std::string& output_dir, int64_t start,
                                                bool tensorboard, const char* what);

}  // namespace zt::app
