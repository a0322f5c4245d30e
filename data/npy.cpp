// .npy reading and writing. The header is a Python dict literal, e.g.
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 4, 3, 32, 32), }
// parsed by a small strict scanner (exactly these three keys, nothing else).
#include "data/npy.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/ops/factory.h"
#include "core/text_file.h"

namespace zt::data {

namespace {

constexpr char kMagic[] = "\x93NUMPY";

// A cursor over the header dict text; errors name the file.
struct Scanner {
  const std::string& s;
  const std::string& path;
  // Python 2's numpy wrote long dimensions with an L ("(3L, 2L)"), in versions 1.0 and 2.0,
  // whose headers numpy still reads so.
  bool longs = false;
  size_t i = 0;
  void ws() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t')) ++i;
  }
  [[noreturn]] void bad(const std::string& what) {
    ZT_FAIL("'", path, "' is not a valid .npy file: ", what, " in header \"", s, "\"");
  }
  bool eat(char c) {
    ws();
    if (i < s.size() && s[i] == c) return ++i, true;
    return false;
  }
  void expect(char c) {
    if (!eat(c)) bad(std::string("expected '") + c + "'");
  }
  std::string quoted() {
    ws();
    if (i >= s.size() || (s[i] != '\'' && s[i] != '"')) bad("expected a quoted string");
    const char q = s[i++];
    const size_t e = s.find(q, i);
    if (e == std::string::npos) bad("unterminated string");
    std::string out = s.substr(i, e - i);
    i = e + 1;
    return out;
  }
  // The text of a list or tuple from its opening bracket to the one that closes it (quoted
  // names skipped), or "" when none is next.
  std::string bracketed() {
    ws();
    if (i >= s.size() || (s[i] != '[' && s[i] != '(')) return "";
    const size_t from = i;
    int depth = 0;
    for (char q = 0; i < s.size(); ++i) {
      if (q) {
        q = s[i] == q ? 0 : q;
      } else if (s[i] == '\'' || s[i] == '"') {
        q = s[i];
      } else if (s[i] == '[' || s[i] == '(') {
        ++depth;
      } else if ((s[i] == ']' || s[i] == ')') && --depth == 0) {
        return s.substr(from, ++i - from);
      }
    }
    bad("unterminated list");
  }
  bool boolean() {
    ws();
    if (s.compare(i, 4, "True") == 0) return i += 4, true;
    if (s.compare(i, 5, "False") == 0) return i += 5, false;
    bad("expected True or False");
  }
  Shape tuple() {
    expect('(');
    Shape shape;
    while (!eat(')')) {
      ws();
      size_t j = i;
      while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      if (j == i) bad("expected a dimension");
      if (j - i > 15) bad("a dimension of more than 15 digits");
      shape.push_back(std::stoll(s.substr(i, j - i)));
      i = j < s.size() && s[j] == 'L' && longs ? j + 1 : j;
      if (!eat(',')) {
        expect(')');
        break;
      }
    }
    return shape;
  }
};

int64_t file_size(const std::string& path) {
  std::error_code ec;
  const auto n = std::filesystem::file_size(path, ec);
  ZT_CHECK(!ec, "cannot read '", path, "': ", ec.message());
  return static_cast<int64_t>(n);
}

const char* descr_of(DType t) {
  switch (t) {
    case DType::f32:
      return "<f4";
    case DType::f64:
      return "<f8";
    case DType::f16:
      return "<f2";
    case DType::i64:
      return "<i8";
    case DType::i32:
      return "<i4";
    case DType::b8:
      return "|b1";
    case DType::bf16:
      break;
  }
  ZT_FAIL("save_npy: dtype ", dtype_name(t), " has no .npy equivalent; convert with .to(f32)");
}

}  // namespace

