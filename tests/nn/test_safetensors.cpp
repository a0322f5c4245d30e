// safetensors and state dicts: round trips of every dtype, a model saved and loaded into
// a fresh one gives bit-identical outputs, and a table of corrupt, truncated and
// mismatched files that must each fail with a clear error (never a crash).
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "common/test_util.h"
#include "nn/nn.h"

using namespace zt;
using zt::test::values_are;

namespace {

std::string tmp_path(const std::string& name) {
  return ::testing::TempDir() + "zt_nn_" + std::to_string(::getpid()) + "_" + name;
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// A raw file: 8-byte length (or `len_override`), the header text, then `data_bytes` bytes.
std::string raw_file(const std::string& header, size_t data_bytes, int64_t len_override = -1) {
  uint64_t n = len_override >= 0 ? static_cast<uint64_t>(len_override) : header.size();
  std::string out(reinterpret_cast<const char*>(&n), 8);
  return out + header + std::string(data_bytes, '\0');
}

using test::error_of;

std::shared_ptr<nn::Sequential> small_cnn() {
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Conv2d>(nn::Conv2dOptions(2, 4, 3).padding(1)),
      std::make_shared<nn::BatchNorm2d>(nn::BatchNormOptions(4)), std::make_shared<nn::SiLU>(),
      std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(4 * 4 * 4, 3)});
}

}  // namespace

TEST(Safetensors, RoundTripEveryDtypeWithMetadata) {
  std::vector<std::pair<std::string, Tensor>> ts{
      {"f32", from_vector({1.5, -2, 3}, {3})},
      {"f16", from_vector({0.5, -1}, {2}, DType::f16)},
      {"bf16", from_vector({2, 4, 8, 16}, {2, 2}, DType::bf16)},
      {"f64", from_vector({3.141592653589793}, {1, 1}, DType::f64)},
      {"i64", from_vector({-7, 1ll << 40}, {2}, DType::i64)},
      {"i32", from_vector({5}, {}, DType::i32)},
      {"bool", from_vector({1, 0, 1}, {3}, DType::b8)},
      {"empty", zeros({0, 3})},
      {"strided", arange(0, 6).reshape({2, 3}).transpose(0, 1)}};
  std::string path = tmp_path("dtypes.safetensors");
  nn::save_safetensors(path, ts, {{"format", "pt"}, {"step", "12"}});
  nn::SafetensorsFile f(path);
  std::vector<std::string> keys;
  for (auto& [n, t] : ts) keys.push_back(n);
  EXPECT_EQ(f.keys(), keys);
  EXPECT_EQ(f.metadata().at("step"), "12");
  EXPECT_EQ(f.info("bf16").dtype, DType::bf16);
  EXPECT_EQ(f.info("bf16").shape, (Shape{2, 2}));
  for (auto& [n, t] : ts) {
    Tensor got = f.get(n);
    EXPECT_EQ(got.dtype(), t.dtype()) << n;
    EXPECT_EQ(got.sizes(), t.sizes()) << n;
    EXPECT_EQ(got.to_vector(), t.to_vector()) << n;
  }
  // Zero-copy views outlive the file object and never write back to the file.
  Tensor v = f.view("f64");
  std::string before = read_bytes(path);
  {
    nn::SafetensorsFile g(path);
    v = g.view("f64");
  }
  v.fill_(0.0);
  EXPECT_EQ(read_bytes(path), before);
  EXPECT_EQ(nn::load_safetensors(path).size(), ts.size());
  EXPECT_NE(error_of([&] { f.get("nope"); }).find("no tensor 'nope'"), std::string::npos);
  EXPECT_THROW(nn::save_safetensors(path, {{"a", ones({1})}, {"a", ones({1})}}), Error);
  std::remove(path.c_str());
}

