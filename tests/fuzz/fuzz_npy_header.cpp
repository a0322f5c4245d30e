// libFuzzer target: the .npy header parser and the clip reader over arbitrary bytes.
#include "data/npy.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = (zt::fuzz::scratch() / "x.npy").string();
  zt::fuzz::write_bytes(path, data, size);
  zt::fuzz::expect_ok_or_error([&] {
    const zt::data::NpyHeader h = zt::data::read_npy_header(path);
    if (h.numel() <= (1 << 16)) zt::data::load_npy(path);
  });
  zt::fuzz::expect_ok_or_error([&] {
    zt::data::NpyArray a(path, 4);
    if (a.size() > 0) a.get(0);
  });
  return 0;
}
