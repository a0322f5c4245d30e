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
#include <nlohmann/json.hpp>

#include "core/ops/factory.h"
#include "core/text_file.h"

namespace zt::nn {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; big-endian hosts are not supported");

namespace {

using ojson = nlohmann::ordered_json;
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // the reference implementation's limit

bool parse_dtype(const std::string& s, DType& out) {
  static const std::pair<const char*, DType> table[] = {
      {"F32", DType::f32}, {"F16", DType::f16}, {"BF16", DType::bf16}, {"F64", DType::f64},
      {"I64", DType::i64}, {"I32", DType::i32}, {"BOOL", DType::b8}};
  for (const auto& [name, t] : table)
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
  switch (t) {
    case DType::f32:
      return "F32";
    case DType::f16:
      return "F16";
    case DType::bf16:
      return "BF16";
    case DType::f64:
      return "F64";
    case DType::i64:
      return "I64";
    case DType::i32:
      return "I32";
    case DType::b8:
      return "BOOL";
  }
  ZT_FAIL("unknown dtype");
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

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  const std::string where = "safetensors file '" + path + "': ";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ZT_CHECK(fd >= 0, where, "cannot open (", std::strerror(errno), ")");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    ZT_FAIL(where, "not a regular file");
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    ZT_FAIL(where, "truncated: ", size, " bytes, too small for the 8-byte header length");
  }
  map_ = std::make_shared<Mapping>();
  map_->size = size;
  map_->addr = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  int err = errno;
  ::close(fd);
  ZT_CHECK(map_->addr != MAP_FAILED, where, "mmap failed (", std::strerror(err), ")");

  uint64_t n = 0;
  std::memcpy(&n, map_->bytes(), 8);
  // A safetensors file starts with its JSON header's length, then the header's "{".
  ZT_CHECK(n <= kMaxHeaderBytes || size <= 8 || map_->bytes()[8] == '{', where,
           "not a safetensors file (it should start with the 8-byte length of a JSON header, "
           "then the header's '{'; is it another kind of file?)");
  ZT_CHECK(n <= kMaxHeaderBytes, where, "header length ", n, " exceeds the ", kMaxHeaderBytes,
           "-byte limit (corrupt length field?)");
  ZT_CHECK(n <= size - 8, where, "truncated: header length ", n, " but only ", size - 8,
           " bytes follow the length field");
  data_start_ = 8 + n;
  const uint64_t data_size = size - data_start_;

  const char* hbeg = reinterpret_cast<const char*>(map_->bytes() + 8);
  ojson header = ojson::parse(hbeg, hbeg + n, nullptr, /*allow_exceptions=*/false);
  ZT_CHECK(!header.is_discarded(), where, "header is not valid JSON (", n, " bytes)");
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
    uint64_t numel = 1;
    for (const auto& d : v["shape"]) {
      uint64_t s = 0;
      ZT_CHECK(as_index(d, s), at, "shape entries must be non-negative integers, got ", d.dump());
      ZT_CHECK(!__builtin_mul_overflow(numel, s, &numel), at, "shape ", v["shape"].dump(),
               " overflows");
      info.shape.push_back(static_cast<int64_t>(s));
    }
    uint64_t nbytes = 0;
    ZT_CHECK(!__builtin_mul_overflow(numel, static_cast<uint64_t>(dtype_size(info.dtype)), &nbytes),
             at, "byte size overflows");
    ZT_CHECK(as_index(v["data_offsets"][0], info.data_begin) &&
                 as_index(v["data_offsets"][1], info.data_end),
             at, "data_offsets must be non-negative integers, got ", v["data_offsets"].dump());
    ZT_CHECK(info.data_begin <= info.data_end, at, "data_offsets ", v["data_offsets"].dump(),
             " end before they begin");
    ZT_CHECK(info.data_end <= data_size, at, "data_offsets ", v["data_offsets"].dump(),
             " run past the end of the data (", data_size, " bytes): file truncated?");
    ZT_CHECK(info.data_end - info.data_begin == nbytes, at, "data_offsets span ",
             info.data_end - info.data_begin, " bytes but ", dt, v["shape"].dump(), " needs ",
             nbytes);
    ZT_CHECK(infos_.emplace(key, std::move(info)).second, at, "duplicate key");
    keys_.push_back(key);
  }

  // The entries must tile [0, data_size) exactly.
  std::vector<const std::pair<const std::string, SafetensorsInfo>*> order;
  for (const auto& e : infos_) order.push_back(&e);
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

SafetensorsFile::~SafetensorsFile() = default;

const SafetensorsInfo& SafetensorsFile::info(const std::string& key) const {
  auto it = infos_.find(key);
  if (it != infos_.end()) return it->second;
  std::string some;
  for (size_t i = 0; i < keys_.size() && i < 5; ++i) some += (i ? ", " : "") + keys_[i];
  if (keys_.size() > 5) some += ", ...";
  ZT_FAIL("safetensors file '", path_, "': no tensor '", key, "' (", keys_.size(),
          " tensors: ", some, ")");
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
  std::string h = header.dump();
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
