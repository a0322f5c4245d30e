// The metrics file: one JSON object per line, each flushed, with TensorBoard scalars and
// images beside it.
#include "apps/common/metrics.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "apps/common/output_paths.h"
#include "core/error.h"
#include "core/plural.h"
#include "core/text_file.h"
#include "nn/json_text.h"

namespace zt::app {

namespace fs = std::filesystem;

// The deepest nesting a metrics line may have: a record zt writes nests 3 levels (a record,
// its memory report, the report's peaks).
constexpr int kMaxRecordDepth = 8;

MetricsWriter::MetricsWriter(const std::string& path, bool append) : path_(path) {
  make_parent_folders(path);
  f_ = std::fopen(path.c_str(), append ? "a" : "w");
  ZT_CHECK(f_ != nullptr, "cannot open metrics file '", path,
           "' for writing: ", std::strerror(errno));
}

MetricsWriter::~MetricsWriter() {
  if (f_) std::fclose(f_);
}

// One record of a JSON-lines metrics file.
static std::string metrics_line(const nlohmann::json& record) {
  return record.dump() + "\n";
}

void MetricsWriter::write(const nlohmann::json& record) {
  const std::string line = metrics_line(record);
  // A full disk shows at the flush: the line would be lost without a word.
  ZT_CHECK(std::fwrite(line.data(), 1, line.size(), f_) == line.size() && std::fflush(f_) == 0,
           "writing metrics to '", path_, "' failed (disk full?)");
  if (!tb_ || !record.is_object()) return;
  const int64_t step = record.value("step", int64_t{0});
  const auto kind = record.find("kind");
  const std::string prefix =
      kind != record.end() && kind->is_string() ? kind->get<std::string>() + "/" : "";
  std::function<void(const std::string&, const nlohmann::json&)> add =
      [&](const std::string& tag, const nlohmann::json& v) {
        if (v.is_object())
          for (const auto& [k, x] : v.items()) add(tag + "/" + k, x);
        else if (v.is_number())
          tb_->add_scalar(tag, step, v.get<double>());
      };
  for (const auto& [k, v] : record.items())
    if (k != "step") add(prefix + k, v);
}

void MetricsWriter::enable_tensorboard(const std::string& dir, int64_t resumed_step) {
  tb_ = std::make_unique<data::TensorBoardWriter>(dir);
  if (resumed_step > 0) tb_->add_session_start(resumed_step + 1);
}

void MetricsWriter::image(const std::string& tag, int64_t step, const data::Image& img) {
  if (tb_) tb_->add_image(tag, step, data::encode_png(img), img.height, img.width, 3);
}

std::vector<nlohmann::json> read_metrics(const std::string& path, std::string* torn) {
  std::vector<nlohmann::json> out;
  const std::string odd = not_a_regular_file(path);  // a FIFO's open would wait forever
  ZT_CHECK(odd.empty(), "the metrics file '", path, "' is ", odd, ", not a file of records");
  std::ifstream in(path);
  if (!in) {  // none yet is no records; one that cannot be read is not
    ZT_CHECK(!fs::exists(path), "cannot read the metrics file '", path,
             "': ", std::strerror(errno));
    return out;
  }
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  for (size_t n = 0; n < lines.size(); ++n) {
    if (lines[n].empty()) continue;
    // Writing the kept records back (filter_metrics) recurses once per level of nesting:
    // a line deeper than any record zt writes is refused before it is parsed.
    nn::check_json_depth(lines[n], kMaxRecordDepth, path + ":" + std::to_string(n + 1) + ":",
                         "a metrics record nests 3");
    try {
      out.push_back(nlohmann::json::parse(lines[n]));
    } catch (const nlohmann::json::exception& e) {
      if (torn && n + 1 == lines.size()) {
        *torn = path + ":" + std::to_string(n + 1) +
                ": dropped a torn last line (a write cut short when the run stopped)";
        break;
      }
      ZT_FAIL(path, ":", n + 1, ": not a JSON object (", e.what(),
              "); fix or delete that line (a torn line is dropped only when it is the last)");
    }
    const nlohmann::json& r = out.back();
    const auto kind = r.is_object() ? r.find("kind") : r.end();
    ZT_CHECK(r.is_object() && r.contains("step") && r["step"].is_number_integer() &&
                 (kind == r.end() || kind->is_string()),
             path, ":", n + 1, ": not a metrics record (a JSON object with an integer \"step\" ",
             "and a string \"kind\" if any): ", lines[n].substr(0, 80),
             "; fix or delete that line");
  }
  return out;
}

std::string filter_metrics(const std::string& path,
                           const std::function<bool(const nlohmann::json&)>& keep) {
  std::string torn;
  auto records = read_metrics(path, &torn);
  int64_t dropped = 0;
  std::string kept;
  for (const auto& r : records) {
    if (keep(r))
      kept += metrics_line(r);
    else
      ++dropped;
  }
  write_text_atomically(path, kept);
  std::string note = torn;
  if (dropped > 0)
    note += (note.empty() ? "" : "; ") + path + ": dropped " + counted(dropped, "record") +
            " past the resumed step";
  return note;
}

// Under mpirun a rank's stdout may be a pseudo-terminal even when mpirun's own output
// goes to a file, so redrawing is off there: plain lines only.

std::unique_ptr<MetricsWriter> open_run_metrics(const std::string& output_dir, int64_t start,
                                                bool tensorboard, const char* what) {
  namespace fs = std::filesystem;
  fs::create_directories(output_dir);
  const std::string path = (fs::path(output_dir) / "metrics.jsonl").string();
  // Appended to in place, not replaced: a FIFO there would stop the run at its first
  // record (until something reads it), a device would take the records.
  const std::string odd = not_a_regular_file(path);
  ZT_CHECK(odd.empty(), what, ": '", path, "' is ", odd,
           ", where the run writes its metrics (a regular file): remove it, or choose another "
           "output_dir");
  if (start > 0) {
    const std::string note = filter_metrics(
        path, [&](const nlohmann::json& r) { return r.value("step", int64_t{0}) <= start; });
    if (!note.empty()) std::fprintf(stderr, "%s: note: %s\n", what, note.c_str());
  }
  auto metrics = std::make_unique<MetricsWriter>(path, /*append=*/start > 0);
  if (tensorboard) metrics->enable_tensorboard((fs::path(output_dir) / "tb").string(), start);
  return metrics;
}

}  // namespace zt::app