NpyHeader read_npy_header(const std::string& path) {
  std::error_code ec;
  ZT_CHECK(!std::filesystem::is_directory(path, ec), "'", path,
           "' is a folder, not a .npy file (a folder of images is data.kind: image_folder)");
  // Opened with no writer, a FIFO blocks forever; and a clip is read by seeking to it.
  const auto type = std::filesystem::status(path, ec).type();
  const char* odd =
      type == std::filesystem::file_type::fifo     ? "a FIFO"
      : type == std::filesystem::file_type::socket ? "a socket"
      : type == std::filesystem::file_type::block || type == std::filesystem::file_type::character
          ? "a device"
          : nullptr;
  ZT_CHECK(!odd, "'", path, "' is ", odd,
           ", not a regular file: zt reads a .npy file by seeking to each clip; save the array "
           "to a file (numpy.save) and name that");
  std::ifstream f(path, std::ios::binary);
  ZT_CHECK(f, "cannot open '", path, "': ", std::strerror(errno));
  char pre[8] = {};
  f.read(pre, 8);
  ZT_CHECK(f.gcount() == 8 && std::memcmp(pre, kMagic, 6) == 0, "'", path,
           "' is not a .npy file (bad magic; write it with numpy.save)");
  const int major = static_cast<unsigned char>(pre[6]);
  ZT_CHECK(major >= 1 && major <= 3, "'", path, "': unsupported .npy version ", major);
  uint32_t hlen = 0;
  unsigned char lb[4] = {};
  const int nlen = major == 1 ? 2 : 4;
  f.read(reinterpret_cast<char*>(lb), nlen);
  ZT_CHECK(f.gcount() == nlen, "'", path, "' is truncated inside its header");
  for (int k = nlen - 1; k >= 0; --k) hlen = (hlen << 8) | lb[k];
  ZT_CHECK(hlen < (1u << 20), "'", path, "': implausible header length ", hlen);
  std::string text(hlen, '\0');
  f.read(text.data(), hlen);
  ZT_CHECK(f.gcount() == static_cast<std::streamsize>(hlen), "'", path,
           "' is truncated inside its header");

  NpyHeader h;
  h.data_offset = 8 + nlen + hlen;
  Scanner sc{text, path, /*longs=*/major <= 2};
  bool have_descr = false, have_order = false, have_shape = false, fortran = false;
  sc.expect('{');
  while (!sc.eat('}')) {
    const std::string key = sc.quoted();
    sc.expect(':');
    if (key == "descr") {
      // A structured dtype is a list of fields ([('x', '<f4'), ...]), a sub-array one a tuple.
      const std::string fields = sc.bracketed();
      ZT_CHECK(fields.empty(), "'", path, "' has the structured dtype ", fields,
               ": its items are records of fields, not plain numbers; save a plain numeric "
               "array (numpy.lib.recfunctions.structured_to_unstructured(arr).astype('<f4'))");
      h.descr = sc.quoted();
      have_descr = true;
    } else if (key == "fortran_order") {
      fortran = sc.boolean();
      have_order = true;
    } else if (key == "shape") {
      h.shape = sc.tuple();
      have_shape = true;
    } else {
      sc.bad("unexpected key '" + key + "'");
    }
    if (!sc.eat(',')) {
      sc.expect('}');
      break;
    }
  }
  sc.ws();  // numpy pads the dict with spaces and ends it with '\n'; nothing else follows
  if (sc.i != text.size()) sc.bad("text after the closing '}'");
  if (!have_descr || !have_order || !have_shape)
    sc.bad("missing one of 'descr', 'fortran_order', 'shape'");
  ZT_CHECK(!fortran, "'", path,
           "' is in Fortran order; save a C-order array (numpy.ascontiguousarray)");
  const std::string& d = h.descr;
  ZT_CHECK(d.find('O') == std::string::npos, "'", path, "' has dtype '", d,
           "': an object array (Python objects, saved with pickling) holds no plain numbers; "
           "save a numeric array instead (e.g. numpy.stack(list).astype('<f4'))");
  ZT_CHECK(d.size() == 3 && (d[0] == '<' || d[0] == '|' || d[0] == '=' || d[0] == '>'), "'", path,
           "' has dtype '", d,
           "', which is not a plain numeric dtype (supported: f2, f4, f8, i4, i8, u1, b1)");
  ZT_CHECK(d[0] != '>' || d[2] == '1', "'", path, "' has dtype '", d,
           "': only little-endian arrays are read (use arr.astype('<", d.substr(1), "'))");
  h.kind = d[1];
  h.item_size = d[2] - '0';
  const bool ok = (h.kind == 'f' && (h.item_size == 2 || h.item_size == 4 || h.item_size == 8)) ||
                  (h.kind == 'i' && (h.item_size == 4 || h.item_size == 8)) ||
                  (h.kind == 'u' && h.item_size == 1) || (h.kind == 'b' && h.item_size == 1);
  ZT_CHECK(ok, "'", path, "' has unsupported dtype '", d,
           "' (supported: f2, f4, f8, i4, i8, u1, b1)");
  // The product, checked against overflow on the way over the nonzero dimensions, as numpy
  // checks it: a 0 among them leaves no data but the array's strides still count the rest.
  int64_t bytes = h.item_size;
  bool empty = false;
  for (int64_t d : h.shape) {
    empty = empty || d == 0;
    ZT_CHECK(d == 0 || bytes <= (int64_t{1} << 60) / d, "'", path, "' has shape ",
             shape_str(h.shape), ": more data than any file holds (corrupt header?)");
    if (d != 0) bytes *= d;
  }
  if (empty) bytes = 0;
  const int64_t expect = h.data_offset + bytes;
  const int64_t actual = file_size(path);
  ZT_CHECK(actual >= expect, "'", path, "' is truncated: shape ", shape_str(h.shape), " of ", d,
           " needs ", expect, " bytes, the file has ", actual);
  ZT_CHECK(actual == expect, "'", path, "' has ", actual - expect,
           " unexpected trailing bytes after its ", shape_str(h.shape), " array");
  return h;
}