TEST(StateDict, SaveLoadIntoFreshModelIsBitIdentical) {
  manual_seed(1);
  auto a = small_cnn();
  Tensor x = randn({2, 2, 4, 4});
  (*a)(x);  // a training step moves the BatchNorm buffers off their defaults
  a->eval();
  Tensor ya = (*a)(x);
  std::string path = tmp_path("model.safetensors");
  nn::save_safetensors(path, nn::state_dict(*a));

  manual_seed(2);
  auto b = small_cnn();
  b->eval();
  Tensor w_handle = b->at<nn::Conv2d>(0)->weight;
  EXPECT_NE((*b)(x).to_vector(), ya.to_vector());
  auto r = nn::load_state_dict(*b, nn::load_safetensors(path));
  EXPECT_TRUE(r.missing_keys.empty() && r.unexpected_keys.empty());
  EXPECT_TRUE(w_handle.same(b->at<nn::Conv2d>(0)->weight));  // loaded in place
  EXPECT_EQ((*b)(x).to_vector(), ya.to_vector());
  EXPECT_EQ(b->at<nn::BatchNorm2d>(1)->num_batches_tracked.item(), 1.0);
  std::remove(path.c_str());
}

TEST(StateDict, AllProblemsReportedInOneError) {
  auto m = small_cnn();
  auto sd = nn::state_dict(*m);
  nn::NamedTensors bad;
  for (auto& [n, t] : sd) {
    if (n == "1.running_mean") continue;  // missing
    if (n == "4.bias")
      bad.emplace_back(n, zeros({5}));  // wrong shape
    else
      bad.emplace_back(n, t.clone());
  }
  bad.emplace_back("5.weight", zeros({1}));  // unexpected
  Tensor before = m->at<nn::Linear>(4)->weight.clone();
  std::string e = error_of([&] { nn::load_state_dict(*m, bad); });
  EXPECT_NE(e.find("missing keys (1): 1.running_mean"), std::string::npos) << e;
  EXPECT_NE(e.find("unexpected keys (1): 5.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("4.bias (checkpoint [5], model [3])"), std::string::npos) << e;
  EXPECT_EQ(e.find("strict=false"), std::string::npos) << "it would fail as well: " << e;
  EXPECT_EQ(m->at<nn::Linear>(4)->weight.to_vector(), before.to_vector());  // untouched
  // Non-strict: missing/unexpected are returned; shape mismatches still fail. Keys alone
  // are what strict=false lets through, so then the error suggests it.
  bad.erase(std::remove_if(bad.begin(), bad.end(), [](auto& p) { return p.first == "4.bias"; }),
            bad.end());
  e = error_of([&] { nn::load_state_dict(*m, bad); });
  EXPECT_NE(e.find("pass strict=false to load a subset"), std::string::npos) << e;
  auto r = nn::load_state_dict(*m, bad, /*strict=*/false);
  EXPECT_EQ(r.missing_keys, (std::vector<std::string>{"1.running_mean", "4.bias"}));
  EXPECT_EQ(r.unexpected_keys, std::vector<std::string>{"5.weight"});
  // Integers where the model holds floats are another tensor's bits: refused, strict or
  // not. Floats of another precision convert.
  nn::NamedTensors ints = nn::state_dict(*m), doubles = nn::state_dict(*m);
  for (auto& [n, t] : ints)
    if (n == "4.bias") t = t.to(DType::i64);
  for (auto& [n, t] : doubles)
    if (is_floating(t.dtype())) t = t.to(DType::f64);
  e = error_of([&] { nn::load_state_dict(*m, ints, /*strict=*/false); });
  EXPECT_NE(e.find("wrong kinds of dtype: 4.bias (checkpoint i64, model f32)"), std::string::npos)
      << e;
  EXPECT_EQ(error_of([&] { nn::load_state_dict(*m, doubles); }), "");
}

TEST(StateDict, AnEntryOfTheRightSizeButAnotherShapeIsRefused) {
  // A transposed weight has as many elements as the model's: loading it would scramble
  // the weights without a word, so the shape itself must match (as PyTorch's load).
  auto m = small_cnn();
  nn::NamedTensors dict = nn::state_dict(*m);
  for (auto& [n, t] : dict)
    if (n == "4.weight") t = t.transpose(0, 1).contiguous();  // [3, 64] -> [64, 3]
  const Tensor before = m->at<nn::Linear>(4)->weight.clone();
  const std::string e = error_of([&] { nn::load_state_dict(*m, dict); });
  EXPECT_NE(e.find("4.weight (checkpoint [64, 3], model [3, 64])"), std::string::npos) << e;
  EXPECT_EQ(m->at<nn::Linear>(4)->weight.to_vector(), before.to_vector());  // untouched
}

TEST(Safetensors, CorruptFilesAreRejectedClearly) {
  const std::string ok = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  struct Case {
    const char* name;
    std::string bytes;
    const char* expect;  // a fragment of the error message
  };
  std::vector<Case> cases{
      {"empty file", "", "too small for the 8-byte header length"},
      {"short length field", std::string(4, '\0'), "too small"},
      {"length past end", raw_file(ok, 8, 4096), "truncated: header length 4096"},
      {"absurd length", raw_file(ok, 8, 1ll << 40), "exceeds"},
      {"another kind of file", "model:\n  ch: 32\n  codebook_size: 256\n",
       "not a safetensors file (it should start with the 8-byte length of a JSON header"},
      {"not json", raw_file("{\"a\": [1,", 0), "not valid JSON"},
      {"not an object", raw_file("[1, 2]", 0), "must be a JSON object"},
      {"entry not an object", raw_file(R"({"a": 3})", 0), "entry must be an object"},
      {"missing dtype", raw_file(R"({"a":{"shape":[2],"data_offsets":[0,8]}})", 8),
       "missing string 'dtype'"},
      {"unknown dtype", raw_file(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})", 2),
       "unsupported dtype 'U8'"},
      {"negative dim", raw_file(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8),
       "non-negative integers"},
      {"fractional dim", raw_file(R"({"a":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", 8),
       "non-negative integers"},
      {"shape overflow",
       raw_file(
           R"({"a":{"dtype":"F32","shape":[4611686018427387904,4611686018427387904],"data_offsets":[0,8]}})",
           8),
       "overflows"},
      // No elements, but strides past an int64: refused when the file is read, not when
      // the tensor is made.
      {"empty shape with huge dims",
       raw_file(
           R"({"a":{"dtype":"F32","shape":[0,4611686018427387904,4611686018427387904],"data_offsets":[0,0]}})",
           0),
       "tensor 'a': shape [0,4611686018427387904,4611686018427387904] overflows"},
      {"offsets arity", raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", 8),
       "must be [begin, end]"},
      {"offsets reversed", raw_file(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 8),
       "end before they begin"},
      {"truncated data", raw_file(ok, 4), "run past the end"},
      {"size mismatch", raw_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8),
       "needs 12"},
      {"span too long", raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,8]}})", 8),
       "data_offsets span 8 bytes but F32[1] needs 4"},
      {"overlap",
       raw_file(
           R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
           12),
       "overlap"},
      {"gap", raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8),
       "gap of 4 bytes"},
      {"trailing bytes", raw_file(ok, 12), "4 trailing bytes"},
      {"bad metadata", raw_file(R"({"__metadata__":{"k":1}})", 0), "is not a string"},
      // Nesting the parser and the error messages would recurse through (a stack
      // overflow at about 100,000 levels), in a shape and in the offsets.
      {"deep shape",
       raw_file(R"({"a":{"dtype":"F32","shape":[)" + std::string(200000, '[') +
                    std::string(200000, ']') + R"(],"data_offsets":[0,0]}})",
                0),
       "header nests 200003 levels deep"},
      {"deep offsets",
       raw_file(R"({"a":{"dtype":"F32","shape":[],"data_offsets":[)" + std::string(200000, '[') +
                    std::string(200000, ']') + R"(,0]}})",
                0),
       "levels deep"},
      {"brackets inside a string do not nest",
       raw_file(R"({"a[[[[[[[[[[\"[[":{"dtype":"F32","shape":[[1]],"data_offsets":[0,4]}})", 4),
       "shape entries must be non-negative integers, got [1]"},
      {"not utf-8", raw_file("{\"a\xff\":3}", 0), "not valid JSON"},
      // JSON would keep the second description; the first would be dropped.
      {"a name given twice",
       raw_file(
           R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}})",
           4),
       "tensor 'a': the header names it twice"},
      // So would an entry's field given twice: which dtype, F32 or I32, is it?
      {"a field given twice",
       raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"dtype":"I32"}})", 4),
       "tensor 'a': the header gives its 'dtype' twice"},
      {"a metadata key given twice", raw_file(R"({"__metadata__":{"k":"1","k":"2"}})", 0),
       "__metadata__: the header gives its 'k' twice"},
  };
  std::string path = tmp_path("corrupt.safetensors");
  for (const Case& c : cases) {
    write_bytes(path, c.bytes);
    std::string e = error_of([&] { nn::SafetensorsFile f(path); });
    EXPECT_NE(e.find(c.expect), std::string::npos) << c.name << ": got '" << e << "'";
    EXPECT_NE(e.find(path), std::string::npos) << c.name << ": the error should name the file";
  }
  // Names and metadata are JSON strings: they must be UTF-8.
  EXPECT_NE(error_of([&] {
              nn::save_safetensors(path, {{"w\xff", ones({1})}});
            }).find("tensor names and metadata must be valid UTF-8"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              nn::save_safetensors(path, {{"w", ones({1})}}, {{"k", "\xc3"}});
            }).find(path),
            std::string::npos);
  // A good file truncated by a few bytes.
  nn::save_safetensors(path, {{"w", ones({4, 4})}});
  std::string good = read_bytes(path);
  write_bytes(path, good.substr(0, good.size() - 3));
  EXPECT_NE(error_of([&] { nn::load_safetensors(path); }).find("run past the end"),
            std::string::npos);
  // A BOOL tensor holding a byte other than 0/1 fails on access.
  std::string b =
      raw_file(R"({"m":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})", 0) + "\x01\x02";
  write_bytes(path, b);
  nn::SafetensorsFile f(path);
  EXPECT_NE(error_of([&] { f.get("m"); }).find("byte value 2"), std::string::npos);
  EXPECT_NE(error_of([&] { nn::SafetensorsFile g(tmp_path("missing")); }).find("cannot open"),
            std::string::npos);
  std::remove(path.c_str());
}

