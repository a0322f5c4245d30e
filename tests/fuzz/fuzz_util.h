// Shared by the fuzz targets: the input written to a per-process scratch file (the parsers
// read files), and the rule that a zt::Error is the parser's correct answer to bad bytes
// while anything else (a crash, a sanitizer report, another exception) is a finding.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"

namespace zt::fuzz {

/// A scratch folder of this process under the temporary directory.
inline std::filesystem::path scratch() {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("zt_fuzz_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

/// Writes the fuzzer's bytes to `path`.
inline void write_bytes(const std::filesystem::path& path, const uint8_t* data, size_t size) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
}

/// Runs f; a zt::Error (the parser refusing bad bytes with a message) is fine.
template <typename F>
void expect_ok_or_error(F&& f) {
  try {
    f();
  } catch (const zt::Error&) {
  }
}

}  // namespace zt::fuzz
