// SyntheticVideo: a clip depends only on (seed, index) — the same from two instances
// and in any order — values lie in [-1, 1], the shapes move between frames, and the
// config factory builds train and held-out sets that differ (and refuses an empty one).
#include <gtest/gtest.h>

#include <cmath>
#include <utility>

#include "core/error.h"
#include "data/factory.h"
#include "data/synthetic_video.h"

namespace zt::data {
namespace {

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const auto x = a.to_vector(), y = b.to_vector();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double d = std::fabs(x[i] - y[i]);
    if (std::isnan(d) || d > m) m = d;  // a NaN is kept (std::max would drop it)
  }
  return m;
}

TEST(Synthetic, DeterministicPerIndex) {
  SyntheticVideo a({.size = 16, .seed = 7}), b({.size = 16, .seed = 7});
  const Sample s3 = a.get(3);
  a.get(9);
  EXPECT_EQ(max_abs_diff(s3.clip, b.get(3).clip), 0.0);
  EXPECT_EQ(s3.label, b.get(3).label);
  EXPECT_EQ(s3.index, 3);
  EXPECT_GT(max_abs_diff(a.get(3).clip, a.get(4).clip), 0.1);
  SyntheticVideo c({.size = 16, .seed = 8});
  EXPECT_GT(max_abs_diff(a.get(3).clip, c.get(3).clip), 0.1);
}

// A clip's draws come in one fixed sequence, so a seed gives the same clips whatever compiler
// built zt (each compiler picks its own order for evaluating a call's arguments): the mean of
// each frame's channels (background and shape colours) and the corner pixels of frame 0 (the
// background alone) of seed 7's clip 3, as every build has drawn them.
TEST(Synthetic, ASeedGivesTheSameClipsWhateverTheCompiler) {
  const std::vector<double> clip = SyntheticVideo({.size = 16, .seed = 7}).get(3).clip.to_vector();
  constexpr size_t kPlane = 32 * 32;  // (4, 3, 32, 32)
  std::vector<double> seen;
  for (size_t p = 0; p < 4 * 3; ++p) {
    double sum = 0;
    for (size_t i = 0; i < kPlane; ++i) sum += clip[p * kPlane + i];
    seen.push_back(sum / kPlane);
  }
  for (size_t c = 0; c < 3; ++c)
    for (size_t corner : {size_t{0}, size_t{31}, size_t{31 * 32}, kPlane - 1})
      seen.push_back(clip[c * kPlane + corner]);
  const std::vector<double> expected = {
      -0.1649155, -0.3379890, -0.1703758, -0.1534538, -0.3263862, -0.1743423,  // frames 0, 1
      -0.1483051, -0.3220945, -0.1686644, -0.1414056, -0.3161222, -0.1636297,  // frames 2, 3
      -0.0790006, -0.4718868, -0.3849601, -0.8100317,                          // red corners
      -0.0707571, -0.3963103, -0.3242812, -0.6765038,                          // green
      0.2456892,  -0.2677689, -0.1541655, -0.7096863};                         // blue
  ASSERT_EQ(seen.size(), expected.size());
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_NEAR(seen[i], expected[i], 1e-6) << "value " << i;
}

TEST(Synthetic, ShapeRangeAndMotion) {
  SyntheticVideo v({.size = 8, .frames = 4, .height = 32, .width = 24});
  for (int64_t i = 0; i < 8; ++i) {
    const Sample s = v.get(i);
    ASSERT_EQ(s.clip.sizes(), (Shape{4, 3, 32, 24}));
    EXPECT_EQ(s.clip.dtype(), DType::f32);
    for (double x : s.clip.to_vector()) {
      ASSERT_GE(x, -1.0);
      ASSERT_LE(x, 1.0);
    }
    EXPECT_GE(s.label, 0);
    EXPECT_LT(s.label, 3);
    // Consecutive frames differ: something moves.
    EXPECT_GT(max_abs_diff(s.clip.select(0, 0), s.clip.select(0, 3)), 0.05) << "clip " << i;
  }
  EXPECT_THROW(v.get(8), Error);
}