// A FIFO (a named pipe nothing writes to) is refused as no regular file, not waited on: an
// open of it for reading would block the command forever.
TEST(Safetensors, AFifoIsRefusedRatherThanWaitedOn) {
  const std::string pipe = tmp_path("pipe.safetensors");
  ::unlink(pipe.c_str());
  ASSERT_EQ(::mkfifo(pipe.c_str(), 0600), 0);
  const std::string e = error_of([&] { nn::SafetensorsFile f(pipe); });
  EXPECT_NE(e.find("safetensors file '" + pipe + "': not a regular file"), std::string::npos) << e;
  ::unlink(pipe.c_str());
}

TEST(Safetensors, WrongShapeFileIntoModelIsRejected) {
  std::string path = tmp_path("wrong.safetensors");
  nn::Linear a(4, 3);
  nn::save_safetensors(path, nn::state_dict(a));
  nn::Linear b(4, 2);
  std::string e = error_of([&] { nn::load_state_dict(b, nn::load_safetensors(path)); });
  EXPECT_NE(e.find("weight (checkpoint [3, 4], model [2, 4])"), std::string::npos) << e;
  EXPECT_NE(e.find("bias (checkpoint [3], model [2])"), std::string::npos) << e;
  std::remove(path.c_str());
}

TEST(Safetensors, TheDataSectionStartsEightByteAligned) {
  // The header is padded with spaces to a multiple of 8 bytes (as the format allows), so
  // the data starts 8-byte aligned in the file and in its mapping: with the tensors laid
  // out by descending element size (the bf16 one, named first, goes last), each is aligned
  // for its dtype and view() maps it in place rather than copying it. Names of odd lengths
  // give an unpadded header of any size.
  for (const char* name : {"a", "bb", "ccc", "dddd", "eeeee", "ffffff", "ggggggg"}) {
    const std::string path = tmp_path("aligned.safetensors");
    nn::save_safetensors(path, {{"x", ones({1}, DType::bf16)}, {name, ones({3}, DType::f64)}});
    const std::string bytes = read_bytes(path);
    uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    EXPECT_EQ(n % 8, 0u) << name;
    EXPECT_EQ(bytes.size(), 8 + n + 3 * 8 + 2) << name;
    nn::SafetensorsFile f(path);
    EXPECT_EQ(f.info(name).data_begin, 0u) << name;  // aligned: view() needs no copy
    EXPECT_EQ(f.info("x").data_begin, 3u * 8) << name;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(f.view(name).data_ptr()) % 8, 0u) << name;
    std::remove(path.c_str());
  }
}
