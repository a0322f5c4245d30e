// Fused attention (core/cuda/flash_tiles.h): the tile shapes its passes are built with and
// the process-wide choice among them. A shape is the rows each warp owns (one or two m16
// tiles) and the other side's rows per step; bigger tiles load each shared-memory fragment
// for more multiplies and sync less often, at the cost of registers. Results keep their
// bits across shapes except for the forward's step size (its running max moves once per
// step). Pure C++, as flash_params.h; `zt-bench attention` times every shape.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <iterator>
#include <string>
#include <vector>

#include "core/error.h"

namespace zt::flash {

/// The kernels' passes: the forward; for the split backward dq (which also writes delta),
/// then dk and dv; for the atomic backward (Backward::atomic) prepare (delta), dkdvq (dk, dv
/// and each key tile's share of dq, added up in f32 by atomics), then dq_finish (dq from
/// the f32 sums). The last three take dkdv's tile shape.
enum class Pass { forward, dq, dkdv, prepare, dkdvq, dq_finish };

/// The pass whose tile shape `pass` takes (set_tile_shape sets forward, dq and dkdv).
constexpr Pass shape_pass(Pass pass) {
  return pass == Pass::forward || pass == Pass::dq ? pass : Pass::dkdv;
}

/// How the backward finds dq.
///   split (the default): a dq pass over query tiles, then a dk / dv pass over key tiles;
///     each block owns its outputs, so the bits are the same every run; seven products
///     per tile pair (the dq pass recomputes q k^T and dout v^T).
///   atomic: one pass over key tiles computes dk, dv and each tile's share of dq, which
///     blocks add to an f32 buffer with atomics (FlashAttention-2's way); five products
///     per tile pair and an f32 buffer of dq's size, but dq's bits depend on the order in
///     which the blocks' additions land.
enum class Backward { split, atomic };

namespace detail {
inline Backward backward_from_env() {
  const char* v = std::getenv("ZT_FLASH_BACKWARD");
  if (v == nullptr || *v == 0 || std::string(v) == "split") return Backward::split;
  ZT_CHECK(std::string(v) == "atomic", "ZT_FLASH_BACKWARD='", v,
           "' is not 'split' or 'atomic' (how the fused attention backward finds dq)");
  return Backward::atomic;
}
inline std::atomic<int>& backward_choice() {  // -1: not yet read from the environment
  static std::atomic<int> choice{-1};
  return choice;
}
}  // namespace detail

/// Sets the backward's way to dq for the process (ZT_FLASH_BACKWARD=split|atomic sets it
/// before the first call).
inline void set_backward(Backward b) {
  detail::backward_choice().store(static_cast<int>(b));
}
/// The backward's way to dq.
inline Backward backward() {
  int v = detail::backward_choice().load();
  if (v < 0) {
    v = static_cast<int>(detail::backward_from_env());
    detail::backward_choice().store(v);
  }
  return static_cast<Backward>(v);
}
/// "split" or "atomic", and back (a clear error for anything else).
inline const char* backward_name(Backward b) {
  return b == Backward::split ? "split" : "atomic";
}
inline Backward parse_backward(const std::string& s) {
  ZT_CHECK(s == "split" || s == "atomic", "flash attention backward '", s,
           "' is not 'split' or 'atomic'");
  return s == "split" ? Backward::split : Backward::atomic;
}

/// A pass's tile shape: the rows each warp owns (16 or 32: one or two m16 tiles), the
/// other side's rows per step, and the steps in shared memory at once (2: the one computed
/// on and the next, being copied; 3: two being copied); written "32x64", or "32x64x3"
/// with three stages.
struct TileShape {
  int warp_rows = 0, step_rows = 0;  // {0, 0}: the head dim's default
  int stages = 2;
  constexpr bool operator==(const TileShape&) const = default;
  std::string str() const {
    return std::to_string(warp_rows) + "x" + std::to_string(step_rows) +
           (stages == 2 ? "" : "x" + std::to_string(stages));
  }
};
/// The shapes built for head dims up to 64 (blocks of 4 warps) and above (2 warps); the
/// first of each is the default. Larger tiles for dq and dk / dv would spill registers.
inline constexpr TileShape kNarrowShapes[] = {{16, 32}, {16, 64},    {32, 32},
                                              {32, 64}, {16, 32, 3}, {16, 64, 3}};
inline constexpr TileShape kNarrowBackwardShapes[] = {{16, 32}, {16, 64}, {32, 32}, {16, 32, 3}};
inline constexpr TileShape kWideShapes[] = {{16, 16}, {16, 16, 3}};

/// The shapes `pass` has built for head dim d (32, 64, 96 or 128), the default first.
inline std::vector<TileShape> tile_shapes(Pass pass, int64_t d) {
  auto all = [](const auto& shapes) {
    return std::vector<TileShape>(std::begin(shapes), std::end(shapes));
  };
  if (d > 64) return all(kWideShapes);
  return pass == Pass::forward ? all(kNarrowShapes) : all(kNarrowBackwardShapes);
}
/// tile_shapes(pass, d) as "16x32, 16x64, ...".
inline std::string tile_shapes_str(Pass pass, int64_t d) {
  std::string out;
  for (const TileShape& s : tile_shapes(pass, d)) out += (out.empty() ? "" : ", ") + s.str();
  return out;
}

namespace detail {
inline std::atomic<uint64_t>
    chosen_shapes[3];  // per Pass: warp_rows << 32 | step_rows << 8 | stages
}  // namespace detail

/// Sets the shape `pass` takes at every head dim; {} restores each head dim's default. A
/// head dim that does not build the shape fails its next call, naming the shapes it has.
inline void set_tile_shape(Pass pass, TileShape shape) {
  ZT_CHECK(shape_pass(pass) == pass, "flash attention: pass ", static_cast<int>(pass),
           " takes dk / dv's tile shape; set that one");
  ZT_CHECK(shape.warp_rows >= 0 && shape.warp_rows < 65536 && shape.step_rows >= 0 &&
               shape.step_rows < 65536 && shape.stages >= 2 && shape.stages < 256,
           "flash attention: tile shape ", shape.str(), " out of range");
  detail::chosen_shapes[static_cast<int>(pass)].store(static_cast<uint64_t>(shape.warp_rows) << 32 |
                                                      static_cast<uint64_t>(shape.step_rows) << 8 |
                                                      static_cast<uint64_t>(shape.stages));
}
/// The shape set for `pass`; {} when none is (each head dim's default).
inline TileShape tile_shape_set(Pass pass) {
  const uint64_t v = detail::chosen_shapes[static_cast<int>(shape_pass(pass))].load();
  if (v == 0) return {};
  return {static_cast<int>(v >> 32), static_cast<int>(v >> 8 & 0xffffu),
          static_cast<int>(v & 0xffu)};
}
/// The shape `pass` takes at head dim d: the one set, or d's default.
inline TileShape tile_shape(Pass pass, int64_t d) {
  const TileShape set = tile_shape_set(pass);
  return set == TileShape{} ? tile_shapes(pass, d).front() : set;
}
/// "RxS" (warp rows x step rows) or "RxSxP" (and P stages) as a shape; a clear error for
/// anything else.
inline TileShape parse_tile_shape(const std::string& s) {
  std::vector<int> parts;
  size_t at = 0;
  while (parts.size() < 4) {
    const size_t x = s.find('x', at);
    const std::string part = s.substr(at, x == std::string::npos ? std::string::npos : x - at);
    try {
      size_t end = 0;
      parts.push_back(std::stoi(part, &end));
      if (end != part.size()) parts.back() = 0;
    } catch (const std::exception&) {
      parts.push_back(0);
    }
    if (x == std::string::npos) break;
    at = x + 1;
  }
  const bool ok = (parts.size() == 2 || parts.size() == 3) &&
                  std::all_of(parts.begin(), parts.end(), [](int v) { return v > 0; }) &&
                  (parts.size() == 2 || parts[2] >= 2);
  ZT_CHECK(ok, "flash attention: tile shape '", s,
           "' is not ROWSxSTEP or ROWSxSTEPxSTAGES (rows per warp x rows per step, then steps ",
           "in shared memory, 2 or more; e.g. 32x64 or 16x32x3)");
  return {parts[0], parts[1], parts.size() == 3 ? parts[2] : 2};
}

}  // namespace zt::flash
