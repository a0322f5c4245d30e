// File formats: .npy round trips and strict header checks; Emu3 resizing and fitting;
// PNG grids; SVG plots. Every broken file is an error that names the file. ImageFolder's
// tests are in test_image_folder.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/test_util.h"
#include "core/error.h"
#include "core/ops/factory.h"
#include "data/data_test_util.h"
#include "data/factory.h"
#include "data/image.h"
#include "data/image_folder.h"
#include "data/npy.h"
#include "data/plot.h"

namespace fs = std::filesystem;

namespace zt::data {
namespace {

using datatest::expect_error;
using datatest::solid;
using datatest::temp_dir;

TEST(Npy, RoundTrip) {
  const std::string d = temp_dir();
  Tensor f = from_vector({1.5, -2, 3, 4, 5, 6}, {2, 3});
  save_npy(d + "/f.npy", f);
  Tensor g = load_npy(d + "/f.npy");
  EXPECT_EQ(g.sizes(), (Shape{2, 3}));
  EXPECT_EQ(g.to_vector(), f.to_vector());
  Tensor ids = from_vector({7, 1023, 0}, {3}, DType::i64);
  save_npy(d + "/i.npy", ids);
  Tensor j = load_npy(d + "/i.npy");
  EXPECT_EQ(j.dtype(), DType::i64);
  EXPECT_EQ(j.to_vector(), ids.to_vector());
  EXPECT_EQ(read_npy_header(d + "/i.npy").data_offset % 64, 0);
}

// Each dtype save_npy writes comes back in its own dtype (an f16 file read as another
// width would be garbage), and the header's shape is the tuple numpy needs: numpy refuses
// "(3)", which Python reads as a number, so one dim is written "(3,)" and none "()".
TEST(Npy, EveryDtypeRoundTripsUnderNumpysHeader) {
  const std::string d = temp_dir();
  for (DType dt : {DType::f16, DType::f32, DType::f64, DType::i32, DType::i64, DType::b8}) {
    const Tensor t = from_vector({1, 0, 1, 1, 0, 1}, {3, 2}, dt);
    save_npy(d + "/t.npy", t);
    const Tensor back = load_npy(d + "/t.npy");
    EXPECT_EQ(back.dtype(), dt) << dtype_name(dt);
    EXPECT_EQ(back.sizes(), t.sizes()) << dtype_name(dt);
    EXPECT_EQ(back.to_vector(), t.to_vector()) << dtype_name(dt);
  }
  EXPECT_NE(npy_header(DType::f32, {3}).find("'shape': (3,), }"), std::string::npos);
  EXPECT_NE(npy_header(DType::f32, {}).find("'shape': (), }"), std::string::npos);
  EXPECT_NE(npy_header(DType::f32, {2, 3}).find("'shape': (2, 3), }"), std::string::npos);
}

TEST(Npy, ClipsFromFloatAndBytes) {
  const std::string d = temp_dir();
  Tensor clips = full({3, 4, 3, 8, 8}, 0.25);
  save_npy(d + "/clips.npy", clips);
  NpyArray a(d + "/clips.npy");
  EXPECT_EQ(a.size(), 3);
  Sample s = a.get(2);
  EXPECT_EQ(s.clip.sizes(), (Shape{4, 3, 8, 8}));
  EXPECT_EQ(s.clip.to_vector()[0], 0.25);

  // uint8 images (N, 3, H, W): each byte p scaled to p / 127.5 - 1 (0 -> -1, 255 -> 1) and
  // repeated to 4 frames. Written by hand: a '|u1' header and 2 * 3 * 2 * 2 bytes, byte k
  // holding 11 k, except the last, 255.
  std::string header = "{'descr': '|u1', 'fortran_order': False, 'shape': (2, 3, 2, 2), }";
  header.append(64 - (10 + header.size() + 1) % 64, ' ');
  header += '\n';
  std::string bytes;
  for (int k = 0; k < 24; ++k) bytes += static_cast<char>(k == 23 ? 255 : 11 * k);
  std::ofstream f(d + "/u8.npy", std::ios::binary);
  f.write("\x93NUMPY\x01\x00", 8);
  const char len[2] = {static_cast<char>(header.size()), 0};
  f.write(len, 2);
  f << header << bytes;
  f.close();
  NpyArray b(d + "/u8.npy");
  EXPECT_FLOAT_EQ(b.get(0).clip.to_vector()[0], -1.0);  // byte 0
  Sample u = b.get(1);
  EXPECT_EQ(u.clip.sizes(), (Shape{4, 3, 2, 2}));
  const std::vector<double> v = u.clip.to_vector();
  for (size_t i = 0; i < v.size(); ++i) {
    const int k = 12 + static_cast<int>(i % 12);  // clip 1's bytes, in every frame
    EXPECT_NEAR(v[i], (k == 23 ? 255 : 11 * k) / 127.5 - 1.0, 1e-6) << "value " << i;
  }
}

TEST(Npy, BrokenFilesNameThemselves) {
  const std::string d = temp_dir();
  save_npy(d + "/ok.npy", full({2, 4, 3, 8, 8}, 0.0));
  // Truncated: drop the last 10 bytes. Too long: one byte past the array (another
  // array's tail, a write appended to the wrong file) is not dropped without a word.
  {
    std::ifstream in(d + "/ok.npy", std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    std::ofstream(d + "/short.npy", std::ios::binary) << bytes.substr(0, bytes.size() - 10);
    std::ofstream(d + "/long.npy", std::ios::binary) << bytes << 'x';
  }
  expect_error([&] { NpyArray x(d + "/short.npy"); }, {d + "/short.npy", "is truncated"});
  expect_error([&] { load_npy(d + "/long.npy"); },
               {d + "/long.npy", "1 unexpected trailing bytes after its [2, 4, 3, 8, 8] array"});
  save_npy(d + "/odd.npy", full({2, 4, 4, 8, 8}, 0.0));
  expect_error([&] { NpyArray x(d + "/odd.npy"); }, {d + "/odd.npy", "(N, T, 3, H, W)"});
  save_npy(d + "/range.npy", full({1, 1, 3, 2, 2}, 2.0));
  expect_error([&] { NpyArray(d + "/range.npy", 1).get(0); }, {"range.npy", "in [-1, 1]"});
  save_npy(d + "/i64.npy", full({1, 1, 3, 2, 2}, 0.0, DType::i64));
  expect_error([&] { NpyArray x(d + "/i64.npy"); }, {"i64.npy", "float32 in [-1, 1] or uint8"});
  // Empty frames (a zero height, width or clip length) are named with the file, not found
  // by the model's first convolution.
  for (const Shape& empty : {Shape{2, 3, 0, 8}, Shape{2, 3, 8, 0}, Shape{2, 0, 3, 8, 8}}) {
    save_npy(d + "/empty.npy", full(empty, 0.0));
    expect_error([&] { NpyArray x(d + "/empty.npy"); }, {"empty.npy", "its frames are empty"});
  }
  std::ofstream(d + "/junk.npy") << "not numpy at all";
  expect_error([&] { load_npy(d + "/junk.npy"); }, {"junk.npy", "bad magic"});
  expect_error([&] { NpyArray(d, 1); }, {"is a folder, not a .npy file", "image_folder"});
  expect_error([&] { load_npy(d + "/missing.npy"); }, {"missing.npy"});
}

// Written by hand: a header with `descr` and shape, then `bytes` of data.
void write_npy_header(const std::string& path, const std::string& descr, const std::string& shape,
                      size_t bytes) {
  std::string header = "{'descr': " + descr + ", 'fortran_order': False, 'shape': " + shape + ", }";
  header.append(64 - (10 + header.size() + 1) % 64, ' ');
  header += '\n';
  std::ofstream f(path, std::ios::binary);
  f.write("\x93NUMPY\x01\x00", 8);
  const char len[2] = {static_cast<char>(header.size()), 0};
  f.write(len, 2);
  f << header << std::string(bytes, '\0');
}

// Python 2's numpy wrote a shape's long dimensions with an L ("(3L, 2L)"); numpy reads such
// files still (its header filter for versions 1.0 and 2.0), and so does zt.
TEST(Npy, APython2ShapeOfLongsReads) {
  const std::string d = temp_dir();
  write_npy_header(d + "/py2.npy", "'<f4'", "(3L, 2L)", 3 * 2 * 4);
  EXPECT_EQ(load_npy(d + "/py2.npy").sizes(), (Shape{3, 2}));
  write_npy_header(d + "/bad.npy", "'<f4'", "(3Q, 2)", 3 * 2 * 4);
  expect_error([&] { load_npy(d + "/bad.npy"); }, {"bad.npy", "expected ')'"});
}

TEST(Npy, ClipLengthMustMatchDataFrames) {
  // A user's T = 4 file with `data.frames: 8` would train and report wrong tokens per clip.
  const std::string d = temp_dir();
  save_npy(d + "/t4.npy", full({2, 4, 3, 8, 8}, 0.0));
  expect_error([&] { NpyArray x(d + "/t4.npy", 8); },
               {d + "/t4.npy", "clips of 4 frames", "data.frames is 8", "data.frames=4"});
  EXPECT_EQ(NpyArray(d + "/t4.npy", 4).get(0).clip.size(0), 4);
}

// Eval clips come from data.eval_path when it is set, else from the training file, and
// the run's description says which.
TEST(Npy, EvalReadsTheHeldOutFileWhenGiven) {
  const std::string d = temp_dir();
  save_npy(d + "/train.npy", full({6, 1, 3, 8, 8}, 0.25));
  save_npy(d + "/val.npy", full({3, 1, 3, 8, 8}, -0.5));
  DataConfig cfg;
  cfg.kind = DataKind::npy;
  cfg.path = d + "/train.npy";
  cfg.frames = 1;
  cfg.height = cfg.width = 8;
  cfg.eval_samples = 2;
  auto mixed = make_dataset(cfg, /*eval=*/true);
  EXPECT_EQ(mixed->size(), 2);
  EXPECT_FLOAT_EQ(mixed->get(1).clip.to_vector()[0], 0.25f);
  EXPECT_FALSE(eval_held_out(cfg));
  EXPECT_NE(describe_eval(cfg, *mixed).find("drawn from the training data"), std::string::npos);
  cfg.eval_path = d + "/val.npy";
  auto held = make_dataset(cfg, /*eval=*/true);
  EXPECT_EQ(held->size(), 2);
  EXPECT_FLOAT_EQ(held->get(1).clip.to_vector()[0], -0.5f);
  EXPECT_EQ(describe_eval(cfg, *held), held->describe());
  EXPECT_NE(held->describe().find("val.npy"), std::string::npos);
  EXPECT_EQ(make_dataset(cfg)->size(), 6);  // training reads data.path alone
  cfg.eval_samples = 10;                    // capped at the file's items
  EXPECT_EQ(make_dataset(cfg, /*eval=*/true)->size(), 3);
  save_npy(d + "/wide.npy", full({3, 1, 3, 8, 16}, 0.0));
  cfg.eval_path = d + "/wide.npy";
  expect_error([&] { make_dataset(cfg, /*eval=*/true); },
               {"data.eval_path: ", "wide.npy", "8x16", "8x8"});

  // Of 16 items, eval_samples 8 of which an evaluation scores 4: those 4 are spread over
  // the whole file (items 0, 4, 8, 12), not the first 4 of the 8 (items 0, 2, 4, 6).
  std::vector<double> ramp;
  for (int i = 0; i < 16; ++i)
    for (int k = 0; k < 3 * 8 * 8; ++k) ramp.push_back(i / 16.0);
  save_npy(d + "/ramp.npy", from_vector(ramp, {16, 1, 3, 8, 8}, DType::f32));
  cfg.eval_path = d + "/ramp.npy";
  cfg.eval_samples = 8;
  auto scored = make_dataset(cfg, /*eval=*/true, /*scored=*/4);
  ASSERT_EQ(scored->size(), 4);
  for (int64_t j = 0; j < 4; ++j)
    EXPECT_FLOAT_EQ(scored->get(j).clip.to_vector()[0], static_cast<float>(4 * j) / 16) << j;
  EXPECT_EQ(make_dataset(cfg, /*eval=*/true, /*scored=*/100)->size(), 8);
  // Held-out data that training reads too is refused, however it is spelled.
  cfg.eval_path = d + "/./train.npy";
  expect_error([&] { make_dataset(cfg, /*eval=*/true); },
               {"data.eval_path '" + d + "/./train.npy' is data.path", "would not be held out"});
  // So is another name of the training file, a hard link (cp -al), which no path tells.
  fs::create_hard_link(d + "/train.npy", d + "/copy.npy");
  cfg.eval_path = d + "/copy.npy";
  expect_error([&] { make_dataset(cfg, /*eval=*/true); },
               {"data.eval_path '" + d + "/copy.npy' is data.path '" + d +
                    "/train.npy' under another name (a hard link)",
                "would not be held out"});
}

// A .npy path that is a FIFO (a named pipe, or a shell's process substitution) is refused by
// name: opened with no writer it would block the run forever, and no clip of it could be
// sought. Here a writer holds it open with a whole array in it, so the read cannot block.
TEST(Npy, AFifoIsRefusedRatherThanWaitedOn) {
  const std::string p = temp_dir() + "/pipe.npy";
  ASSERT_EQ(mkfifo(p.c_str(), 0600), 0);
  const int fd = open(p.c_str(), O_RDWR | O_NONBLOCK);
  ASSERT_GE(fd, 0);
  const std::string bytes = npy_header(DType::f32, {1, 3, 8, 8}) + std::string(3 * 8 * 8 * 4, '\0');
  ASSERT_EQ(write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  expect_error([&] { read_npy_header(p); }, {"'" + p + "' is a FIFO, not a regular file"});
  close(fd);
}

// A file the config names that does not open is named with the key that gave it, for
// training data as for held-out data, and whichever split reads it.
TEST(Npy, AFileThatDoesNotOpenNamesItsKey) {
  const std::string d = temp_dir();
  save_npy(d + "/val.npy", full({3, 1, 3, 8, 8}, 0.0));
  DataConfig cfg;
  cfg.kind = DataKind::npy;
  cfg.path = d + "/missing.npy";
  cfg.frames = 1;
  cfg.height = cfg.width = 8;
  const std::string cannot_open = "cannot open '" + d + "/missing.npy'";
  expect_error([&] { make_dataset(cfg); }, {"data.path: " + cannot_open});
  // Eval items drawn from the training data.
  expect_error([&] { make_dataset(cfg, /*eval=*/true); }, {"data.path: " + cannot_open});
  cfg.path = d;  // a folder where a file belongs
  expect_error([&] { make_dataset(cfg); }, {"data.path: '" + d + "' is a folder, not a .npy"});
  cfg.path = d + "/val.npy";
  cfg.eval_path = d + "/missing.npy";
  expect_error([&] { make_dataset(cfg, /*eval=*/true); }, {"data.eval_path: " + cannot_open});
}

TEST(Npy, BadDtypesAndShapesAreNamed) {
  const std::string d = temp_dir();
  write_npy_header(d + "/obj.npy", "'|O'", "(2, 4, 3, 2, 2)", 2 * 4 * 3 * 2 * 2 * 8);
  expect_error([&] { load_npy(d + "/obj.npy"); }, {"obj.npy", "'|O'", "object array"});
  write_npy_header(d + "/be.npy", "'>f4'", "(1, 4, 3, 2, 2)", 4 * 3 * 2 * 2 * 4);
  expect_error([&] { load_npy(d + "/be.npy"); }, {"be.npy", "little-endian", "'<f4'"});
  write_npy_header(d + "/rec.npy", "[('a', '<f4')]", "(1,)", 4);
  expect_error([&] { load_npy(d + "/rec.npy"); },
               {"rec.npy", "structured dtype [('a', '<f4')]", "plain numeric"});
  // Found by the fuzzer: dimensions too large for int64 (or whose product is) are errors
  // naming the file, not std::out_of_range or an overflow.
  write_npy_header(d + "/huge.npy", "'<f4'", "(1, 4, 37777777777777777777, 2, 2)", 0);
  expect_error([&] { load_npy(d + "/huge.npy"); }, {"huge.npy", "more than 15 digits"});
  write_npy_header(d + "/product.npy", "'<f4'", "(999999999999999, 999999999999999, 3)", 0);
  expect_error([&] { load_npy(d + "/product.npy"); }, {"product.npy", "more data than"});
  // A 0 among them holds no data, but the others' product still overflows (numpy refuses to
  // make such an array: "array is too big").
  write_npy_header(d + "/empty.npy", "'<f4'", "(0, 999999999999999, 999999999999999, 3)", 0);
  expect_error([&] { load_npy(d + "/empty.npy"); }, {"empty.npy", "more data than"});
  // A bool array holds bytes 0 and 1 only: another byte is named, not read into a C++ bool.
  write_npy_header(d + "/bool.npy", "'|b1'", "(3,)", 0);
  std::ofstream(d + "/bool.npy", std::ios::binary | std::ios::app) << std::string("\1\0\1", 3);
  EXPECT_EQ(load_npy(d + "/bool.npy").to(DType::i64).data<int64_t>()[2], 1);
  write_npy_header(d + "/b2.npy", "'|b1'", "(3,)", 0);
  std::ofstream(d + "/b2.npy", std::ios::binary | std::ios::app) << std::string("\1\2\0", 3);
  expect_error([&] { load_npy(d + "/b2.npy"); }, {"b2.npy", "element 1", "byte 2, not 0 or 1"});
  // Text after the dict's closing brace (numpy refuses such a header too).
  write_npy_header(d + "/tail.npy", "'<f4'", "(1,)}, 'x': 1", 4);
  expect_error([&] { load_npy(d + "/tail.npy"); }, {"tail.npy", "text after the closing '}'"});
}

// A PNG changed after it was written (a flipped bit in its compressed pixels) fails its
// chunk's CRC-32: refused as corrupt, where stb alone would decode other pixels.
TEST(Image, APngThatFailsItsChecksumIsRefused) {
  const std::string d = temp_dir(), path = d + "/a.png";
  save_png(path, solid(16, 16, 10, 200, 30));
  EXPECT_EQ(load_image(path).height, 16);  // whole, it reads
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  const std::streamoff at = 33 + 8 + 4;  // the signature, IHDR; IDAT's length, type, 4 bytes
  f.seekg(at);
  const char byte = static_cast<char>(f.get());
  f.seekp(at);
  f.put(static_cast<char>(byte ^ 0x10));
  f.close();
  expect_error([&] { load_image(path); }, {path, "IDAT chunk at byte 33 fails its CRC-32 check"});
}

TEST(Image, Emu3TargetSize) {
  EXPECT_EQ(emu3_target_size(512, 512), (std::pair<int64_t, int64_t>{512, 512}));
  EXPECT_EQ(emu3_target_size(12, 20), (std::pair<int64_t, int64_t>{16, 16}));  // 2.5 -> 2
  EXPECT_EQ(emu3_target_size(2048, 2048, 8, 0, 1024 * 1024),
            (std::pair<int64_t, int64_t>{1024, 1024}));
  EXPECT_EQ(emu3_target_size(256, 256, 8, 512 * 512, 0), (std::pair<int64_t, int64_t>{512, 512}));
  // Halves round to even, as Python's round() in Emu3's processor: 64.5 -> 64, 96.5 -> 96.
  EXPECT_EQ(emu3_target_size(516, 772), (std::pair<int64_t, int64_t>{512, 768}));
  EXPECT_EQ(emu3_target_size(524, 780), (std::pair<int64_t, int64_t>{528, 784}));
}

// An image of another aspect ratio: crop scales it so one side fits and cuts out the
// middle of the other (torchvision's Resize + CenterCrop); stretch squeezes it whole.
TEST(Image, FitCropsTheMiddleOrStretches) {
  Image img{6, 12, {}};  // column c holds the value 20 * c
  for (int64_t y = 0; y < 6; ++y)
    for (int64_t x = 0; x < 12; ++x)
      img.rgb.insert(img.rgb.end(), {static_cast<uint8_t>(20 * x), 0, 0});
  // 6x12 -> 6x6: no resampling, columns 3..8 (offset round(6 / 2) = 3).
  const Image exact = fit_image(img, 6, 6, Filter::bicubic, Fit::crop);
  ASSERT_EQ(exact.width, 6);
  for (int64_t x = 0; x < 6; ++x) EXPECT_EQ(exact.rgb[x * 3], 20 * (x + 3)) << x;
  // 6x12 -> 3x3: scaled to 3x6 first, then columns 2..4 (round(1.5) = 2, halves to even).
  const Image half = resize_image(img, 3, 6, Filter::bilinear);
  const Image cropped = fit_image(img, 3, 3, Filter::bilinear, Fit::crop);
  for (int64_t y = 0; y < 3; ++y)
    for (int64_t x = 0; x < 3; ++x)
      EXPECT_EQ(cropped.rgb[(y * 3 + x) * 3], half.rgb[(y * 6 + x + 2) * 3]) << y << "," << x;
  // Tall images crop rows the same way; stretch is resize_image.
  Image tall{12, 6, {}};
  for (int64_t y = 0; y < 12; ++y)
    for (int64_t x = 0; x < 6; ++x)
      tall.rgb.insert(tall.rgb.end(), {static_cast<uint8_t>(y), 0, 0});
  EXPECT_EQ(fit_image(tall, 6, 6, Filter::bicubic, Fit::crop).rgb[0], 3);
  EXPECT_EQ(fit_image(img, 3, 3, Filter::bilinear, Fit::stretch).rgb,
            resize_image(img, 3, 3, Filter::bilinear).rgb);
}

// Float clips in [0, 1] (torchvision's ToTensor range) pass the [-1, 1] check; opening
// such a file warns, once per file.
TEST(Npy, FloatClipsInTheUnitRangeWarn) {
  const std::string d = temp_dir();
  save_npy(d + "/unit.npy", full({3, 1, 3, 8, 8}, 0.5));
  save_npy(d + "/signed.npy", full({3, 1, 3, 8, 8}, -0.5));
  ::testing::internal::CaptureStderr();
  NpyArray unit(d + "/unit.npy", 1);
  NpyArray again(d + "/unit.npy", 1);
  NpyArray fine(d + "/signed.npy", 1);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("unit.npy': the 3 float clips sampled hold no value below 0"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("signed.npy"), std::string::npos) << err;
  EXPECT_EQ(err.find("unit.npy", err.find("unit.npy") + 1), std::string::npos) << "warned twice";
}

TEST(Image, GridAndPngRoundTrip) {
  const std::string d = temp_dir();
  Tensor x = full({2, 4, 3, 8, 8}, 1.0), y = full({2, 4, 3, 8, 8}, -1.0);
  Image g = make_grid({x, y}, 2);
  EXPECT_EQ(g.height, 4 * 8 + 5 * 2);
  EXPECT_EQ(g.width, 4 * 8 + 5 * 2);
  const size_t first = static_cast<size_t>((2 * g.width + 2) * 3);  // row 0 (x), cell 0
  EXPECT_EQ(g.rgb[first], 255);
  const size_t second = static_cast<size_t>(((2 + 8 + 2) * g.width + 2) * 3);  // row 1 (y)
  EXPECT_EQ(g.rgb[second], 0);
  save_png(d + "/grid.png", g);
  Image back = load_image(d + "/grid.png");
  EXPECT_EQ(back.height, g.height);
  EXPECT_EQ(back.rgb, g.rgb);
  Image t = tensor_to_image(full({3, 2, 2}, 0.0));
  EXPECT_EQ(t.rgb[0], 128);
  expect_error([&] { save_png(d + "/no/such/dir/x.png", g); }, {"no/such/dir/x.png"});
  // Written again over the old file (through a temporary and a rename): the new image whole,
  // no temporary left beside it.
  save_png(d + "/grid.png", solid(3, 5, 9, 8, 7));
  EXPECT_EQ(load_image(d + "/grid.png").rgb, solid(3, 5, 9, 8, 7).rgb);
  EXPECT_EQ(std::distance(fs::directory_iterator(d), fs::directory_iterator()), 1);
}

TEST(Plot, SvgHasCurvesAndEscapesText) {
  PlotSeries loss{"train <loss>", {0, 10, 20}, {1.0, 0.5, 0.25}};
  PlotSeries nan{"eval", {0, 10}, {NAN, 0.3}};
  const std::string svg = svg_plot({loss, nan}, {.title = "vqtok & co", .log_y = true});
  EXPECT_NE(svg.find("<svg"), std::string::npos);
  EXPECT_NE(svg.find("train &lt;loss&gt;"), std::string::npos);
  EXPECT_NE(svg.find("vqtok &amp; co"), std::string::npos);
  EXPECT_EQ(std::count(svg.begin(), svg.end(), '\n') > 5, true);
  EXPECT_NE(svg.find("<polyline"), std::string::npos);
  const std::string d = temp_dir();
  save_svg_plot(d + "/p.svg", {loss});
  EXPECT_TRUE(fs::exists(d + "/p.svg"));
  EXPECT_THROW(svg_plot({PlotSeries{"bad", {1, 2}, {1}}}), Error);
}

// A series flat to the last bits at a large magnitude (a token count, a grad norm) gets
// an axis padded around it; its tick step would otherwise be below half an ulp of the
// values, and the tick loop would never end.
TEST(Plot, ANearlyConstantSeriesAtLargeMagnitudeTerminates) {
  for (double y : {1e4, 1e5, 1e9, 1e15}) {
    PlotSeries flat{"flat", {0, 1, 2}, {y, std::nextafter(y, 2 * y), y}};
    const std::string svg = svg_plot({flat});
    EXPECT_NE(svg.find("<polyline"), std::string::npos);
    EXPECT_LT(svg.size(), 20000u) << "y " << y << ": too many ticks";
    PlotSeries wide_x{"x", {y, std::nextafter(y, 2 * y)}, {1, 2}};
    EXPECT_LT(svg_plot({wide_x}).size(), 20000u) << "x " << y;
  }
}

// Each axis' tick labels differ from one another: a range narrow beside its values (a PSNR
// plateau, steps late in a run) is labelled with the digits its ticks differ in, where four
// significant digits would print "30.1" at 30.101, 30.102, ... alike.
TEST(Plot, TickLabelsOfANarrowRangeDiffer) {
  const PlotSeries psnr{"eval", {100000, 100003}, {30.101, 30.104}};
  const std::string svg = svg_plot({psnr}, {.xlabel = ""});
  for (const std::string anchor : {"middle", "end"}) {  // the x axis' labels, the y axis'
    const std::regex label("text-anchor=\"" + anchor + "\">([^<]+)</text>");
    std::vector<std::string> labels;
    for (auto it = std::sregex_iterator(svg.begin(), svg.end(), label);
         it != std::sregex_iterator(); ++it)
      labels.push_back((*it)[1]);
    ASSERT_GE(labels.size(), 3u) << svg;
    const std::set<std::string> distinct(labels.begin(), labels.end());
    EXPECT_EQ(distinct.size(), labels.size()) << anchor << ": " << ::testing::PrintToString(labels);
  }
}

TEST(Plot, AFailedWriteLeavesNoTemporary) {
  // The plot's path is taken by a folder: the write is refused, the folder stays, and no
  // temporary (empty or partial) is left behind.
  const std::string d = temp_dir();
  fs::create_directories(d + "/p.svg/inside");
  PlotSeries loss{"train", {0, 1}, {1.0, 0.5}};
  expect_error([&] { save_svg_plot(d + "/p.svg", {loss}); }, {d + "/p.svg"});
  EXPECT_TRUE(fs::is_directory(d + "/p.svg/inside"));
  save_svg_plot(d + "/q.svg", {loss});
  EXPECT_GT(fs::file_size(d + "/q.svg"), 100u);
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(d)) names.insert(e.path().filename().string());
  EXPECT_EQ(names, (std::set<std::string>{"p.svg", "q.svg"})) << "no temporaries";
}

}  // namespace
}  // namespace zt::data
