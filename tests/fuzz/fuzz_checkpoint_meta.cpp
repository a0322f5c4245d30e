// libFuzzer target: a checkpoint's meta.json (and `latest`) as --resume reads them: the
// bytes become meta.json of step_000001 under a scratch root.
#include <filesystem>

#include "tests/fuzz/fuzz_util.h"
#include "zero/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::filesystem::path root = zt::fuzz::scratch() / "ckpt";
  std::filesystem::create_directories(root / "step_000001");
  zt::fuzz::write_bytes(root / "step_000001" / "meta.json", data, size);
  zt::fuzz::write_bytes(root / "latest", data, size < 16 ? size : 16);
  zt::fuzz::expect_ok_or_error(
      [&] { zt::zero::verify_checkpoint((root / "step_000001").string()); });
  zt::fuzz::expect_ok_or_error([&] { zt::zero::find_resume_point(root.string()); });
  zt::fuzz::expect_ok_or_error([&] { zt::zero::find_checkpoint(root.string()); });
  return 0;
}
