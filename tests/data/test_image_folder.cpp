// ImageFolder: the listing (hidden entries, links, classes), decoding, resizing and
// [-1, 1] scaling, and the files it cannot use. Every file it refuses is named, with
// what to do about it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <vector>

#include "common/test_util.h"
#include "core/error.h"
#include "data/data_test_util.h"
#include "data/factory.h"
#include "data/image.h"
#include "data/image_folder.h"
#include "stb_image_write.h"

namespace fs = std::filesystem;

namespace zt::data {
namespace {

using datatest::crc32_of;
using datatest::expect_error;
using datatest::put_be32;
using datatest::put_chunk;
using datatest::solid;
using datatest::temp_dir;

// image_folder data of single 8 x 8 frames; the test sets the paths.
DataConfig folder_config() {
  DataConfig cfg;
  cfg.kind = DataKind::image_folder;
  cfg.frames = 1;
  cfg.height = cfg.width = 8;
  return cfg;
}

// Folders `train` and `val` holding one image each: train/a.png and val/b.png.
void folder_pair(const std::string& train, const std::string& val) {
  fs::create_directories(train);
  fs::create_directories(val);
  save_png(train + "/a.png", solid(8, 8, 1, 2, 3));
  save_png(val + "/b.png", solid(8, 8, 4, 5, 6));
}

// Hidden entries (".*": macOS's "._x.png" metadata files, ".git") are left out; linked
// folders are followed; an image header claiming more pixels than PIL decodes is refused
// before anything is decoded.
TEST(ImageFolder, SkipsHiddenFollowsLinksAndRefusesHugeImages) {
  const std::string d = temp_dir();
  fs::create_directories(d + "/set/.cache");
  fs::create_directories(d + "/elsewhere");
  save_png(d + "/set/a.png", solid(8, 8, 1, 2, 3));
  std::ofstream(d + "/set/._a.png") << "AppleDouble metadata, not a PNG";
  save_png(d + "/set/.cache/b.png", solid(8, 8, 1, 2, 3));
  save_png(d + "/elsewhere/c.png", solid(8, 8, 1, 2, 3));
  fs::create_directory_symlink(d + "/elsewhere", d + "/set/linked");
  ImageFolder f(d + "/set", {.frames = 1, .height = 8, .width = 8});
  ASSERT_EQ(f.size(), 2);
  EXPECT_EQ(fs::path(f.files()[0]).filename(), "a.png");
  EXPECT_EQ(fs::path(f.files()[1]).filename(), "c.png");
  // A PNG whose header says 14000 x 14000 (the rest of the file never read; stb itself
  // refuses sides past 2^30 / 3 pixels, PIL from 178956970).
  const unsigned char header[] = {0x89, 'P',  'N', 'G', '\r', '\n', 0x1a, '\n', 0,    0, 0,
                                  13,   'I',  'H', 'D', 'R',  0,    0,    0x36, 0xb0, 0, 0,
                                  0x36, 0xb0, 8,   2,   0,    0,    0,    0,    0,    0, 0};
  std::ofstream(d + "/huge.png", std::ios::binary)
      .write(reinterpret_cast<const char*>(header), sizeof header);
  expect_error([&] { image_size(d + "/huge.png"); }, {"huge.png", "14000x14000", "downscale"});
  expect_error([&] { load_image(d + "/huge.png"); }, {"huge.png", "14000x14000"});
  // 20000 x 20000 RGB: past what stb's header query takes (2^30 bytes), read from IHDR.
  unsigned char bigger[sizeof header];
  std::memcpy(bigger, header, sizeof header);
  bigger[18] = bigger[22] = 0x4e;  // 0x4e20 = 20000
  bigger[19] = bigger[23] = 0x20;
  std::ofstream(d + "/bigger.png", std::ios::binary)
      .write(reinterpret_cast<const char*>(bigger), sizeof bigger);
  expect_error([&] { image_size(d + "/bigger.png"); }, {"bigger.png", "20000x20000", "downscale"});
  expect_error([&] { load_image(d + "/bigger.png"); }, {"bigger.png", "20000x20000"});
}

// A link to an image that is gone would silently shrink the data set, and a link back up
// (a loop) or a second link to one folder would read its images again: each is an error
// naming the link.
TEST(ImageFolder, NamesABrokenLinkAndALinkLoop) {
  const std::string d = temp_dir();
  fs::create_directories(d + "/set");
  save_png(d + "/set/a.png", solid(8, 8, 1, 2, 3));
  fs::create_symlink(d + "/gone.png", d + "/set/b.png");
  expect_error([&] { ImageFolder(d + "/set", {.frames = 1, .height = 8, .width = 8}); },
               {"set/b.png' is a link to a file that does not exist"});
  fs::remove(d + "/set/b.png");
  fs::create_directory_symlink(d + "/set", d + "/set/loop");
  expect_error(
      [&] { ImageFolder(d + "/set", {.frames = 1, .height = 8, .width = 8}); },
      {"set/loop' is a link to '" + d + "/set', a folder listed already above it (a loop)"});
  fs::remove(d + "/set/loop");
  fs::create_directories(d + "/other");
  fs::create_directory_symlink(d + "/other", d + "/set/one");
  fs::create_directory_symlink(d + "/other", d + "/set/two");
  expect_error([&] { ImageFolder(d + "/set", {.frames = 1, .height = 8, .width = 8}); },
               {"/set/one' and '", "are both links to '", "remove one of the two links"});
}

// A link to a folder beside it: whichever of the two the directory lists first, the error
// names both and calls the link the link (several names, so both orders occur).
TEST(ImageFolder, ALinkToAListedFolderIsNamedAsTheLink) {
  const std::string d = temp_dir();
  for (const auto& [real, link] : std::vector<std::pair<std::string, std::string>>{
           {"a", "link_a"}, {"z", "link_z"}, {"m", "b"}, {"q", "r"}, {"c", "c2"}, {"x1", "x0"}}) {
    const std::string e = d + "/" + real + "_" + link;
    fs::create_directories(e + "/" + real);
    save_png(e + "/" + real + "/i.png", solid(8, 8, 1, 2, 3));
    fs::create_directory_symlink(e + "/" + real, e + "/" + link);
    const std::string msg = test::error_of([&] { ImageFolder f(e, {.frames = 1}); });
    EXPECT_NE(msg.find("'" + e + "/" + link + "' is a link to '" + e + "/" + real +
                       "', a folder listed already: its images would be read twice; remove the "
                       "link '" +
                       e + "/" + link + "'"),
              std::string::npos)
        << msg;
  }
}

TEST(ImageFolder, AnEvalFolderInsideOrAroundTheTrainingFolderIsRefused) {
  const std::string d = temp_dir();
  folder_pair(d + "/all/train", d + "/all/val");
  DataConfig cfg = folder_config();
  cfg.path = d + "/all";
  cfg.eval_path = d + "/all/val";
  expect_error([&] { make_dataset(cfg, /*eval=*/true); }, {"lies inside data.path"});
  cfg.path = d + "/all/train";
  cfg.eval_path = d + "/all";
  expect_error([&] { make_dataset(cfg, /*eval=*/true); }, {"holds data.path"});
  cfg.eval_path = d + "/all/val";  // side by side: held out
  EXPECT_EQ(make_dataset(cfg, /*eval=*/true)->size(), 1);
}

// Two folders side by side pass the path check, but a link inside the training folder to
// the eval folder would train on every eval item: a run that holds its training set
// compares the files both list by their real paths, and names one they share.
TEST(ImageFolder, AnEvalFolderLinkedFromTheTrainingFolderIsRefused) {
  const std::string d = temp_dir();
  folder_pair(d + "/train", d + "/val");
  DataConfig cfg = folder_config();
  cfg.path = d + "/train";
  cfg.eval_path = d + "/val";
  EXPECT_EQ(make_eval_dataset(cfg, make_dataset(cfg))->size(), 1);  // held out
  fs::create_directory_symlink(d + "/val", d + "/train/val");
  auto train = make_dataset(cfg);
  EXPECT_EQ(train->size(), 2);
  expect_error(
      [&] { make_eval_dataset(cfg, train); },
      {"data.eval_path '" + d + "/val' holds files that data.path",
       "such as '" + d + "/val/b.png', which training reads as '" + d + "/train/val/b.png'",
       "held out"});
  fs::remove(d + "/train/val");  // a link to one file of it counts too
  fs::create_symlink(d + "/val/b.png", d + "/train/c.png");
  expect_error([&] { make_eval_dataset(cfg, make_dataset(cfg)); }, {"/train/c.png'"});
  fs::remove(d + "/train/c.png");  // and a hard link (cp -al), one file under two names
  fs::create_hard_link(d + "/val/b.png", d + "/train/h.png");
  expect_error([&] { make_eval_dataset(cfg, make_dataset(cfg)); },
               {"/train/h.png' (through a link, or a hard link of one file)"});
}

// Without data.eval_path, a run's eval items are drawn from the training set it holds
// (its listing, not a second walk and header check of data.path), and they are the items
// a fresh listing would give.
TEST(ImageFolder, EvalItemsOfTheTrainingDataReuseItsListing) {
  const std::string d = temp_dir();
  for (int i = 0; i < 7; ++i)
    save_png(d + "/" + std::to_string(i) + ".png", solid(8, 8, static_cast<uint8_t>(i), 0, 0));
  DataConfig cfg = folder_config();
  cfg.path = d;
  cfg.eval_samples = 3;
  const auto train = make_dataset(cfg);
  for (int64_t scored : {0, 2, 5}) {
    const auto eval =
        std::dynamic_pointer_cast<const Subset>(make_eval_dataset(cfg, train, scored));
    const auto fresh = std::dynamic_pointer_cast<const Subset>(make_dataset(cfg, true, scored));
    ASSERT_TRUE(eval && fresh);
    EXPECT_EQ(&eval->base(), train.get()) << "the training set's own listing";
    EXPECT_NE(&fresh->base(), train.get());
    EXPECT_EQ(eval->indices(), fresh->indices()) << "scored " << scored;
    EXPECT_EQ(eval->indices(),
              (scored == 2 ? std::vector<int64_t>{0, 3} : std::vector<int64_t>{0, 2, 4}));
  }
  // None asked for is an empty split: an error naming the key, not one item.
  cfg.eval_samples = 0;
  expect_error([&] { make_eval_dataset(cfg, train, 0); },
               {"the eval split is empty: data.eval_samples is 0"});
}

// What the ranks compare at the start beside the description: a copy of the folder agrees
// wherever it is; a folder of the same count with another file, or a file of another size,
// does not (ranks in different working directories with one relative data.path read such
// folders as one).
TEST(ImageFolder, TheIdentityTellsFoldersOfOtherFilesApart) {
  const std::string d = temp_dir();
  folder_pair(d + "/a/x", d + "/a/y");
  fs::copy(d + "/a", d + "/copy", fs::copy_options::recursive);
  folder_pair(d + "/renamed/x", d + "/renamed/z");
  folder_pair(d + "/resized/x", d + "/resized/y");
  save_png(d + "/resized/y/b.png", solid(16, 16, 4, 5, 6));
  const std::string a = ImageFolder(d + "/a").identity();
  EXPECT_EQ(ImageFolder(d + "/copy").identity(), a);
  EXPECT_NE(ImageFolder(d + "/renamed").identity(), a);
  EXPECT_NE(ImageFolder(d + "/resized").identity(), a);
  EXPECT_EQ(Subset(std::make_shared<ImageFolder>(d + "/a"), {1}).identity(), a);
}

TEST(ImageFolder, DecodesResizesAndScales) {
  const std::string d = temp_dir();
  fs::create_directories(d + "/cats");
  fs::create_directories(d + "/dogs");
  save_png(d + "/cats/a.png", solid(12, 20, 255, 0, 51));
  save_png(d + "/dogs/b.png", solid(40, 40, 0, 255, 255));
  std::ofstream(d + "/notes.txt") << "ignored";

  ImageFolder fixed(d, {.height = 16, .width = 16});
  ASSERT_EQ(fixed.size(), 2);
  EXPECT_EQ(fixed.classes(), (std::vector<std::string>{"cats", "dogs"}));
  Sample a = fixed.get(0);
  EXPECT_EQ(a.clip.sizes(), (Shape{4, 3, 16, 16}));
  EXPECT_EQ(a.label, 0);
  EXPECT_EQ(fixed.get(1).label, 1);
  const auto v = a.clip.to_vector();
  EXPECT_NEAR(v[0], 1.0, 1e-6);                     // R = 255
  EXPECT_NEAR(v[256], -1.0, 1e-6);                  // G = 0
  EXPECT_NEAR(v[512], 51 / 127.5 - 1, 1e-6);        // B = 51
  EXPECT_NEAR(v[3 * 256 * 3 + 512], v[512], 1e-7);  // frame 3 == frame 0

  ImageFolder natural(d, {.frames = 1});
  EXPECT_EQ(natural.get(0).clip.sizes(), (Shape{1, 3, 16, 16}));  // 12x20 -> multiples of 8
  EXPECT_EQ(natural.get(1).clip.sizes(), (Shape{1, 3, 40, 40}));
}

TEST(ImageFolder, BrokenImagesNameThemselves) {
  const std::string d = temp_dir();
  expect_error([&] { ImageFolder f(d); }, {d, "no images"});
  expect_error([&] { ImageFolder f(d + "/nope"); }, {"nope", "is not a directory"});
  std::ofstream(d + "/fake.png") << "this is not a png";
  expect_error([&] { ImageFolder f(d); }, {d + "/fake.png", "cannot read image"});
  // Every file whose header does not read is counted in the one error, and the first ten
  // by path are named (page0, page1, page10, page11, page2, ..., page7).
  const std::string many = d + "/many";
  fs::create_directories(many);
  save_png(many + "/ok.png", solid(8, 8, 1, 2, 3));
  for (int i = 0; i < 12; ++i) std::ofstream(many + "/page" + std::to_string(i) + ".jpg");
  const std::string all = test::error_of([&] { ImageFolder f(many); });
  for (const std::string& part :
       {"ImageFolder: 12 of the 13 image files under '" + many + "' cannot be read:",
        "cannot read image '" + many + "/page0.jpg'", "cannot read image '" + many + "/page7.jpg'",
        std::string("and 2 more\nremove or replace them")})
    EXPECT_NE(all.find(part), std::string::npos) << part << " missing from: " << all;
  // Listed without the check, the headers are read in parts (one per rank), each part
  // every third file from its own; merged, they make the same error.
  ImageFolderOptions later;
  later.check_headers = false;
  const ImageFolder listed(many, later);
  std::map<int64_t, std::string> merged;
  for (int64_t part = 0; part < 3; ++part)
    for (const auto& [i, why] : listed.unreadable(part, 3)) {
      EXPECT_EQ(i % 3, part) << why;
      merged.emplace(i, why);
    }
  EXPECT_EQ(merged.size(), 12u);
  EXPECT_EQ(test::error_of([&] { listed.report_unreadable(merged); }), all);
  // With on_bad_image: skip they are named on stderr instead, and a read passes them over.
  ImageFolderOptions skip;
  skip.on_bad_image = OnBadImage::skip;
  ::testing::internal::CaptureStderr();
  const ImageFolder skipping(many, skip);
  const int64_t read = skipping.get(1).index;  // page0.jpg, then page1.jpg, ... then ok.png
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("12 of the 13 image files under '" + many + "' cannot be read:"),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("skipped (data.on_bad_image: skip)"), std::string::npos) << said;
  EXPECT_EQ(skipping.files()[static_cast<size_t>(read)], many + "/ok.png");
  fs::remove(many + "/ok.png");  // none left to read in their place: an error at start-up
  expect_error([&] { ImageFolder f(many, skip); },
               {"12 of the 12 image files", "none is left to read in their place"});

