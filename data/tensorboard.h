// TensorBoard event files written without TensorFlow or protobuf: each record is an
// Event message (the few fields TensorBoard reads: wall time, step, file version, scalar
// and image summaries) encoded by hand and framed as a TFRecord (length, masked CRC32C of
// the length, payload, masked CRC32C of the payload).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace zt::data {

/// CRC32C (Castagnoli, reflected polynomial 0x82F63B78) of n bytes, continuing from `crc`
/// (0 to start).
uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);
/// The TFRecord checksum of n bytes: crc32c rotated right by 15 plus 0xa282ead8.
uint32_t masked_crc32c(const void* data, size_t n);

/// An events.out.tfevents.* file that TensorBoard reads. Every record is flushed when
/// written, so a crashed run keeps what it logged.
class TensorBoardWriter {
 public:
  /// Seconds since the Unix epoch (the records' wall_time; its integer part names the file).
  using Clock = std::function<double()>;

  /// Creates `dir` and `<dir>/events.out.tfevents.<unix seconds>.<hostname>.<pid>.zt` (a
  /// ".N" suffix when that name exists) and writes the file-version event. `clock`
  /// defaults to the system clock. Error naming the file when it cannot be written.
  explicit TensorBoardWriter(const std::string& dir, Clock clock = {});
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  /// One scalar point (stored as float, TensorBoard's simple_value).
  void add_scalar(const std::string& tag, int64_t step, double value);
  /// One image: encoded bytes (PNG) of a height x width picture with `channels` colour
  /// channels (1 grey, 3 RGB, 4 RGBA).
  void add_image(const std::string& tag, int64_t step, const std::vector<uint8_t>& png,
                 int64_t height, int64_t width, int channels);
  /// A SessionLog START event at `step`: a run resumed from a checkpoint writes one at its
  /// first step, and TensorBoard then drops the points at that step and later that the
  /// earlier run logged past the checkpoint (they are not part of the resumed run's curve).
  void add_session_start(int64_t step);
  /// The event file's path.
  const std::string& path() const { return path_; }

 private:
  void write_event(int64_t step, const std::string& body);

  Clock clock_;
  std::string path_;
  std::FILE* f_ = nullptr;
};

}  // namespace zt::data
