// Helpers the data tests share: a fresh folder per test, an error's expected fragments,
// a one-colour image, and the pieces of a PNG written by hand.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "core/error.h"
#include "data/image.h"

namespace zt::data::datatest {

/// A fresh folder for the running test (ctest may run tests in parallel), removed with the
/// process's temporary folder.
inline std::string temp_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::filesystem::path d = std::filesystem::path(test::process_temp_dir("zt_data_test")) /
                                  (std::string(info->test_suite_name()) + "." + info->name());
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d.string();
}

/// Fails unless fn() throws zt::Error whose message holds every fragment.
inline void expect_error(const std::function<void()>& fn,
                         const std::vector<std::string>& fragments) {
  try {
    fn();
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    for (const auto& f : fragments)
      EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << e.what();
  }
}

/// An h x w image of one colour.
inline Image solid(int64_t h, int64_t w, uint8_t r, uint8_t g, uint8_t b) {
  Image img{h, w, {}};
  for (int64_t i = 0; i < h * w; ++i) img.rgb.insert(img.rgb.end(), {r, g, b});
  return img;
}

// Big-endian bytes of v, as PNG writes its numbers.
inline void put_be32(std::vector<uint8_t>& out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<uint8_t>(v >> s));
}

// PNG's CRC-32 of n bytes.
inline uint32_t crc32_of(const uint8_t* bytes, size_t n) {
  return test::bitwise_crc32(bytes, n, 0xedb88320u);
}

// A PNG chunk: length, type, data and the CRC-32 of type and data.
inline void put_chunk(std::vector<uint8_t>& out, const char* type, const uint8_t* data, size_t n) {
  std::vector<uint8_t> body(type, type + 4);
  body.insert(body.end(), data, data + n);
  put_be32(out, static_cast<uint32_t>(n));
  out.insert(out.end(), body.begin(), body.end());
  put_be32(out, crc32_of(body.data(), body.size()));
}

}  // namespace zt::data::datatest