Tensor load_npy(const std::string& path) {
  const NpyHeader h = read_npy_header(path);
  DType dt = DType::f32;
  if (h.kind == 'f')
    dt = h.item_size == 2 ? DType::f16 : h.item_size == 4 ? DType::f32 : DType::f64;
  if (h.kind == 'i') dt = h.item_size == 4 ? DType::i32 : DType::i64;
  if (h.kind == 'u') dt = DType::i32;
  if (h.kind == 'b') dt = DType::b8;
  Tensor t = empty(h.shape, dt);
  std::ifstream f(path, std::ios::binary);
  f.seekg(h.data_offset);
  const int64_t n = h.numel();
  if (h.kind == 'u') {
    std::vector<uint8_t> raw(static_cast<size_t>(n));
    f.read(reinterpret_cast<char*>(raw.data()), n);
    int32_t* p = t.data<int32_t>();
    for (int64_t i = 0; i < n; ++i) p[i] = raw[static_cast<size_t>(i)];
  } else {
    f.read(static_cast<char*>(t.data_ptr()), n * h.item_size);
  }
  ZT_CHECK(f.good() || n == 0, "'", path, "': read failed (file changed while reading?)");
  if (h.kind == 'b') {  // a C++ bool holds 0 or 1 and nothing else
    const auto* bytes = static_cast<const uint8_t*>(t.data_ptr());
    for (int64_t i = 0; i < n; ++i)
      ZT_CHECK(bytes[i] <= 1, "'", path, "': element ", i, " of the bool array is byte ",
               int{bytes[i]}, ", not 0 or 1");
  }
  return t;
}

std::string npy_header(DType dtype, const Shape& sizes) {
  const char* descr = descr_of(dtype);
  std::string shape = "(";
  for (size_t i = 0; i < sizes.size(); ++i)
    shape += std::to_string(sizes[i]) + (sizes.size() == 1      ? ","
                                         : i + 1 < sizes.size() ? ", "
                                                                : "");
  shape += ")";
  std::string header =
      std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad with spaces so magic + version + length + header is a multiple of 64, then '\n'.
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  const uint16_t hlen = static_cast<uint16_t>(header.size());
  // magic, version 1.0, header length (little-endian)
  return std::string(kMagic, 6) + '\x01' + '\x00' + static_cast<char>(hlen & 0xff) +
         static_cast<char>(hlen >> 8) + header;
}

void save_npy(const std::string& path, const Tensor& t) {
  ZT_CHECK(t.defined(), "save_npy '", path, "': undefined tensor");
  const Tensor c = t.to(Device::cpu()).contiguous();
  const std::string header = npy_header(c.dtype(), c.sizes());
  write_file_atomically(path, [&](std::FILE* f) {
    return write_all(f, header.data(), header.size()) &&
           write_all(f, c.data_ptr(), static_cast<size_t>(c.numel()) * dtype_size(c.dtype()));
  });
}

