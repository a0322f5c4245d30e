// ImageFolder's links and special files named like images: a link that cannot be followed
// is named with why (a loop of links a.png -> b.png -> a.png is no missing file), and a
// named pipe called x.png is counted among the skipped files.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>

#include "data/data_test_util.h"
#include "data/image.h"
#include "data/image_folder.h"

namespace fs = std::filesystem;

namespace zt::data {
namespace {

using datatest::expect_error;
using datatest::solid;
using datatest::temp_dir;

TEST(ImageFolderLinks, ALoopOfLinksIsNamedAsALoopNotAsAMissingFile) {
  const std::string d = temp_dir();
  fs::create_directories(d + "/set");
  save_png(d + "/set/a.png", solid(8, 8, 1, 2, 3));
  fs::create_symlink("c.png", d + "/set/b.png");
  fs::create_symlink("b.png", d + "/set/c.png");
  // Either of the two is named first, in the directory's order.
  expect_error([&] { ImageFolder(d + "/set", {.frames = 1, .height = 8, .width = 8}); },
               {".png' is a link that cannot be followed (", "a loop of links?)",
                "remove it or restore its target"});
  // A link to a file that is gone still says so.
  fs::remove(d + "/set/c.png");
  expect_error([&] { ImageFolder(d + "/set", {.frames = 1, .height = 8, .width = 8}); },
               {"set/b.png' is a link to a file that does not exist"});
  // A link to an image is read as that image.
  fs::remove(d + "/set/b.png");
  fs::create_symlink("a.png", d + "/set/b.png");
  EXPECT_EQ(ImageFolder(d + "/set", {.frames = 1, .height = 8, .width = 8}).size(), 2);
}

// A named pipe (or other special file) named like an image is not read, and is counted
// among the skipped files the start-up line lists rather than left out unsaid.
TEST(ImageFolderLinks, ASpecialFileNamedLikeAnImageIsCountedAsSkipped) {
  const std::string d = temp_dir();
  save_png(d + "/a.png", solid(8, 8, 1, 2, 3));
  ASSERT_EQ(::mkfifo((d + "/pipe.png").c_str(), 0600), 0);
  ImageFolder f(d, {.frames = 1, .height = 8, .width = 8});
  EXPECT_EQ(f.size(), 1);
  EXPECT_EQ(f.describe(),
            "ImageFolder('" + d + "', 1 image; skipped 1 file: .png (not a regular file) 1)");
  fs::remove(d + "/a.png");
  expect_error([&] { ImageFolder(d, {.frames = 1}); },
               {"no images (.png", "it holds 1 file: .png (not a regular file) 1"});
}

}  // namespace
}  // namespace zt::data