// Every point a shape covers (distance < 0.5) lies at least a pixel inside the box it is
// drawn in, at any angle and size, so no corner is cut off by the box's straight edge
// (with a box of r + 2, a square's corner at 45 degrees was from r of about 8 px on). The
// covered set is convex and holds the centre, so a ring just inside the box's edge and
// beyond it, uncovered, shows that nothing outside is covered.
TEST(Synthetic, TheDrawingBoxHoldsEveryShapeAtAnyAngle) {
  constexpr double kPi = 3.14159265358979323846;
  for (ShapeKind kind : {ShapeKind::circle, ShapeKind::square, ShapeKind::triangle})
    for (double r : {2.0, 3.84, 9.0, 17.9, 36.0, 71.7})
      for (int a = 0; a < 48; ++a) {
        const double angle = a * 2 * kPi / 48, h = shape_half_extent(r);
        double nearest = 1e30;  // the smallest distance on the ring
        for (double out = h - 1; out <= h + 2; out += 1)
          for (double t = -out; t <= out; t += 0.25) {
            const std::pair<double, double> ring[] = {{out, t}, {-out, t}, {t, out}, {t, -out}};
            for (const auto& [dx, dy] : ring)
              nearest = std::min(nearest, shape_distance(kind, r, dx, dy, angle));
          }
        ASSERT_GE(nearest, 0.5) << "kind " << static_cast<int>(kind) << ", r " << r << ", angle "
                                << angle << ": covered outside the box";
      }
}

TEST(Synthetic, FactoryBuildsTrainAndEvalSets) {
  data::DataConfig cfg;
  cfg.num_samples = 20;
  cfg.eval_samples = 5;
  auto train = make_dataset(cfg);
  auto eval = make_dataset(cfg, true);
  EXPECT_EQ(train->size(), 20);
  EXPECT_EQ(eval->size(), 5);
  EXPECT_GT(max_abs_diff(train->get(0).clip, eval->get(0).clip), 0.1);
  auto loader = make_loader(train, cfg, 4, 1, 2);
  Batch b = loader->next();
  EXPECT_EQ(b.clips.sizes(), (Shape{4, 4, 3, 32, 32}));
  EXPECT_EQ(loader->batches_per_epoch(), 2);
}

// An evaluation reads its items in order, whatever data.shuffle says of training: its
// loader does not shuffle, and keeps the last, incomplete batch.
TEST(Synthetic, AnEvalLoaderReadsItsItemsInOrderEvenWithShuffle) {
  data::DataConfig cfg;
  cfg.num_samples = 20;
  cfg.eval_samples = 5;
  cfg.shuffle = true;
  auto loader = make_loader(make_dataset(cfg, true), cfg, 2, 0, 1, /*eval=*/true);
  EXPECT_FALSE(loader->sampler().shuffle());
  EXPECT_EQ(loader->batches_per_epoch(), 3);
  std::vector<int64_t> read;
  for (int64_t b = 0; b < 3; ++b)
    for (double i : loader->next().indices.to_vector()) read.push_back(static_cast<int64_t>(i));
  EXPECT_EQ(read, (std::vector<int64_t>{0, 1, 2, 3, 4}));
}

// data.eval_samples: 0 is an empty eval split: reading it is an error naming the key (it
// used to hold one clip), and the training set is read as before.
TEST(Synthetic, AnEmptyEvalSplitIsAnErrorNamingTheKey) {
  data::DataConfig cfg;
  cfg.num_samples = 4;
  cfg.eval_samples = 0;
  EXPECT_EQ(make_dataset(cfg)->size(), 4);
  for (auto eval : {+[](const DataConfig& c) { return make_dataset(c, true); },
                    +[](const DataConfig& c) { return make_eval_dataset(c, nullptr, 0); }}) {
    try {
      eval(cfg);
      ADD_FAILURE() << "an empty eval split was read";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("the eval split is empty: data.eval_samples is 0"),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace zt::data
