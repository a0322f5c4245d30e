// safetensors reader and writer. The reader trusts nothing in the file: the header
// length, the JSON, each dtype, shape and offset pair are checked against the mapped
// size, sizes are computed with overflow checks, and the entries must tile the data
// section exactly (sorted by offset: no overlap, no gap, no trailing bytes), as the
// reference implementation requires.
#include "nn/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "core/ops/factory.h"
#include "core/text_file.h"
#include "nn/json_text.h"

namespace zt::nn {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; big-endian hosts are not supported");

namespace {

using ojson = nlohmann::ordered_json;
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // the reference implementation's limit
// A header nests 3 deep (the object, an entry, its shape); the JSON parser and dump()
// recurse once per level, so a deeper header is refused before either sees it.
constexpr int kMaxHeaderDepth = 8;

// j as JSON text for an error message, cut after 80 characters.
std::string brief(const ojson& j) {
  std::string s = j.dump();
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

// The safetensors dtype names zt reads and writes.
constexpr std::pair<const char*, DType> kDtypeNames[] = {
    {"F32", DType::f32}, {"F16", DType::f16}, {"BF16", DType::bf16}, {"F64", DType::f64},
    {"I64", DType::i64}, {"I32", DType::i32}, {"BOOL", DType::b8}};

bool parse_dtype(const std::string& s, DType& out) {
  for (const auto& [name, t] : kDtypeNames)
    if (s == name) {
      out = t;
      return true;
    }
  return false;
}

// A non-negative integer that fits in int64, or false.
bool as_index(const ojson& j, uint64_t& out) {
  if (j.is_number_unsigned()) {
    out = j.get<uint64_t>();
  } else if (j.is_number_integer()) {
    int64_t v = j.get<int64_t>();
    if (v < 0) return false;
    out = static_cast<uint64_t>(v);
  } else {
    return false;
  }
  return out <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
}

}  // namespace

const char* safetensors_dtype_name(DType t) {
  for (const auto& [name, dt] : kDtypeNames)
    if (dt == t) return name;
  ZT_FAIL("safetensors: no safetensors name for dtype ", dtype_name(t));
}

/// An mmap of a whole file (private, copy-on-write), unmapped when the last user lets go.
struct SafetensorsFile::Mapping {
  void* addr = MAP_FAILED;
  size_t size = 0;
  ~Mapping() {
    if (addr != MAP_FAILED) munmap(addr, size);
  }
  const uint8_t* bytes() const { return static_cast<const uint8_t*>(addr); }
};

namespace {

// An open file descriptor, closed with the object.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Maps the whole regular file at `path` (private, copy-on-write) into *addr, *size; a
// file under 8 bytes (no room for the header length) is an error. Errors start `where`.
void map_file(const std::string& path, const std::string& where, void** addr, uint64_t* size) {
  // O_NONBLOCK: a FIFO with no writer opens at once (and is refused below as no regular
  // file) rather than blocking the open forever; it changes nothing for a regular file.
  const Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  ZT_CHECK(f.fd >= 0, where, "cannot open (", std::strerror(errno), ")");
  struct stat st {};
  ZT_CHECK(::fstat(f.fd, &st) == 0 && S_ISREG(st.st_mode), where, "not a regular file");
  *size = static_cast<uint64_t>(st.st_size);
  ZT_CHECK(*size >= 8, where, "truncated: ", *size,
           " bytes, too small for the 8-byte header length");
  *addr = ::mmap(nullptr, *size, PROT_READ | PROT_WRITE, MAP_PRIVATE, f.fd, 0);
  ZT_CHECK(*addr != MAP_FAILED, where, "mmap failed (", std::strerror(errno), ")");
}

// The JSON header's length n, from the file's first 8 bytes, checked against the file's
// `size` (so the header, bytes [8, 8 + n), lies inside it).
uint64_t header_length(const uint8_t* bytes, uint64_t size, const std::string& where) {
  uint64_t n = 0;
  std::memcpy(&n, bytes, 8);
  // A safetensors file starts with its JSON header's length, then the header's "{".
  ZT_CHECK(n <= kMaxHeaderBytes || size <= 8 || bytes[8] == '{', where,
           "not a safetensors file (it should start with the 8-byte length of a JSON header, "
           "then the header's '{'; is it another kind of file?)");
  ZT_CHECK(n <= kMaxHeaderBytes, where, "header length ", n, " exceeds the ", kMaxHeaderBytes,
           "-byte limit (corrupt length field?)");
  ZT_CHECK(n <= size - 8, where, "truncated: header length ", n, " but only ", size - 8,
           " bytes follow the length field");
  return n;
}

// One tensor's header entry `v` (dtype, shape, data_offsets), checked: a known dtype, a
// shape whose byte size does not overflow and matches the offsets, which lie inside the
// `data_size` bytes of data. Errors start `at`.
SafetensorsInfo parse_entry(const ojson& v, uint64_t data_size, const std::string& at) {
  ZT_CHECK(v.is_object(), at, "entry must be an object with dtype, shape, data_offsets");
  ZT_CHECK(v.contains("dtype") && v["dtype"].is_string(), at, "missing string 'dtype'");
  ZT_CHECK(v.contains("shape") && v["shape"].is_array(), at, "missing array 'shape'");
  ZT_CHECK(
      v.contains("data_offsets") && v["data_offsets"].is_array() && v["data_offsets"].size() == 2,
      at, "'data_offsets' must be [begin, end]");
  SafetensorsInfo info;
  const std::string dt = v["dtype"].get<std::string>();
  ZT_CHECK(parse_dtype(dt, info.dtype), at, "unsupported dtype '", dt,
           "' (supported: F32, F16, BF16, F64, I64, I32, BOOL)");
  // numel, and the product of the dims after the first taken as at least 1 (the largest
  // stride, which an empty tensor has too): both within an int64.
  uint64_t numel = 1, span = 1;
  for (const auto& d : v["shape"]) {
    uint64_t s = 0;
    ZT_CHECK(as_index(d, s), at, "shape entries must be non-negative integers, got ", brief(d));
    const uint64_t stride_factor = info.shape.empty() ? 1 : std::max<uint64_t>(s, 1);
    ZT_CHECK(!__builtin_mul_overflow(numel, s, &numel) &&
                 !__builtin_mul_overflow(span, stride_factor, &span) &&
                 span <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
             at, "shape ", brief(v["shape"]), " overflows");
    info.shape.push_back(static_cast<int64_t>(s));
  }
  uint64_t nbytes = 0;
  ZT_CHECK(!__builtin_mul_overflow(numel, static_cast<uint64_t>(dtype_size(info.dtype)), &nbytes),
           at, "byte size overflows");
  ZT_CHECK(as_index(v["data_offsets"][0], info.data_begin) &&
               as_index(v["data_offsets"][1], info.data_end),
           at, "data_offsets must be non-negative integers, got ", brief(v["data_offsets"]));
  ZT_CHECK(info.data_begin <= info.data_end, at, "data_offsets ", brief(v["data_offsets"]),
           " end before they begin");
  ZT_CHECK(info.data_end <= data_size, at, "data_offsets ", brief(v["data_offsets"]),
           " run past the end of the data (", data_size, " bytes): file truncated?");
  ZT_CHECK(info.data_end - info.data_begin == nbytes, at, "data_offsets span ",
           info.data_end - info.data_begin, " bytes but ", dt, brief(v["shape"]), " needs ",
           nbytes);
  return info;
}

// The entries must tile [0, data_size) exactly: sorted by offset, no overlap, no gap and
// no trailing bytes.
void check_tiling(const std::map<std::string, SafetensorsInfo>& infos, uint64_t data_size,
                  const std::string& where) {
  std::vector<const std::pair<const std::string, SafetensorsInfo>*> order;
  for (const auto& e : infos) order.push_back(&e);
  std::stable_sort(order.begin(), order.end(), [](auto* a, auto* b) {
    return a->second.data_begin != b->second.data_begin
               ? a->second.data_begin < b->second.data_begin
               : a->second.data_end < b->second.data_end;
  });
  uint64_t pos = 0;
  std::string prev = "(start of data)";
  for (const auto* e : order) {
    const auto& inf = e->second;
    ZT_CHECK(inf.data_begin >= pos, where, "tensors '", prev, "' and '", e->first,
             "' overlap (bytes ", inf.data_begin, "..", pos, ")");
    ZT_CHECK(inf.data_begin == pos, where, "gap of ", inf.data_begin - pos,
             " bytes before tensor '", e->first, "'");
    pos = inf.data_end;
    prev = e->first;
  }
  ZT_CHECK(pos == data_size, where, data_size - pos,
           " trailing bytes after the last tensor (corrupt header or data)");
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  const std::string where = "safetensors file '" + path + "': ";
  map_ = std::make_shared<Mapping>();
  map_file(path, where, &map_->addr, &map_->size);
  const uint64_t size = map_->size;
  const uint64_t n = header_length(map_->bytes(), size, where);
  data_start_ = 8 + n;
  const uint64_t data_size = size - data_start_;

  const char* hbeg = reinterpret_cast<const char*>(map_->bytes() + 8);
  check_json_depth(std::string_view(hbeg, n), kMaxHeaderDepth, where + "header",
                   "a safetensors header nests 3");
  ojson header;
  // JSON keeps the last of repeated keys; a header naming a tensor twice, or giving one of
  // an entry's fields twice, is refused instead (the first would be dropped without a word).
  std::set<std::string> names, fields;  // the header's keys; those of the entry being read
  std::string entry;                    // the key of the entry being read
  auto once = [&](int depth, ojson::parse_event_t event, ojson& parsed) {
    if (depth == 1 && event == ojson::parse_event_t::object_start) fields.clear();
    if (event != ojson::parse_event_t::key) return true;
    const std::string key = parsed.get<std::string>();
    if (depth == 1) {
      ZT_CHECK(names.insert(key).second, where, "tensor '", key, "': the header names it twice");
      entry = key;
    } else if (depth == 2) {
      ZT_CHECK(fields.insert(key).second, where,
               entry == "__metadata__" ? "__metadata__" : "tensor '" + entry + "'",
               ": the header gives its '", key, "' twice");
    }
    return true;
  };
  try {
    header = ojson::parse(hbeg, hbeg + n, once);
  } catch (const nlohmann::json::exception& e) {
    ZT_FAIL(where, "header is not valid JSON (", n, " bytes): ", e.what());
  }
  ZT_CHECK(header.is_object(), where, "header must be a JSON object");
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& key = it.key();
    const ojson& v = it.value();
    if (key == "__metadata__") {
      ZT_CHECK(v.is_object(), where, "__metadata__ must be an object of strings");
      for (auto m = v.begin(); m != v.end(); ++m) {
        ZT_CHECK(m.value().is_string(), where, "__metadata__['", m.key(), "'] is not a string");
        metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string at = where + "tensor '" + key + "': ";
    infos_.emplace(key, parse_entry(v, data_size, at));
    keys_.push_back(key);
  }
  check_tiling(infos_, data_size, where);
}

SafetensorsFile::~SafetensorsFile() = default;

const SafetensorsInfo& SafetensorsFile::info(const std::string& key) const {
  auto it = infos_.find(key);
  if (it != infos_.end()) return it->second;
  ZT_FAIL("safetensors file '", path_, "': no tensor '", key, "' (", keys_.size(),
          " tensors: ", list_names(keys_, 5), ")");
}

const uint8_t* SafetensorsFile::data_of(const SafetensorsInfo& info) const {
  const uint8_t* p = map_->bytes() + data_start_ + info.data_begin;
  if (info.dtype == DType::b8)  // a bool byte other than 0/1 is undefined behaviour in C++
    for (uint64_t i = 0; i < info.data_end - info.data_begin; ++i)
      ZT_CHECK(p[i] <= 1, "safetensors file '", path_, "': BOOL tensor holds byte value ",
               int(p[i]), " at element ", i);
  return p;
}

Tensor SafetensorsFile::get(const std::string& key, Device device) const {
  const SafetensorsInfo& inf = info(key);
  const uint8_t* src = data_of(inf);
  Tensor t = empty(inf.shape, inf.dtype, Device::cpu());
  if (inf.data_end > inf.data_begin) std::memcpy(t.data_ptr(), src, inf.data_end - inf.data_begin);
  return device.is_cpu() ? t : t.to(device);
}

Tensor SafetensorsFile::view(const std::string& key) const {
  const SafetensorsInfo& inf = info(key);
  const uint8_t* src = data_of(inf);
  const size_t bytes = inf.data_end - inf.data_begin;
  if (bytes == 0 || reinterpret_cast<uintptr_t>(src) % dtype_size(inf.dtype) != 0) return get(key);
  auto keep = map_;  // the storage owns a reference to the mapping
  auto storage = std::make_shared<Storage>(const_cast<uint8_t*>(src), bytes, Device::cpu(),
                                           [keep](void*) mutable { keep.reset(); });
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::move(storage);
  impl->sizes = inf.shape;
  impl->strides = contiguous_strides(inf.shape);
  impl->dtype = inf.dtype;
  impl->device = Device::cpu();
  return Tensor(std::move(impl));
}

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
  const std::string where = "save_safetensors('" + path + "'): ";
  // Contiguous CPU copies; data laid out by descending element size so every tensor is
  // aligned for its dtype (the data section starts 8-byte aligned).
  std::vector<Tensor> cpu(tensors.size());
  std::map<std::string, size_t> seen;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, t] = tensors[i];
    ZT_CHECK(name != "__metadata__", where, "'__metadata__' is reserved");
    ZT_CHECK(seen.emplace(name, i).second, where, "duplicate tensor name '", name, "'");
    ZT_CHECK(t.defined(), where, "tensor '", name, "' is undefined");
    ZT_CHECK(t.has_storage(), where, "tensor '", name,
             "' has no data (a released ZeRO-3 parameter? gather it first)");
    Tensor c = t.detach();
    if (!c.device().is_cpu()) c = c.to(Device::cpu());
    cpu[i] = c.contiguous();
  }
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return dtype_size(cpu[a].dtype()) > dtype_size(cpu[b].dtype());
  });
  std::vector<uint64_t> begin(tensors.size());
  uint64_t pos = 0;
  for (size_t i : order) {
    begin[i] = pos;
    pos += static_cast<uint64_t>(cpu[i].numel()) * dtype_size(cpu[i].dtype());
  }
  ojson header = ojson::object();
  if (!metadata.empty()) {
    ojson m = ojson::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = m;
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& c = cpu[i];
    uint64_t nbytes = static_cast<uint64_t>(c.numel()) * dtype_size(c.dtype());
    header[tensors[i].first] = {{"dtype", safetensors_dtype_name(c.dtype())},
                                {"shape", c.sizes()},
                                {"data_offsets", {begin[i], begin[i] + nbytes}}};
  }
  std::string h;
  try {
    h = header.dump();
  } catch (const nlohmann::json::exception& e) {  // names and metadata are JSON strings
    ZT_FAIL(where, "tensor names and metadata must be valid UTF-8 (", e.what(), ")");
  }
  h.append((8 - h.size() % 8) % 8, ' ');
  const uint64_t n = h.size();

  write_file_atomically(path, [&](std::FILE* f) {
    bool ok = write_all(f, &n, 8) && write_all(f, h.data(), n);
    for (size_t i : order)
      ok = ok && write_all(f, cpu[i].data_ptr(),
                           static_cast<size_t>(cpu[i].numel()) * dtype_size(cpu[i].dtype()));
    return ok;
  });
}

NamedTensors load_safetensors(const std::string& path) {
  SafetensorsFile f(path);
  NamedTensors out;
  for (const auto& k : f.keys()) out.emplace_back(k, f.get(k));
  return out;
}

}  // namespace zt::nn
