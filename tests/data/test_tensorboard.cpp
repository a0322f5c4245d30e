// TensorBoard event files (data/tensorboard.h): CRC32C against published check values,
// the exact bytes of a small file (checked against TensorBoard's own protobuf and record
// writer when it was recorded), and a round trip through the independent reader of
// tests/common/tfevents_reader.h (frames, both checksums, Events, scalars, a PNG image).
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "common/tfevents_reader.h"
#include "core/error.h"
#include "data/image.h"
#include "data/tensorboard.h"

using namespace zt;
namespace fs = std::filesystem;

namespace {

std::string fresh_dir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("zt_tb_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p.string();
}

std::string to_hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (char byte : bytes) {
    const auto c = static_cast<unsigned char>(byte);  // the byte's bits, 0 to 255
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

// The file written by GoldenFile below. Recorded from zt and confirmed byte for byte
// against TensorBoard 2.21's event_pb2 serialization framed by its RecordWriter, and read
// back by its EventAccumulator (Scalars and Images).
const char* kGoldenHex =
    "1800000000000000a37f4b220900002040fc54d9411a0d627261696e2e4576656e743a32"
    "2b3531101a00000000000000129bd82d0900002040fc54d94110012a0d0a0b0a046c6f73"
    "73150000003f34c2793e1f00000000000000514b44180900002040fc54d94110ac022a11"
    "0a0f0a08747261696e2f6c72156f12833a9359bed32600000000000000734fe300090000"
    "2040fc54d94110022a190a170a057265636f6e220e080210031803220689504e4700ffa7"
    "f2557b";

}  // namespace

TEST(TensorBoard, Crc32cCheckValues) {
  const std::string digits = "123456789";
  EXPECT_EQ(data::crc32c(digits.data(), digits.size()), 0xE3069283u);
  const std::vector<uint8_t> zeros(32, 0), ones(32, 0xff);
  EXPECT_EQ(data::crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  EXPECT_EQ(data::crc32c(ones.data(), ones.size()), 0x62A8AB43u);
  std::vector<uint8_t> up(32);
  for (size_t i = 0; i < up.size(); ++i) up[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(data::crc32c(up.data(), up.size()), 0x46DD794Eu);
  EXPECT_EQ(data::crc32c(nullptr, 0), 0u);
  // Continuing a checksum equals checksumming the whole.
  EXPECT_EQ(data::crc32c(digits.data() + 4, 5, data::crc32c(digits.data(), 4)), 0xE3069283u);
  // Against the reader's bit-by-bit version, on every length up to 300.
  std::vector<uint8_t> buf(300);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<uint8_t>(i * 131 + 7);
  for (size_t n = 0; n <= buf.size(); n += 13) {
    EXPECT_EQ(data::crc32c(buf.data(), n), test::bitwise_crc32c(buf.data(), n)) << n;
    EXPECT_EQ(data::masked_crc32c(buf.data(), n),
              test::tfrecord_mask(test::bitwise_crc32c(buf.data(), n)));
  }
}

TEST(TensorBoard, GoldenFile) {
  const std::string dir = fresh_dir("golden");
  std::string path;
  {
    data::TensorBoardWriter w(dir, [] { return 1700000000.5; });
    w.add_scalar("loss", 1, 0.5);
    w.add_scalar("train/lr", 300, 0.001);
    w.add_image("recon", 2, {0x89, 'P', 'N', 'G', 0, 255}, 2, 3, 3);
    path = w.path();
  }
  EXPECT_EQ(to_hex(test::read_file_bytes(path)), kGoldenHex);
  fs::remove_all(dir);
}

TEST(TensorBoard, FileNameAndNoOverwrite) {
  const std::string dir = fresh_dir("name");
  data::TensorBoardWriter a(dir, [] { return 1234567890.75; });
  data::TensorBoardWriter b(dir, [] { return 1234567890.25; });
  const std::string name = fs::path(a.path()).filename().string();
  EXPECT_EQ(name.rfind("events.out.tfevents.1234567890.", 0), 0u) << name;
  EXPECT_NE(name.find("." + std::to_string(::getpid()) + ".zt"), std::string::npos) << name;
  EXPECT_NE(a.path(), b.path());  // same second, same process: a second file
  EXPECT_EQ(fs::path(a.path()).parent_path(), fs::path(dir));
  fs::remove_all(dir);
}

TEST(TensorBoard, RoundTripThroughIndependentReader) {
  const std::string dir = fresh_dir("roundtrip");
  double now = 1700000000.0;
  data::TensorBoardWriter w(dir, [&] { return now += 0.25; });
  struct Point {
    std::string tag;
    int64_t step;
    double value;
  };
  const std::vector<Point> points = {{"train/loss", 0, 0.0},
                                     {"train/loss", 1, 1.75},
                                     {"train/psnr", 127, -3.5e-3},
                                     {"eval/psnr", 128, 31.25},
                                     {"eval/codebook_usage", int64_t{1} << 40, 1e30},
                                     {std::string(200, 'x'), 16384, 42.0}};
  for (const Point& p : points) w.add_scalar(p.tag, p.step, p.value);

  data::Image img;
  img.height = 5;
  img.width = 7;
  for (int64_t i = 0; i < img.height * img.width * 3; ++i)
    img.rgb.push_back(static_cast<uint8_t>(i * 37 % 251));
  const std::vector<uint8_t> png = data::encode_png(img);
  w.add_image("eval/recon", 9, png, img.height, img.width, 3);

  const auto events = test::read_events(w.path());
  ASSERT_EQ(events.size(), points.size() + 2);
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  EXPECT_TRUE(events[0].values.empty());
  EXPECT_EQ(events[0].wall_time, 1700000000.5);  // the name took the first reading
  for (size_t i = 0; i < points.size(); ++i) {
    const test::TfEvent& e = events[i + 1];
    EXPECT_EQ(e.wall_time, 1700000000.5 + 0.25 * static_cast<double>(i + 1));
    EXPECT_EQ(e.step, points[i].step);
    ASSERT_EQ(e.values.size(), 1u);
    EXPECT_EQ(e.values[0].tag, points[i].tag);
    ASSERT_TRUE(e.values[0].has_simple);
    EXPECT_EQ(e.values[0].simple, static_cast<float>(points[i].value));
  }
  const test::TfEvent& ie = events.back();
  EXPECT_EQ(ie.step, 9);
  ASSERT_EQ(ie.values.size(), 1u);
  const test::TfValue& v = ie.values[0];
  EXPECT_EQ(v.tag, "eval/recon");
  ASSERT_TRUE(v.has_image);
  EXPECT_EQ(v.height, 5);
  EXPECT_EQ(v.width, 7);
  EXPECT_EQ(v.colorspace, 3);
  ASSERT_EQ(v.encoded, std::string(reinterpret_cast<const char*>(png.data()), png.size()));
  // The embedded bytes are a PNG of the same pixels.
  const std::string png_path = dir + "/back.png";
  {
    std::ofstream out(png_path, std::ios::binary);
    out.write(v.encoded.data(), static_cast<std::streamsize>(v.encoded.size()));
  }
  const data::Image back = data::load_image(png_path);
  EXPECT_EQ(back.height, img.height);
  EXPECT_EQ(back.width, img.width);
  EXPECT_EQ(back.rgb, img.rgb);

  // A flipped byte is caught by the checksums.
  std::string bytes = test::read_file_bytes(w.path());
  bytes[bytes.size() / 2] ^= 0x10;
  EXPECT_THROW(test::tfrecords(bytes), std::runtime_error);
  fs::remove_all(dir);
}

// A resumed run's session start: its exact bytes (confirmed against TensorBoard 2.21's
// event_pb2, as the golden file above), and what TensorBoard then shows: the points at its
// step and later that were logged before it are gone, the ones logged after it stay.
TEST(TensorBoard, SessionStartDropsPointsPastIt) {
  const std::string dir = fresh_dir("session");
  std::string path;
  {
    data::TensorBoardWriter w(dir, [] { return 1700000000.5; });
    for (int64_t step = 1; step <= 3; ++step) w.add_scalar("loss", step, static_cast<double>(step));
    w.add_session_start(2);
    w.add_scalar("loss", 2, 20.0);
    path = w.path();
  }
  const auto records = test::tfrecords(test::read_file_bytes(path));
  ASSERT_EQ(records.size(), 6u);
  EXPECT_EQ(to_hex(records[4]), "0900002040fc54d94110023a020801");
  const auto events = test::read_events(path);
  EXPECT_EQ(events[4].session_status, 1);
  EXPECT_EQ(events[4].step, 2);
  EXPECT_TRUE(events[4].values.empty());
  std::vector<std::pair<int64_t, float>> shown;
  for (const test::TfEvent& e : test::shown_events(events))
    for (const test::TfValue& v : e.values) shown.emplace_back(e.step, v.simple);
  EXPECT_EQ(shown, (std::vector<std::pair<int64_t, float>>{{1, 1.0f}, {2, 20.0f}}));
  fs::remove_all(dir);
}

TEST(TensorBoard, BadImageIsAnError) {
  const std::string dir = fresh_dir("bad");
  data::TensorBoardWriter w(dir);
  auto error_of = [&](std::vector<uint8_t> png, int channels) -> std::string {
    try {
      w.add_image("x", 0, png, 2, 2, channels);
    } catch (const Error& e) {
      return e.what();
    }
    return "<no error>";
  };
  EXPECT_NE(error_of({1, 2}, 2).find("2 channels; expected 1 (grey), 3 (RGB) or 4 (RGBA)"),
            std::string::npos);
  EXPECT_NE(error_of({}, 3).find("no encoded bytes"), std::string::npos);
  fs::remove_all(dir);
}
