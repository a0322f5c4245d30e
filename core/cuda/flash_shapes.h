// Fused attention (core/cuda/flash_tiles.h): the tile shapes its passes are built with and
// the process-wide choice among them. A shape is the rows each warp owns (one or two m16
// tiles) and the other side's rows per step; bigger tiles load each shared-memory fragment
// for more multiplies and sync less often, at the cost of registers. Results keep their
// bits across shapes except for the forward's step size (its running max moves once per
// step). Pure C++, as flash_params.h; `zt-bench attention` times every shape.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <iterator>
#include <string>
#include <vector>

#include "core/error.h"

namespace zt::flash {

/// The kernels' passes: the forward; for the backward dq (which also writes delta), then
/// dk and dv.
enum class Pass { forward, dq, dkdv };

/// A pass's tile shape: the rows each warp owns (16 or 32: one or two m16 tiles) and the
/// other side's rows per step; written "32x64".
struct TileShape {
  int warp_rows = 0, step_rows = 0;  // {0, 0}: the head dim's default
  constexpr bool operator==(const TileShape&) const = default;
  std::string str() const { return std::to_string(warp_rows) + "x" + std::to_string(step_rows); }
};
/// The shapes built for head dims up to 64 (blocks of 4 warps) and above (2 warps); the
/// first of each is the default. Larger tiles for dq and dk / dv would spill registers.
inline constexpr TileShape kNarrowShapes[] = {{16, 32}, {16, 64}, {32, 32}, {32, 64}};
inline constexpr TileShape kNarrowBackwardShapes[] = {{16, 32}, {16, 64}, {32, 32}};
inline constexpr TileShape kWideShapes[] = {{16, 16}};

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
inline std::atomic<uint32_t> chosen_shapes[3];  // per Pass: warp_rows << 16 | step_rows
}  // namespace detail

/// Sets the shape `pass` takes at every head dim; {} restores each head dim's default. A
/// head dim that does not build the shape fails its next call, naming the shapes it has.
inline void set_tile_shape(Pass pass, TileShape shape) {
  ZT_CHECK(shape.warp_rows >= 0 && shape.warp_rows < 65536 && shape.step_rows >= 0 &&
               shape.step_rows < 65536,
           "flash attention: tile shape ", shape.str(), " out of range");
  detail::chosen_shapes[static_cast<int>(pass)].store(static_cast<uint32_t>(shape.warp_rows) << 16 |
                                                      static_cast<uint32_t>(shape.step_rows));
}
/// The shape set for `pass`; {} when none is (each head dim's default).
inline TileShape tile_shape_set(Pass pass) {
  const uint32_t v = detail::chosen_shapes[static_cast<int>(pass)].load();
  return {static_cast<int>(v >> 16), static_cast<int>(v & 0xffffu)};
}
/// The shape `pass` takes at head dim d: the one set, or d's default.
inline TileShape tile_shape(Pass pass, int64_t d) {
  const TileShape set = tile_shape_set(pass);
  return set == TileShape{} ? tile_shapes(pass, d).front() : set;
}
/// "RxS" (warp rows x step rows) as a shape; a clear error for anything else.
inline TileShape parse_tile_shape(const std::string& s) {
  const size_t x = s.find('x');
  TileShape t;
  if (x != std::string::npos) {
    const std::string rows = s.substr(0, x), step = s.substr(x + 1);
    try {
      size_t end_rows = 0, end_step = 0;
      t = {std::stoi(rows, &end_rows), std::stoi(step, &end_step)};
      if (end_rows != rows.size() || end_step != step.size()) t = {};
    } catch (const std::exception&) {
      t = {};
    }
  }
  ZT_CHECK(t.warp_rows > 0 && t.step_rows > 0, "flash attention: tile shape '", s,
           "' is not ROWSxSTEP (rows per warp x rows per step, e.g. 32x64)");
  return t;
}

}  // namespace zt::flash
