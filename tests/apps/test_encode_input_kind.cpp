// vqtok encode --input tells an array from an image by the file's extension, whatever its
// case: X.NPY is read as the .npy array it is (as X.PNG is read as an image), not refused
// as "neither .npy, an image file nor a folder"; a folder is read as images, and one of
// arrays is told to pass each array file.
#include <gtest/gtest.h>

#include <filesystem>

#include "apps/app_test_util.h"
#include "apps/vqtok/vqtok_app.h"
#include "common/test_util.h"
#include "core/ops.h"
#include "data/npy.h"

using namespace zt;
namespace fs = std::filesystem;

TEST(VqtokEncodeInput, AnUpperCaseNpyExtensionIsReadAsAnArray) {
  const std::string dir = apptest::fresh_dir("zt_vqtok_input", "upper_npy");
  fs::create_directories(dir);
  const config::AppConfig cfg = apptest::tiny_vqtok_config(dir);
  const std::string weights = dir + "/tok.safetensors";
  apptest::save_fresh_tokenizer(cfg, weights);
  data::save_npy(dir + "/lower.npy", zeros({2, 3, 16, 16}));
  fs::copy_file(dir + "/lower.npy", dir + "/UPPER.NPY");
  vqtok::EncodeOptions o;
  o.weights = weights;
  o.quiet = true;
  o.input = dir + "/lower.npy";
  o.out = dir + "/lower_codes.npy";
  apptest::encode_on_one_rank(cfg, o);
  o.input = dir + "/UPPER.NPY";
  o.out = dir + "/upper_codes.npy";
  apptest::encode_on_one_rank(cfg, o);
  const Tensor lower = data::load_npy(dir + "/lower_codes.npy");
  const Tensor upper = data::load_npy(dir + "/upper_codes.npy");
  ASSERT_EQ(upper.sizes(), (Shape{2, 2, 2}));
  EXPECT_EQ(upper.to_vector(), lower.to_vector());
  fs::remove_all(dir);
}

// A folder is read as images: one that holds .npy arrays and no image is told to pass each
// array as its own --input, which works, not to convert the arrays to PNG.
TEST(VqtokEncodeInput, AFolderOfNpyFilesIsToldToPassEachFile) {
  const std::string dir = apptest::fresh_dir("zt_vqtok_input", "npy_folder");
  fs::create_directories(dir + "/arrays");
  const config::AppConfig cfg = apptest::tiny_vqtok_config(dir);
  vqtok::EncodeOptions o;
  o.weights = dir + "/tok.safetensors";
  apptest::save_fresh_tokenizer(cfg, o.weights);
  data::save_npy(dir + "/arrays/a.npy", zeros({2, 3, 16, 16}));
  o.quiet = true;
  o.input = dir + "/arrays";
  o.out = dir + "/codes.npy";
  const std::string err = test::error_of([&] { apptest::encode_on_one_rank(cfg, o); });
  EXPECT_NE(err.find("is a folder, which encode reads as images, and it holds .npy arrays but no "
                     "image; pass each .npy file as --input itself"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("convert"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(o.out));
  fs::remove_all(dir);
}
