// SyntheticVideo rendering. Colours are drawn in [0, 1] and mapped to [-1, 1] at the end.
// Shapes are signed-distance fields; coverage = clamp(0.5 - distance, 0, 1) gives a
// one-pixel antialiased edge, so the clips are smooth enough for a small autoencoder.
#include "data/synthetic_video.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "core/error.h"
#include "core/ops/factory.h"
#include "core/rng.h"

namespace zt::data {

namespace {

constexpr double kPi = 3.14159265358979323846;

// A sequential reader over one clip's Philox stream.
struct Draw {
  Generator g;
  uint64_t k = 0;
  double uniform(double lo, double hi) { return lo + (hi - lo) * g.uniform64(2 * k++); }
  int64_t integer(int64_t n) { return static_cast<int64_t>(g.word(2 * k++) % n); }
};

uint64_t clip_key(uint64_t seed, int64_t index) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(index) + 0x632be59bd9b4e019ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

using Rgb = std::array<double, 3>;

// A saturated colour from a random hue (HSV with s, v given).
Rgb hsv(double h, double s, double v) {
  const double c = v * s, hp = h * 6.0, x = c * (1.0 - std::fabs(std::fmod(hp, 2.0) - 1.0));
  Rgb rgb{};
  const int sector = static_cast<int>(hp) % 6;
  const std::array<Rgb, 6> table = {Rgb{c, x, 0}, Rgb{x, c, 0}, Rgb{0, c, x},
                                    Rgb{0, x, c}, Rgb{x, 0, c}, Rgb{c, 0, x}};
  rgb = table[static_cast<size_t>(sector)];
  for (double& ch : rgb) ch += v - c;
  return rgb;
}

// A colour of random hue, saturation in s and value in v. The three are drawn one statement
// each, value first, then saturation, then hue: the order every clip has been drawn in. As the
// arguments of one call they would be drawn in whatever order the compiler evaluates
// arguments (GCC and clang differ), and a seed would give other clips under another compiler.
Rgb random_colour(Draw& rnd, std::array<double, 2> s, std::array<double, 2> v) {
  const double value = rnd.uniform(v[0], v[1]);
  const double saturation = rnd.uniform(s[0], s[1]);
  const double hue = rnd.uniform(0, 1);
  return hsv(hue, saturation, value);
}

// Folds x into [lo, hi] by reflection (a bouncing trajectory).
double bounce(double x, double lo, double hi) {
  const double len = hi - lo;
  if (len <= 0) return lo;
  double u = std::fmod(x - lo, 2.0 * len);
  if (u < 0) u += 2.0 * len;
  return lo + (u > len ? 2.0 * len - u : u);
}

struct Shape2d {
  ShapeKind kind;
  Rgb color;
  double r, x0, y0, vx, vy, angle, spin;
};

}  // namespace

double shape_distance(ShapeKind kind, double r, double dx, double dy, double angle) {
  const double c = std::cos(angle), sn = std::sin(angle);
  const double rx = c * dx + sn * dy, ry = -sn * dx + c * dy;
  switch (kind) {
    case ShapeKind::circle:
      return std::hypot(dx, dy) - r;
    case ShapeKind::square:
      return std::max(std::fabs(rx), std::fabs(ry)) - r * 0.85;
    case ShapeKind::triangle: {
      // Equilateral triangle: the max over its three edge half-planes.
      double d = -1e30;
      for (int e = 0; e < 3; ++e) {
        const double a = angle + kPi / 2 + e * 2.0 * kPi / 3.0;
        d = std::max(d, std::cos(a) * dx + std::sin(a) * dy - r * 0.6);
      }
      return d;
    }
  }
  return 1e30;
}

double shape_half_extent(double r) {
  // Covered means d < 0.5: a square's corner reaches sqrt(2) (0.85 r + 0.5) = 1.203 r + 0.71,
  // a triangle's vertex 2 (0.6 r + 0.5) = 1.2 r + 1, a circle r + 0.5; one more pixel for
  // the pixel grid.
  return 1.25 * r + 2.0;
}

SyntheticVideo::SyntheticVideo(SyntheticVideoOptions options) : options_(options) {
  ZT_CHECK(options_.size >= 1, "SyntheticVideo: size must be >= 1, got ", options_.size);
  ZT_CHECK(options_.frames >= 1, "SyntheticVideo: frames must be >= 1, got ", options_.frames);
  ZT_CHECK(options_.height >= 4 && options_.width >= 4,
           "SyntheticVideo: height and width must be >= 4, got ", options_.height, "x",
           options_.width);
  ZT_CHECK(options_.num_shapes >= 1 && options_.num_shapes <= 16,
           "SyntheticVideo: num_shapes must be in [1, 16], got ", options_.num_shapes);
  ZT_CHECK(options_.max_speed >= 0, "SyntheticVideo: max_speed must be >= 0");
}

std::string SyntheticVideo::describe() const {
  return "SyntheticVideo(" + std::to_string(options_.size) + " x (" +
         std::to_string(options_.frames) + ", 3, " + std::to_string(options_.height) + ", " +
         std::to_string(options_.width) + "), seed " + std::to_string(options_.seed) + ")";
}

Sample SyntheticVideo::get(int64_t index) const {
  ZT_CHECK(index >= 0 && index < options_.size, "SyntheticVideo: index ", index,
           " out of range [0, ", options_.size, ")");
  const int64_t T = options_.frames, H = options_.height, W = options_.width;
  const double side = static_cast<double>(std::min(H, W));
  Draw rnd{Generator(clip_key(options_.seed, index))};

  // Background: a linear gradient between two muted colours, in a random direction.
  const Rgb bg0 = random_colour(rnd, {0.2, 0.6}, {0.15, 0.5});
  const Rgb bg1 = random_colour(rnd, {0.2, 0.6}, {0.3, 0.7});
  const double theta = rnd.uniform(0, 2 * kPi);
  const double gx = std::cos(theta) / std::max<double>(W, 1),
               gy = std::sin(theta) / std::max<double>(H, 1);

  std::vector<Shape2d> shapes;
  for (int64_t i = 0; i < options_.num_shapes; ++i) {
    Shape2d s;
    s.kind = static_cast<ShapeKind>(rnd.integer(3));
    s.color = random_colour(rnd, {0.6, 1.0}, {0.7, 1.0});
    s.r = rnd.uniform(0.12, 0.28) * side;
    s.x0 = rnd.uniform(s.r, W - s.r);
    s.y0 = rnd.uniform(s.r, H - s.r);
    const double speed = rnd.uniform(0.3, 1.0) * options_.max_speed * side;
    const double dir = rnd.uniform(0, 2 * kPi);
    s.vx = speed * std::cos(dir);
    s.vy = speed * std::sin(dir);
    s.angle = rnd.uniform(0, 2 * kPi);
    s.spin = rnd.uniform(-0.3, 0.3);
    shapes.push_back(s);
  }

  Tensor clip = empty({T, 3, H, W}, DType::f32);
  float* out = clip.data<float>();
  const int64_t plane = H * W;
  for (int64_t t = 0; t < T; ++t) {
    float* frame = out + t * 3 * plane;
    for (int64_t y = 0; y < H; ++y)
      for (int64_t x = 0; x < W; ++x) {
        const double a = std::clamp(0.5 + (x - 0.5 * W) * gx + (y - 0.5 * H) * gy, 0.0, 1.0);
        for (int c = 0; c < 3; ++c)
          frame[c * plane + y * W + x] = static_cast<float>(bg0[c] + (bg1[c] - bg0[c]) * a);
      }
    for (const Shape2d& s : shapes) {
      const double cx = bounce(s.x0 + s.vx * t, s.r, W - s.r);
      const double cy = bounce(s.y0 + s.vy * t, s.r, H - s.r);
      const double ang = s.angle + s.spin * t;
      // The box holds the shape at any angle (a box of r + 2 cut rotated corners off).
      const double h = shape_half_extent(s.r);
      const int64_t y0 = std::max<int64_t>(0, static_cast<int64_t>(cy - h));
      const int64_t y1 = std::min<int64_t>(H, static_cast<int64_t>(cy + h) + 1);
      const int64_t x0 = std::max<int64_t>(0, static_cast<int64_t>(cx - h));
      const int64_t x1 = std::min<int64_t>(W, static_cast<int64_t>(cx + h) + 1);
      for (int64_t y = y0; y < y1; ++y)
        for (int64_t x = x0; x < x1; ++x) {
          // Pixel centres at +0.5.
          const double d = shape_distance(s.kind, s.r, x + 0.5 - cx, y + 0.5 - cy, ang);
          const double cov = std::clamp(0.5 - d, 0.0, 1.0);
          if (cov <= 0) continue;
          for (int c = 0; c < 3; ++c) {
            float& p = frame[c * plane + y * W + x];
            p = static_cast<float>(p + (s.color[c] - p) * cov);
          }
        }
    }
  }
  for (int64_t i = 0; i < clip.numel(); ++i) out[i] = out[i] * 2.0f - 1.0f;
  return Sample{clip, static_cast<int64_t>(shapes[0].kind), index};
}

}  // namespace zt::data
