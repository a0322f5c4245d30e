// libFuzzer target: the safetensors header (JSON) and tensor table over arbitrary bytes.
#include "nn/safetensors.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = (zt::fuzz::scratch() / "x.safetensors").string();
  zt::fuzz::write_bytes(path, data, size);
  zt::fuzz::expect_ok_or_error([&] {
    zt::nn::SafetensorsFile f(path);
    for (const std::string& k : f.keys()) f.get(k);
  });
  return 0;
}
