// SyntheticVideo: procedurally generated clips of shapes moving over a gradient
// background. Everything about clip i (background colours and direction, each shape's
// kind, colour, size, start and velocity) is drawn from a Philox stream keyed by
// (seed, i), so a clip is the same on every rank, in every run, in any order.
// Shapes bounce off the borders and are antialiased (one-pixel soft edge).
#pragma once

#include <cstdint>

#include "data/dataset.h"

namespace zt::data {

/// What the generated clips look like.
struct SyntheticVideoOptions {
  int64_t size = 1024;  ///< number of clips
  int64_t frames = 4;   ///< T
  int64_t height = 32;  ///< H
  int64_t width = 32;   ///< W
  int64_t num_shapes = 2;
  uint64_t seed = 0;
  double max_speed = 0.12;  ///< pixels per frame, as a fraction of min(H, W)
};

/// Shape kinds; a clip's label is its first shape's kind.
enum class ShapeKind : int64_t { circle = 0, square = 1, triangle = 2 };

/// The signed distance in pixels (negative inside) from the point (dx, dy) away from a
/// shape's centre to a shape of `kind` and radius r turned by `angle` radians: a circle of
/// radius r, a square of half-side 0.85 r, an equilateral triangle of inradius 0.6 r. A
/// pixel whose centre lies at distance d is covered clamp(0.5 - d, 0, 1).
double shape_distance(ShapeKind kind, double r, double dx, double dy, double angle);
/// Half the side of the box around a shape's centre that it is drawn in: every point a
/// shape of radius r covers at any angle lies at least a pixel inside it (a square's
/// corner is 1.203 r out, a triangle's vertex 1.2 r, plus the soft edge).
double shape_half_extent(double r);

class SyntheticVideo : public Dataset {
 public:
  explicit SyntheticVideo(SyntheticVideoOptions options);
  int64_t size() const override { return options_.size; }
  /// Clip (T, 3, H, W) in [-1, 1]; label = ShapeKind of the first shape.
  Sample get(int64_t index) const override;
  std::string describe() const override;
  const SyntheticVideoOptions& options() const { return options_; }

 private:
  SyntheticVideoOptions options_;
};

}  // namespace zt::data
