// TensorBoard event files: protobuf wire format by hand (varint and fixed-width scalars,
// length-delimited strings and submessages) and TFRecord framing with CRC32C.
//
// Field numbers (tensorflow/core/util/event.proto, framework/summary.proto):
//   Event:          wall_time 1 (double), step 2 (int64), file_version 3 (string),
//                   summary 5 (Summary)
//   Summary:        value 1 (repeated Value)
//   Summary.Value:  tag 1 (string), simple_value 2 (float), image 4 (Image)
//   Summary.Image:  height 1, width 2, colorspace 3 (int32), encoded_image_string 4 (bytes)
#include "data/tensorboard.h"

#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <utility>

#include "core/error.h"

namespace fs = std::filesystem;

namespace zt::data {
namespace {

constexpr std::array<uint32_t, 256> make_crc_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1u) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    table[i] = c;
  }
  return table;
}
constexpr std::array<uint32_t, 256> kCrcTable = make_crc_table();

// Wire types.
constexpr uint32_t kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5;

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void put_key(std::string& out, uint32_t field, uint32_t wire) {
  put_varint(out, field << 3 | wire);
}

// Little-endian bytes of an unsigned integer of `n` bytes.
void put_le(std::string& out, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void put_bytes(std::string& out, uint32_t field, const void* data, size_t n) {
  put_key(out, field, kBytes);
  put_varint(out, n);
  out.append(static_cast<const char*>(data), n);
}
void put_bytes(std::string& out, uint32_t field, const std::string& s) {
  put_bytes(out, field, s.data(), s.size());
}

// int32 / int64 fields: negatives are sign-extended to 64 bits (ten bytes), as protobuf does.
void put_int(std::string& out, uint32_t field, int64_t v) {
  put_key(out, field, kVarint);
  put_varint(out, static_cast<uint64_t>(v));
}

void put_double(std::string& out, uint32_t field, double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  put_key(out, field, kFixed64);
  put_le(out, bits, 8);
}

void put_float(std::string& out, uint32_t field, float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  put_key(out, field, kFixed32);
  put_le(out, bits, 4);
}

// A Summary holding one Value whose body (tag and payload fields) is `value`.
std::string summary_of(const std::string& value) {
  std::string summary;
  put_bytes(summary, 1, value);
  return summary;
}

double system_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

}  // namespace

uint32_t crc32c(const void* data, size_t n, uint32_t crc) {
  const auto* p = static_cast<const uint8_t*>(data);
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) crc = kCrcTable[(crc ^ p[i]) & 0xffu] ^ (crc >> 8);
  return ~crc;
}

uint32_t masked_crc32c(const void* data, size_t n) {
  const uint32_t crc = crc32c(data, n);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir, Clock clock)
    : clock_(clock ? std::move(clock) : Clock(system_seconds)) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  ZT_CHECK(!ec, "cannot create the TensorBoard folder '", dir, "': ", ec.message(),
           "; check that its parent is writable or change output_dir");
  const double now = clock_();
  const std::string base =
      (fs::path(dir) /
       ("events.out.tfevents." + std::to_string(static_cast<int64_t>(std::floor(now))) + "." +
        host_name() + "." + std::to_string(getpid()) + ".zt"))
          .string();
  path_ = base;
  for (int n = 1; fs::exists(path_); ++n) path_ = base + "." + std::to_string(n);
  f_ = std::fopen(path_.c_str(), "wb");
  ZT_CHECK(f_ != nullptr, "cannot open the TensorBoard event file '", path_,
           "' for writing: ", std::strerror(errno));
  std::string body;
  put_bytes(body, 3, std::string("brain.Event:2"));
  write_event(0, body);
}

TensorBoardWriter::~TensorBoardWriter() {
  if (f_) std::fclose(f_);
}

void TensorBoardWriter::add_scalar(const std::string& tag, int64_t step, double value) {
  std::string v;
  put_bytes(v, 1, tag);
  put_float(v, 2, static_cast<float>(value));  // in a oneof: written even when 0
  std::string body;
  put_bytes(body, 5, summary_of(v));
  write_event(step, body);
}

void TensorBoardWriter::add_session_start(int64_t step) {
  std::string session_log;
  put_int(session_log, 1, 1);  // status: START
  std::string body;
  put_bytes(body, 7, session_log);
  write_event(step, body);
}

void TensorBoardWriter::add_image(const std::string& tag, int64_t step,
                                  const std::vector<uint8_t>& png, int64_t height, int64_t width,
                                  int channels) {
  ZT_CHECK(height >= 1 && width >= 1 && height <= INT32_MAX && width <= INT32_MAX,
           "TensorBoard image '", tag, "': bad size ", height, "x", width);
  ZT_CHECK(channels == 1 || channels == 3 || channels == 4, "TensorBoard image '", tag,
           "': ", channels, " channels; expected 1 (grey), 3 (RGB) or 4 (RGBA)");
  ZT_CHECK(!png.empty(), "TensorBoard image '", tag, "': no encoded bytes");
  std::string image;
  put_int(image, 1, height);
  put_int(image, 2, width);
  put_int(image, 3, channels);
  put_bytes(image, 4, png.data(), png.size());
  std::string v;
  put_bytes(v, 1, tag);
  put_bytes(v, 4, image);
  std::string body;
  put_bytes(body, 5, summary_of(v));
  write_event(step, body);
}

// Event = wall_time, step (omitted when 0, as proto3 does), then `body` (the remaining
// fields, already encoded), framed as one TFRecord.
void TensorBoardWriter::write_event(int64_t step, const std::string& body) {
  std::string event;
  put_double(event, 1, clock_());
  if (step != 0) put_int(event, 2, step);
  event += body;
  std::string rec;
  put_le(rec, event.size(), 8);
  put_le(rec, masked_crc32c(rec.data(), 8), 4);
  rec += event;
  put_le(rec, masked_crc32c(event.data(), event.size()), 4);
  ZT_CHECK(std::fwrite(rec.data(), 1, rec.size(), f_) == rec.size() && std::fflush(f_) == 0,
           "writing the TensorBoard event file '", path_, "' failed (disk full?)");
}

}  // namespace zt::data