  const std::string e = d + "/trunc";
  fs::create_directories(e);
  save_png(e + "/full.png", solid(32, 32, 10, 20, 30));
  std::ifstream in(e + "/full.png", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  std::ofstream(e + "/full.png", std::ios::binary | std::ios::trunc) << bytes.substr(0, 40);
  expect_error(
      [&] {
        ImageFolder f(e);
        f.get(0);
      },
      {e + "/full.png"});
}
// `path`, a PNG cut after its header: stb reads its size, then fails to decode it, as a
// download that stopped early does.
void write_truncated_png(const std::string& path, const Image& img) {
  const std::vector<uint8_t> png = encode_png(img);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(png.data()), 40);
}

// A file whose header reads but whose data does not decode passes the listing and fails
// when it is read. By default that is an error naming the file, calling it corrupt (not
// unsupported) and saying how to go on; with on_bad_image: skip the next image of the
// folder (wrapping) stands in for it, the same one at every read, and the file is named
// once on stderr.
TEST(ImageFolder, AnUnreadableImageIsAnErrorOrSkipped) {
  const std::string d = temp_dir();
  save_png(d + "/a.png", solid(8, 8, 255, 0, 0));
  write_truncated_png(d + "/b.png", solid(8, 8, 0, 255, 0));
  save_png(d + "/c.png", solid(8, 8, 0, 0, 255));
  write_truncated_png(d + "/d.png", solid(8, 8, 9, 9, 9));
  const ImageFolderOptions o{.frames = 1, .height = 8, .width = 8};
  ImageFolder strict(d, o);
  ASSERT_EQ(strict.size(), 4);
  EXPECT_EQ(strict.get(0).index, 0);
  const std::string msg = test::error_of([&] { strict.get(1); });
  for (const char* part :
       {"b.png", "corrupt or truncated", "its header reads as a 8x8 image",
        "decoding failed: ", "remove or replace the file", "set data.on_bad_image: skip"})
    EXPECT_NE(msg.find(part), std::string::npos) << part << " missing from: " << msg;
  EXPECT_EQ(msg.find("zt reads PNG"), std::string::npos) << "not a format question: " << msg;
  expect_error([&] { load_image(d + "/b.png"); }, {"b.png", "corrupt or truncated", "remove"});

  ImageFolderOptions skipping = o;
  skipping.on_bad_image = OnBadImage::skip;
  ImageFolder f(d, skipping);
  ::testing::internal::CaptureStderr();
  const Sample b = f.get(1), again = f.get(1), wrapped = f.get(3);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(b.index, 2);
  EXPECT_EQ(b.clip.to_vector(), f.get(2).clip.to_vector());
  EXPECT_EQ(again.index, 2);
  EXPECT_EQ(wrapped.index, 0) << "the last file's stand-in is the first";
  EXPECT_NE(err.find("data: skipping unreadable image '" + d + "/b.png': corrupt or truncated"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("b.png", err.find("b.png") + 1), std::string::npos) << "named twice: " << err;
  EXPECT_NE(err.find("d.png"), std::string::npos) << err;

  // With nothing that decodes there is nothing to stand in.
  const std::string e = d + "/none";
  fs::create_directories(e);
  write_truncated_png(e + "/x.png", solid(8, 8, 1, 1, 1));
  write_truncated_png(e + "/y.png", solid(8, 8, 2, 2, 2));
  ::testing::internal::CaptureStderr();
  expect_error([&] { ImageFolder(e, skipping).get(0); }, {"no image under '" + e, "decodes"});
  ::testing::internal::GetCapturedStderr();
}

// stb's BMP and TGA decoders take zeros for bytes past the end of the file: a truncated
// one decoded as an image with a black bottom. It is refused as truncated, and no complete
// file of any format is (PNG and JPEG decoders check for themselves).
TEST(ImageFolder, ATruncatedBmpOrTgaIsRefusedAndCompleteFilesAreNot) {
  const std::string d = temp_dir();
  Image img;
  for (int64_t side : {1, 3, 17, 32}) {
    img.height = side;
    img.width = side + 2;
    img.rgb.resize(static_cast<size_t>(img.height * img.width * 3));
    for (size_t i = 0; i < img.rgb.size(); ++i) img.rgb[i] = static_cast<uint8_t>(i * 37 + 11);
    const int w = static_cast<int>(img.width), h = static_cast<int>(img.height);
    const std::string bmp = d + "/x.bmp", tga = d + "/x.tga", rle = d + "/rle.tga";
    const std::string png = d + "/x.png", jpg = d + "/x.jpg";
    ASSERT_TRUE(stbi_write_bmp(bmp.c_str(), w, h, 3, img.rgb.data()));
    stbi_write_tga_with_rle = 0;
    ASSERT_TRUE(stbi_write_tga(tga.c_str(), w, h, 3, img.rgb.data()));
    stbi_write_tga_with_rle = 1;
    ASSERT_TRUE(stbi_write_tga(rle.c_str(), w, h, 3, img.rgb.data()));
    ASSERT_TRUE(stbi_write_jpg(jpg.c_str(), w, h, 3, img.rgb.data(), 90));
    save_png(png, img);
    for (const std::string& f : {bmp, tga, rle, png, jpg}) {
      Image got;
      std::string why;
      ASSERT_TRUE(try_load_image(f, got, why)) << f << " " << side << ": " << why;
      if (f != jpg) {
        EXPECT_EQ(got.rgb, img.rgb) << f;  // lossless formats
      }
    }
    if (side < 17) continue;
    for (const std::string& f : {bmp, tga, rle}) {
      // Cut at 60%, or by four bytes: inside the last row (which stb reads whole from a
      // TGA), past a BMP row's up to 3 bytes of padding.
      const uintmax_t whole = fs::file_size(f);
      fs::resize_file(f, side == 17 ? whole - 4 : whole * 6 / 10);
      Image got;
      std::string why;
      EXPECT_FALSE(try_load_image(f, got, why)) << f << " cut to 60% decoded";
      EXPECT_NE(why.find("truncated file (its header reads as a " + std::to_string(h) + "x" +
                         std::to_string(w) + " image, but the file ends before its pixels do)"),
                std::string::npos)
          << why;
    }
  }
}

// An Adam7-interlaced 16-bit RGBA PNG of h x w pixels, sample (y, x, ch) = value(y, x, ch),
// its zlib stream in stored (uncompressed) blocks cut into 8 KiB IDAT chunks as libpng
// writes them: the layout for which stb's decoder asks for nearly twice the image's size.
std::vector<uint8_t> interlaced_rgba16_png(int h, int w,
                                           const std::function<uint16_t(int, int, int)>& value) {
  std::vector<uint8_t> raw;
  const int passes[7][4] = {{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4},
                            {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}};  // x0, y0, dx, dy
  for (const auto& p : passes) {
    if (p[0] >= w || p[1] >= h) continue;
    for (int y = p[1]; y < h; y += p[3]) {
      raw.push_back(0);  // filter: none
      for (int x = p[0]; x < w; x += p[2])
        for (int ch = 0; ch < 4; ++ch) {
          const uint16_t v = value(y, x, ch);
          raw.insert(raw.end(), {static_cast<uint8_t>(v >> 8), static_cast<uint8_t>(v)});
        }
    }
  }
  std::vector<uint8_t> z = {0x78, 0x01};
  for (size_t at = 0; at < raw.size(); at += 65535) {
    const auto n = static_cast<uint16_t>(std::min<size_t>(65535, raw.size() - at));
    z.insert(z.end(), {static_cast<uint8_t>(at + n == raw.size()), static_cast<uint8_t>(n),
                       static_cast<uint8_t>(n >> 8), static_cast<uint8_t>(~n),
                       static_cast<uint8_t>(~n >> 8)});
    z.insert(z.end(), raw.begin() + static_cast<std::ptrdiff_t>(at),
             raw.begin() + static_cast<std::ptrdiff_t>(at + n));
  }
  uint32_t a = 1, b = 0;  // Adler-32
  for (uint8_t byte : raw) {
    a = (a + byte) % 65521;
    b = (b + a) % 65521;
  }
  put_be32(z, (b << 16) | a);
  std::vector<uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  std::vector<uint8_t> ihdr;
  put_be32(ihdr, static_cast<uint32_t>(w));
  put_be32(ihdr, static_cast<uint32_t>(h));
  ihdr.insert(ihdr.end(), {16, 6, 0, 0, 1});  // 16 bits, RGBA, deflate, filter 0, Adam7
  put_chunk(png, "IHDR", ihdr.data(), ihdr.size());
  for (size_t at = 0; at < z.size(); at += 8192)
    put_chunk(png, "IDAT", z.data() + at, std::min<size_t>(8192, z.size() - at));
  put_chunk(png, "IEND", nullptr, 0);
  return png;
}

// A 24-bit BMP stored top-down (a negative height in its header), as some writers save.
void save_top_down_bmp(const std::string& path, const Image& img) {
  const auto h = static_cast<int32_t>(img.height), w = static_cast<int32_t>(img.width);
  const int32_t row = (3 * w + 3) / 4 * 4;
  std::vector<uint8_t> f(54 + static_cast<size_t>(row) * h, 0);
  auto le32 = [&](size_t at, int32_t v) {
    for (int k = 0; k < 4; ++k) f[at + k] = static_cast<uint8_t>(static_cast<uint32_t>(v) >> 8 * k);
  };
  f[0] = 'B';
  f[1] = 'M';
  le32(2, static_cast<int32_t>(f.size()));
  le32(10, 54);  // pixel data offset
  le32(14, 40);  // BITMAPINFOHEADER
  le32(18, w);
  le32(22, -h);  // top-down
  f[26] = 1;     // planes
  f[28] = 24;    // bits per pixel
  for (int32_t y = 0; y < h; ++y)
    for (int32_t x = 0; x < w; ++x)
      for (int ch = 0; ch < 3; ++ch)  // BGR
        f[54 + static_cast<size_t>(y) * row + 3 * x + ch] =
            img.rgb[(static_cast<size_t>(y) * w + x) * 3 + 2 - ch];
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(f.data()), static_cast<std::streamsize>(f.size()));
}

// A valid file that stb decodes only with care: a 16-bit interlaced PNG in small IDAT
// chunks (its decoder's buffers grow by doubling to nearly twice the image, which the
// allocation cap allows).
TEST(ImageFolder, SixteenBitInterlacedPngsDecode) {
  const std::string d = temp_dir();
  auto value = [](int y, int x, int ch) {
    return static_cast<uint16_t>((y * 7919 + x * 104729 + ch * 1299709) * 2654435761u >> 16);
  };
  const std::vector<uint8_t> png = interlaced_rgba16_png(512, 512, value);
  std::ofstream(d + "/deep.png", std::ios::binary)
      .write(reinterpret_cast<const char*>(png.data()), static_cast<std::streamsize>(png.size()));
  Image got;
  std::string why;
  ASSERT_TRUE(try_load_image(d + "/deep.png", got, why)) << why;
  ASSERT_EQ(got.height, 512);
  ASSERT_EQ(got.width, 512);
  for (int y : {0, 1, 255, 511})
    for (int x : {0, 3, 300, 511})
      for (int ch = 0; ch < 3; ++ch)  // stb keeps a 16-bit sample's high byte
        EXPECT_EQ(got.rgb[(static_cast<size_t>(y) * 512 + x) * 3 + ch], value(y, x, ch) >> 8)
            << y << "," << x << "," << ch;
}

// Top-down BMPs (a negative height in the header) decode, alone and in a folder, small and
// large (the decoder's allocation cap is worked out from the height's magnitude).
TEST(ImageFolder, TopDownBmpsDecode) {
  const std::string d = temp_dir();
  Image got;
  std::string why;
  for (int64_t side : {8, 320}) {
    Image img{side, side + 1, {}};
    for (int64_t i = 0; i < side * (side + 1) * 3; ++i)
      img.rgb.push_back(static_cast<uint8_t>(i * 31 + 7));
    const std::string folder = d + "/bmp" + std::to_string(side);
    fs::create_directories(folder);
    save_top_down_bmp(folder + "/top.bmp", img);
    ASSERT_TRUE(try_load_image(folder + "/top.bmp", got, why)) << side << ": " << why;
    EXPECT_EQ(got.rgb, img.rgb) << side;
    EXPECT_EQ(image_size(folder + "/top.bmp"), std::make_pair(side, side + 1));
    EXPECT_EQ(ImageFolder(folder, {.frames = 1, .height = 8, .width = 8}).size(), 1);
  }
}

// A TGA row read whole may be exactly as long as one of stb's buffer refills (128 bytes: 32
// RGBA pixels or 128 grey ones); a file cut inside its last such row is still refused.
TEST(ImageFolder, ATgaCutInsideARowOfARefillsLengthIsRefused) {
  const std::string d = temp_dir();
  stbi_write_tga_with_rle = 0;
  for (const auto& [w, comp] : {std::pair{32, 4}, std::pair{128, 1}}) {
    std::vector<uint8_t> px(static_cast<size_t>(w * 16 * comp));
    for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>(i * 7);
    const std::string f = d + "/row" + std::to_string(w) + ".tga";
    ASSERT_TRUE(stbi_write_tga(f.c_str(), w, 16, comp, px.data()));
    Image got;
    std::string why;
    ASSERT_TRUE(try_load_image(f, got, why)) << f << ": " << why;
    fs::resize_file(f, fs::file_size(f) - 10);
    EXPECT_FALSE(try_load_image(f, got, why)) << f << " cut by 10 bytes decoded";
    EXPECT_NE(why.find("the file ends before its pixels do"), std::string::npos) << why;
  }
  stbi_write_tga_with_rle = 1;
}

// A decompression bomb: a PNG whose header says 1x1 but whose data inflates to 12 MiB
// (stb's inflate would grow its buffer toward 2 GiB for more). Its decoder is held to what
// the header's size needs, so it fails as corrupt instead of allocating. And a file of a
// format zt does not read under an image's name (a PPM called .png) is not decoded.
TEST(ImageFolder, AnImageThatInflatesPastItsHeaderOrIsAnotherFormatIsRefused) {
  const std::string d = temp_dir();
  std::vector<uint8_t> png = encode_png(solid(2048, 2048, 0, 0, 0));
  const uint8_t one_by_one[8] = {0, 0, 0, 1, 0, 0, 0, 1};  // IHDR width, height, and its CRC
  std::memcpy(png.data() + 16, one_by_one, 8);
  std::vector<uint8_t> crc;
  put_be32(crc, crc32_of(png.data() + 12, 17));
  std::memcpy(png.data() + 29, crc.data(), 4);
  const std::string bomb = d + "/bomb.png";
  std::ofstream(bomb, std::ios::binary)
      .write(reinterpret_cast<const char*>(png.data()), static_cast<std::streamsize>(png.size()));
  Image got;
  std::string why;
  EXPECT_FALSE(try_load_image(bomb, got, why));
  EXPECT_NE(why.find("corrupt or truncated file (its header reads as a 1x1 image"),
            std::string::npos)
      << why;
  const std::string ppm = d + "/ppm.png";
  std::ofstream(ppm, std::ios::binary) << "P6\n2 2\n255\n" << std::string(12, '\x7f');
  EXPECT_FALSE(try_load_image(ppm, got, why));
  EXPECT_NE(why.find("zt reads PNG, JPEG, BMP and TGA files"), std::string::npos) << why;
}

// Files of other extensions (.webp, .gif, ...) are not read, but counted: the start-up
// line says how many of each were left out, and a folder with no image says what it
// holds instead. Hidden files are not counted.
TEST(ImageFolder, SaysWhichFilesItSkipped) {
  const std::string d = temp_dir();
  save_png(d + "/a.png", solid(8, 8, 1, 2, 3));
  for (const char* name : {"/x.webp", "/y.WEBP", "/notes.txt", "/.z.webp"})
    std::ofstream(d + name) << "not read";
  ImageFolder f(d, {.frames = 1, .height = 8, .width = 8});
  EXPECT_EQ(f.size(), 1);
  EXPECT_EQ(f.describe(), "ImageFolder('" + d + "', 1 image; skipped 3 files: .webp 2, .txt 1)");
  fs::remove(d + "/a.png");
  expect_error([&] { ImageFolder(d, {.frames = 1}); },
               {"no images (.png", "it holds 3 files: .webp 2, .txt 1, which zt does not read"});
  fs::remove(d + "/notes.txt");
  fs::remove(d + "/x.webp");
  fs::remove(d + "/y.WEBP");
  save_png(d + "/b.png", solid(8, 8, 1, 2, 3));
  EXPECT_EQ(ImageFolder(d, {.frames = 1}).describe(), "ImageFolder('" + d + "', 1 image)");
}

}  // namespace
}  // namespace zt::data
