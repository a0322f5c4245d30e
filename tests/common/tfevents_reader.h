// A minimal TensorBoard event-file reader for tests, written apart from
// data/tensorboard.cpp so the writer is checked against a second implementation: a
// bit-by-bit CRC32C (no table), TFRecord frames with both checksums verified, and a
// generic protobuf field walker from which Events, Summary values and images are picked.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/test_util.h"

namespace zt::test {

/// One decoded Event: wall_time, step, file_version, a SessionLog's status (0 when none;
/// 1 START), and the summary values it carries.
struct TfValue {
  std::string tag;
  bool has_simple = false;
  float simple = 0.0f;
  bool has_image = false;
  int64_t height = 0, width = 0, colorspace = 0;
  std::string encoded;
};
struct TfEvent {
  double wall_time = 0.0;
  int64_t step = 0;
  std::string file_version;
  int64_t session_status = 0;
  std::vector<TfValue> values;
};

inline uint32_t bitwise_crc32c(const uint8_t* p, size_t n) {
  return bitwise_crc32(p, n, 0x82f63b78u);
}

inline uint32_t tfrecord_mask(uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

/// Protobuf fields of one message: number, wire type, and the varint or the raw bytes.
struct PbField {
  uint32_t number = 0, wire = 0;
  uint64_t varint = 0;  // varint, or the little-endian value of fixed32 / fixed64
  std::string bytes;    // length-delimited payload
};

inline std::vector<PbField> pb_fields(const std::string& msg) {
  std::vector<PbField> out;
  size_t i = 0;
  auto varint = [&]() {
    uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      if (i >= msg.size() || shift > 63) throw std::runtime_error("truncated varint");
      const auto b = static_cast<uint8_t>(msg[i++]);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
  };
  auto fixed = [&](int n) {
    if (i + static_cast<size_t>(n) > msg.size()) throw std::runtime_error("truncated fixed");
    uint64_t v = 0;
    for (int k = 0; k < n; ++k)
      v |= static_cast<uint64_t>(static_cast<uint8_t>(msg[i + k])) << (8 * k);
    i += static_cast<size_t>(n);
    return v;
  };
  while (i < msg.size()) {
    const uint64_t key = varint();
    PbField f;
    f.number = static_cast<uint32_t>(key >> 3);
    f.wire = static_cast<uint32_t>(key & 7);
    if (f.wire == 0) {
      f.varint = varint();
    } else if (f.wire == 1) {
      f.varint = fixed(8);
    } else if (f.wire == 5) {
      f.varint = fixed(4);
    } else if (f.wire == 2) {
      const uint64_t n = varint();
      if (i + n > msg.size()) throw std::runtime_error("truncated bytes field");
      f.bytes = msg.substr(i, n);
      i += n;
    } else {
      throw std::runtime_error("unexpected wire type " + std::to_string(f.wire));
    }
    out.push_back(std::move(f));
  }
  return out;
}

/// The payloads of every TFRecord in `bytes`; throws on a bad length or data checksum.
inline std::vector<std::string> tfrecords(const std::string& bytes) {
  std::vector<std::string> out;
  size_t i = 0;
  auto le = [&](size_t at, int n) {
    uint64_t v = 0;
    for (int k = 0; k < n; ++k)
      v |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[at + k])) << (8 * k);
    return v;
  };
  const auto* base = reinterpret_cast<const uint8_t*>(bytes.data());
  while (i < bytes.size()) {
    if (i + 12 > bytes.size()) throw std::runtime_error("truncated record header");
    const uint64_t n = le(i, 8);
    if (le(i + 8, 4) != tfrecord_mask(bitwise_crc32c(base + i, 8)))
      throw std::runtime_error("bad length checksum");
    if (i + 12 + n + 4 > bytes.size()) throw std::runtime_error("truncated record");
    if (le(i + 12 + n, 4) != tfrecord_mask(bitwise_crc32c(base + i + 12, n)))
      throw std::runtime_error("bad data checksum");
    out.push_back(bytes.substr(i + 12, n));
    i += 12 + n + 4;
  }
  return out;
}

inline TfEvent decode_event(const std::string& payload) {
  TfEvent e;
  for (const PbField& f : pb_fields(payload)) {
    if (f.number == 1 && f.wire == 1) {
      std::memcpy(&e.wall_time, &f.varint, 8);
    } else if (f.number == 2 && f.wire == 0) {
      e.step = static_cast<int64_t>(f.varint);
    } else if (f.number == 3 && f.wire == 2) {
      e.file_version = f.bytes;
    } else if (f.number == 5 && f.wire == 2) {
      for (const PbField& sv : pb_fields(f.bytes)) {
        if (sv.number != 1 || sv.wire != 2) throw std::runtime_error("unexpected Summary field");
        TfValue v;
        for (const PbField& vf : pb_fields(sv.bytes)) {
          if (vf.number == 1 && vf.wire == 2) {
            v.tag = vf.bytes;
          } else if (vf.number == 2 && vf.wire == 5) {
            const auto bits = static_cast<uint32_t>(vf.varint);
            std::memcpy(&v.simple, &bits, 4);
            v.has_simple = true;
          } else if (vf.number == 4 && vf.wire == 2) {
            v.has_image = true;
            for (const PbField& im : pb_fields(vf.bytes)) {
              if (im.number == 1) v.height = static_cast<int64_t>(im.varint);
              if (im.number == 2) v.width = static_cast<int64_t>(im.varint);
              if (im.number == 3) v.colorspace = static_cast<int64_t>(im.varint);
              if (im.number == 4) v.encoded = im.bytes;
            }
          } else {
            throw std::runtime_error("unexpected Summary.Value field " + std::to_string(vf.number));
          }
        }
        e.values.push_back(std::move(v));
      }
    } else if (f.number == 7 && f.wire == 2) {
      for (const PbField& sl : pb_fields(f.bytes))
        if (sl.number == 1 && sl.wire == 0) e.session_status = static_cast<int64_t>(sl.varint);
    } else {
      throw std::runtime_error("unexpected Event field " + std::to_string(f.number));
    }
  }
  return e;
}

inline std::string read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// Every Event of the event file at `path`.
inline std::vector<TfEvent> read_events(const std::string& path) {
  std::vector<TfEvent> out;
  for (const std::string& r : tfrecords(read_file_bytes(path))) out.push_back(decode_event(r));
  return out;
}

/// The events TensorBoard shows from `events` (in the order written, across files): a
/// session START at step s drops every earlier event at step s or later.
inline std::vector<TfEvent> shown_events(const std::vector<TfEvent>& events) {
  std::vector<TfEvent> out;
  for (const TfEvent& e : events) {
    if (e.session_status == 1) {
      std::erase_if(out, [&](const TfEvent& o) { return o.step >= e.step; });
      continue;
    }
    out.push_back(e);
  }
  return out;
}

}  // namespace zt::test