NpyArray::NpyArray(const std::string& path, int64_t frames)
    : path_(path), header_(read_npy_header(path)), frames_(frames) {
  const Shape& s = header_.shape;
  ZT_CHECK((s.size() == 5 && s[2] == 3) || (s.size() == 4 && s[1] == 3), "'", path, "' has shape ",
           shape_str(s),
           "; clips must be (N, T, 3, H, W) or images (N, 3, H, W), channels-first RGB");
  ZT_CHECK(s[0] >= 1, "'", path, "' holds no clips (N = 0)");
  ZT_CHECK(s[s.size() - 1] >= 1 && s[s.size() - 2] >= 1 && (s.size() == 4 || s[1] >= 1), "'", path,
           "' has shape ", shape_str(s), ": its frames are empty (T, H and W must be >= 1)");
  ZT_CHECK((header_.kind == 'f' && header_.item_size == 4) ||
               (header_.kind == 'u' && header_.item_size == 1),
           "'", path, "' has dtype '", header_.descr,
           "'; clips must be float32 in [-1, 1] or uint8 pixels");
  ZT_CHECK(frames_ >= 1, "NpyArray: frames must be >= 1");
  ZT_CHECK(s.size() == 4 || s[1] == frames_, "'", path, "' holds clips of ", s[1],
           " frames but data.frames is ", frames_, "; set data.frames=", s[1],
           " (or re-save the clips with ", frames_, " frames)");
  if (header_.kind == 'f') warn_if_unit_range();
}

void NpyArray::warn_if_unit_range() const {
  // Float clips in [0, 1] (torchvision's ToTensor range) pass the [-1, 1] check but train on
  // washed-out images: up to 8 clips spread over the file, none below 0, earn a warning
  // (once per file and process: thread ranks open the same file each).
  static std::mutex mu;
  static std::set<std::string> warned;
  float lowest = 1.0f;
  const int64_t n = std::min<int64_t>(size(), 8);
  for (int64_t i = 0; i < n; ++i) {
    const Tensor clip = get(i * size() / n).clip;
    const float* p = clip.data<float>();
    if (clip.numel() > 0) lowest = std::min(lowest, *std::min_element(p, p + clip.numel()));
  }
  if (lowest < 0.0f) return;
  std::lock_guard<std::mutex> lock(mu);
  if (!warned.insert(path_).second) return;
  std::fprintf(stderr,
               "zt: warning: '%s': the %lld float clips sampled hold no value below 0 (lowest "
               "%g): zt expects pixels in [-1, 1]; data in [0, 1] needs x * 2 - 1\n",
               path_.c_str(), static_cast<long long>(n), static_cast<double>(lowest));
}

Sample NpyArray::get(int64_t index) const {
  ZT_CHECK(index >= 0 && index < size(), "NpyArray '", path_, "': index ", index,
           " out of range [0, ", size(), ")");
  const Shape& s = header_.shape;
  const bool images = s.size() == 4;
  const int64_t T = images ? 1 : s[1];
  const int64_t H = s[s.size() - 2], W = s[s.size() - 1];
  const int64_t n = T * 3 * H * W;
  std::ifstream f(path_, std::ios::binary);
  ZT_CHECK(f, "cannot open '", path_, "': ", std::strerror(errno));
  f.seekg(header_.data_offset + index * n * header_.item_size);
  const int64_t T_out = images ? frames_ : T;
  Tensor clip = empty({T_out, 3, H, W}, DType::f32);
  float* out = clip.data<float>();
  if (header_.kind == 'u') {
    std::vector<uint8_t> raw(static_cast<size_t>(n));
    f.read(reinterpret_cast<char*>(raw.data()), n);
    for (int64_t i = 0; i < n; ++i)
      out[i] = static_cast<float>(raw[static_cast<size_t>(i)]) / 127.5f - 1.0f;
  } else {
    f.read(reinterpret_cast<char*>(out), n * 4);
    for (int64_t i = 0; i < n; ++i)
      ZT_CHECK(std::fabs(out[i]) <= 1.001f, "'", path_, "' clip ", index, " holds ", out[i],
               ": float clips must be in [-1, 1] (scale pixels as p / 127.5 - 1)");
  }
  ZT_CHECK(f.good(), "'", path_, "': reading clip ", index, " failed (file truncated?)");
  for (int64_t t = 1; t < T_out && images; ++t)
    std::memcpy(out + t * n, out, static_cast<size_t>(n) * 4);
  return Sample{clip, 0, index};
}

std::string NpyArray::describe() const {
  return "NpyArray('" + path_ + "', " + shape_str(header_.shape) + " " + header_.descr + ")";
}

}  // namespace zt::data
