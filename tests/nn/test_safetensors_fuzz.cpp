// The safetensors reader fed damaged copies of a valid file: cut short at every length and
// with single bytes changed at every offset (a deterministic sweep). Each copy opens and
// reads back tensors of the shapes and dtypes its header declares, or fails with zt::Error
// naming the file; never a crash or a read outside the mapping (run under the sanitizers to
// see that).
#include <unistd.h>

#include <fstream>
#include <iterator>

#include "common/test_util.h"
#include "nn/nn.h"

using namespace zt;

namespace {

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void write_all_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Opens `path` and reads every tensor both ways; false when it was refused by name.
bool reads(const std::string& path) {
  try {
    nn::SafetensorsFile f(path);
    for (const std::string& k : f.keys()) {
      const nn::SafetensorsInfo& inf = f.info(k);
      const Tensor a = f.get(k), b = f.view(k);
      EXPECT_EQ(a.sizes(), inf.shape);
      EXPECT_EQ(b.dtype(), inf.dtype);
      EXPECT_EQ(static_cast<uint64_t>(a.numel() * dtype_size(a.dtype())),
                inf.data_end - inf.data_begin);
    }
    return true;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    return false;
  }
}

}  // namespace

TEST(SafetensorsFuzz, DamagedCopiesReadAsDeclaredOrAreRefusedByName) {
  const std::string path = ::testing::TempDir() + "zt_st_fuzz_" + std::to_string(::getpid());
  manual_seed(3);
  nn::save_safetensors(path,
                       {{"a", randn({3, 4})},
                        {"b", arange(0, 5, 1, DType::i64)},
                        {"c", randn({2}).to(DType::bf16)},
                        {"d", zeros({0, 3})},
                        {"flag", ones({3}).to(DType::b8)}},
                       {{"format", "pt"}});
  const std::string whole = read_all(path);
  ASSERT_TRUE(reads(path));
  int refused = 0, cuts = 0;
  for (size_t n = 0; n < whole.size(); ++n, ++cuts) {
    write_all_bytes(path, whole.substr(0, n));
    SCOPED_TRACE("cut to " + std::to_string(n));
    refused += !reads(path);
  }
  EXPECT_EQ(refused, cuts) << "a cut file must never read";
  for (size_t i = 0; i < whole.size(); ++i)
    for (const char flip : {'\x01', '\x80', '\xff', '\x20'}) {
      std::string b = whole;
      b[i] = static_cast<char>(b[i] ^ flip);
      write_all_bytes(path, b);
      SCOPED_TRACE("byte " + std::to_string(i) + " ^ " + std::to_string(uint8_t(flip)));
      reads(path);
    }
  std::remove(path.c_str());
}
