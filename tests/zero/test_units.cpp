// Unit tests of pieces the lessons rely on, kept out of the lessons' story: the replica
// check's hash, byte sizes as configs write them, the timeline's rows, where CUDA graphs
// may run, and the fp16 loss scale's moves.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "core/step_graph.h"
#include "zero/checkpoint.h"
#include "zero/lesson_util.h"
#include "zero/loss_scaler.h"
#include "zero/timeline.h"

using namespace zt;
using nlohmann::json;

// The replica check compares content_hash()es: any one flipped bit, at the start, in the
// middle or in the tail past the last 32-byte block, changes the hash; so does the shape;
// a strided view hashes as its contiguous copy.
TEST(ContentHash, SeesEveryBit) {
  Tensor t = arange(0, 37);  // 148 bytes: four 32-byte blocks and a 20-byte tail
  const uint64_t h = zero::content_hash(t);
  EXPECT_EQ(h, zero::content_hash(t.clone()));
  EXPECT_NE(h, zero::content_hash(t.reshape({37, 1})));
  for (int64_t byte : {0, 70, 127, 128, 147}) {
    for (int bit : {0, 7}) {
      Tensor u = t.clone();
      static_cast<unsigned char*>(u.data_ptr())[byte] ^= static_cast<unsigned char>(1u << bit);
      EXPECT_NE(h, zero::content_hash(u)) << "byte " << byte << " bit " << bit;
    }
  }
  Tensor m = arange(0, 12).reshape({3, 4});
  EXPECT_EQ(zero::content_hash(m.transpose(0, 1)),
            zero::content_hash(m.transpose(0, 1).contiguous()));
}

// memory.limit and friends: plain bytes, binary (k, MiB, GiB) and decimal (MB) units.
TEST(ByteSize, Parses) {
  EXPECT_EQ(parse_byte_size("4096"), 4096);
  EXPECT_EQ(parse_byte_size("512k"), 512 * 1024);
  EXPECT_EQ(parse_byte_size("64MiB"), int64_t{64} << 20);
  EXPECT_EQ(parse_byte_size("1.5GiB"), int64_t{3} << 29);
  EXPECT_EQ(parse_byte_size("2 MB"), 2'000'000);
  EXPECT_TRUE(test::throws_with([] { parse_byte_size("lots", "memory.limit"); },
                                "memory.limit: 'lots' is not a byte size"));
  EXPECT_TRUE(test::throws_with([] { parse_byte_size("-1"); }, "is not a byte size"));
  // 0 means "no limit"; nothing else may become it by rounding or overflow.
  EXPECT_EQ(parse_byte_size("0"), 0);
  EXPECT_EQ(parse_byte_size("1"), 1);
  EXPECT_EQ(parse_byte_size("9e18"), int64_t{9000000000000000000});
  EXPECT_TRUE(test::throws_with([] { parse_byte_size("0.4"); }, "is less than one byte"));
  EXPECT_TRUE(test::throws_with([] { parse_byte_size("1e30"); }, "larger than any memory"));
  EXPECT_TRUE(test::throws_with([] { parse_byte_size("1e19"); }, "larger than any memory"));
}

// Many spans of one track in flight at once (prefetches issued far ahead, waited late) each
// get a row of that track: rows are never named, or tagged, after another track.
TEST(Timeline, ManyOverlappingSpansStayOnTheirTrack) {
  zero::Timeline t(0, 1, Device::cpu());
  const int64_t begin = zero::Timeline::now_ns();
  constexpr int kInFlight = 25;
  for (int i = 0; i < kInFlight; ++i)
    t.span(zero::Track::kPrefetch, "all_gather #" + std::to_string(i), begin);
  const json events = json::parse("[" + t.events_json(begin) + "]");
  std::map<int, std::string> row_names;
  for (const json& e : events)
    if (e["ph"] == "M" && e["name"] == "thread_name")
      row_names[e["tid"].get<int>()] = e["args"]["name"];
  int spans = 0;
  for (const json& e : events) {
    if (e["ph"] != "X") continue;
    ++spans;
    EXPECT_EQ(e["cat"], "all-gather (prefetch)") << e.dump();
    EXPECT_EQ(row_names[e["tid"].get<int>()].rfind("all-gather (prefetch)", 0), 0u)
        << row_names[e["tid"].get<int>()];
  }
  EXPECT_EQ(spans, kInFlight);
  EXPECT_EQ(row_names.size(), static_cast<size_t>(kInFlight)) << "one row per overlapping span";
}

// The counter track: each sample is a "C" event named "memory <device>" whose args hold
// every ledger tag's current bytes, under mem_tag_name()'s keys. A sample is taken at each
// event and kept only when some tag moved since the last one kept.
TEST(Timeline, MemoryCountersShowEachTagsBytes) {
  LedgerScope own(std::make_shared<MemoryLedger>("timeline test"));  // counts from 0
  zero::Timeline t(3, 1, Device::cpu());
  const int64_t begin = zero::Timeline::now_ns();
  t.instant(zero::Track::kRelease, "nothing held");
  t.instant(zero::Track::kRelease, "still nothing");  // no new sample
  Tensor gathered, state;
  {
    MemTagScope tag(MemTag::kGatheredParam);
    gathered = zeros({1000});  // 4000 bytes
  }
  {
    MemTagScope tag(MemTag::kOptimState);
    state = zeros({10}, DType::f64);  // 80 bytes
  }
  t.instant(zero::Track::kRelease, "both held");
  gathered = Tensor();
  t.span(zero::Track::kOptimizer, "gathered freed", begin);
  const json events = json::parse("[" + t.events_json(begin) + "]");
  std::vector<json> samples;
  for (const json& e : events)
    if (e["ph"] == "C") samples.push_back(e);
  ASSERT_EQ(samples.size(), 3u) << events.dump();
  const std::vector<std::string> keys = {"param_shard",    "grad_shard", "optim_state",
                                         "gathered_param", "activation", "comm_buffer",
                                         "other"};
  auto bytes = [&](const json& sample) {
    EXPECT_EQ(sample["name"], "memory cpu");
    EXPECT_EQ(sample["pid"], 3);
    std::map<std::string, int64_t> by_tag;
    for (const auto& [tag, value] : sample["args"].items()) by_tag[tag] = value.get<int64_t>();
    EXPECT_EQ(by_tag.size(), keys.size()) << sample.dump();
    for (const std::string& k : keys) EXPECT_TRUE(by_tag.count(k)) << k << " in " << sample.dump();
    return by_tag;
  };
  for (const auto& [tag, value] : bytes(samples[0])) EXPECT_EQ(value, 0) << tag;
  std::map<std::string, int64_t> held = bytes(samples[1]);
  EXPECT_EQ(held["gathered_param"], 4000);
  EXPECT_EQ(held["optim_state"], 80);
  int64_t total = 0;
  for (const auto& [tag, value] : held) total += value;
  EXPECT_EQ(total, 4080) << "no other tag moved";
  std::map<std::string, int64_t> freed = bytes(samples[2]);
  EXPECT_EQ(freed["gathered_param"], 0);
  EXPECT_EQ(freed["optim_state"], 80);
  EXPECT_GE(samples[1]["ts"].get<double>(), samples[0]["ts"].get<double>());
}

TEST(StepGraph, CudaGraphsNeedACudaDevice) {
  EXPECT_TRUE(
      test::throws_with([] { StepGraph graph(Device::cpu()); }, "CUDA graphs need a CUDA device"));
}

// The fp16 loss scale moves as DeepSpeed's DynamicLossScaler moves it (the sequences
// DeepSpeed 0.19 gives for the same settings): hysteresis 2 tolerates one overflow, then
// every overflow halves until the scale grows again, which restores the hysteresis; the
// scale doubles after window + 1 good steps in a row.
static zero::MixedPrecision dynamic_fp16(int initial_scale_power, int hysteresis) {
  zero::MixedPrecision p;
  p.fp16 = true;
  p.initial_scale_power = initial_scale_power;
  p.hysteresis = hysteresis;
  return p;
}

TEST(LossScaler, FollowsDeepSpeedStepForStep) {
  zero::MixedPrecision p = dynamic_fp16(16, 2);
  p.loss_scale_window = 10;
  auto scales = [&](const std::string& steps) {  // 'o' overflow, 'g' good step
    zero::LossScaler s(p);
    std::vector<double> out{s.scale()};
    for (char c : steps) {
      if (c == 'o')
        s.on_overflow();
      else
        s.on_good_step();
      out.push_back(s.scale());
    }
    return out;
  };
  const double k = 65536;
  EXPECT_EQ(scales("oooooooo"),
            (std::vector<double>{k, k, k / 2, k / 4, k / 8, k / 16, k / 32, k / 64, k / 128}));
  // One overflow, 30 good steps (doubling at the 11th and 21st since it), one overflow: the
  // growth restored the hysteresis, so the last overflow only uses it up.
  const std::vector<double> s = scales("o" + std::string(30, 'g') + "o");
  EXPECT_EQ(s[11], k);
  EXPECT_EQ(s[12], 2 * k);
  EXPECT_EQ(s[22], 4 * k);
  EXPECT_EQ(s.back(), 4 * k);
  const std::vector<double> g = scales(std::string(23, 'g'));
  EXPECT_EQ(g[10], k);
  EXPECT_EQ(g[11], 2 * k);          // after the 11th good step
  EXPECT_EQ(g[21], 4 * k);          // after the 21st
  p.consecutive_hysteresis = true;  // a good step restores it: o g o never halves
  EXPECT_EQ(scales("ogogo").back(), k);
}

// At the minimum scale an overflow that would halve it is an error, as in DeepSpeed: the
// run stops instead of skipping every step from then on.
TEST(LossScaler, AnOverflowAtTheMinimumStopsTheRun) {
  zero::MixedPrecision p = dynamic_fp16(2, 1);
  p.min_loss_scale = 2;
  zero::LossScaler s(p);
  s.on_overflow();  // 4 -> 2
  EXPECT_EQ(s.scale(), 2.0);
  EXPECT_TRUE(test::throws_with([&] { s.on_overflow(); },
                                "the gradients overflow with the loss scale at its minimum, "
                                "min_loss_scale 2 (zero::Config::precision; DeepSpeed's "
                                "fp16.min_loss_scale)"));
  // An initial scale below the minimum is not at it: the first halving raises it to the
  // minimum, as DeepSpeed's max(scale / 2, min_scale) does.
  p.min_loss_scale = 64;
  zero::LossScaler below(p);  // 2^2 = 4
  below.on_overflow();
  EXPECT_EQ(below.scale(), 64.0);
  // Whatever min_loss_scale says, the scale stops at 2^-126: the step divides the fp32
  // gradients by it, and a smaller scale's reciprocal is no finite float.
  p.min_loss_scale = 0;
  zero::LossScaler floor(p);
  for (int i = 0; i < 128; ++i) floor.on_overflow();
  EXPECT_EQ(floor.scale(), 0x1p-126);
  EXPECT_TRUE(std::isfinite(static_cast<float>(1.0 / floor.scale())));
  EXPECT_TRUE(test::throws_with([&] { floor.on_overflow(); },
                                "the loss scale at its minimum, 2^-126 (the smallest scale whose "
                                "reciprocal is a finite float; min_loss_scale is 0)"));
}

// The scale, its hysteresis and its window travel with a checkpoint: a resumed fp16 run
// goes on from them instead of starting again at 2^initial_scale_power.
TEST(LossScaler, ItsStateTravelsWithTheCheckpoint) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("zt_scaler_" + std::to_string(::getpid())))
          .string();
  comm::run_threads(1, [&](comm::Communicator& comm) {
    zero::Config cfg;
    cfg.precision.fp16 = true;
    cfg.precision.initial_scale_power = 40;  // overflows at once
    auto train = [&](zero::Engine& e, int steps) {
      for (int i = 0; i < steps; ++i) {
        manual_seed(static_cast<uint64_t>(i));
        e.backward(mean(e(randn({4, 8}).to(DType::f16)).to(DType::f32)));
        e.step();
      }
    };
    auto saved = std::make_shared<lesson::TanhStack>(2, 8);
    zero::Engine a(saved, comm, cfg, {});
    train(a, 3);  // hysteresis 2: the first overflow is tolerated, then 2^40 -> 2^39 -> 2^38
    ASSERT_EQ(a.loss_scale(), std::ldexp(1.0, 38));
    zero::CheckpointExtra extra;
    extra.step = 3;  // the app's count: the engine applied none of the 3 steps
    zero::save_checkpoint(a, dir, "step_000003", extra);
    auto resumed = std::make_shared<lesson::TanhStack>(2, 8);
    zero::Engine b(resumed, comm, cfg, {});
    zero::load_checkpoint(b, dir + "/step_000003");
    EXPECT_EQ(b.loss_scale(), a.loss_scale());
    const zero::LossScaler::State x = a.loss_scaler().state(), y = b.loss_scaler().state();
    EXPECT_EQ(y.hysteresis, x.hysteresis);
    EXPECT_EQ(y.iteration, x.iteration);
    EXPECT_EQ(y.last_overflow, x.last_overflow);
    // The step counts too: 3 skipped, none applied (the app's step, 3, counts both).
    EXPECT_EQ(b.global_step(), 0);
    EXPECT_EQ(b.stats().overflow_skips, 3);
    // A checkpoint saved before the counts were (an app's, whose step counts both): the
    // optimizer's step count gives the applied steps, the rest were skipped.
    const std::string meta_path = dir + "/step_000003/meta.json";
    nlohmann::json meta = nlohmann::json::parse(std::ifstream(meta_path));
    meta.erase("engine_steps");
    meta.erase("meta_digest");  // nor meta.json's own digest
    meta["step"] = 3;
    std::ofstream(meta_path) << meta.dump(1);
    auto old = std::make_shared<lesson::TanhStack>(2, 8);
    zero::Engine c(old, comm, cfg, {});
    zero::load_checkpoint(c, dir + "/step_000003");
    EXPECT_EQ(c.global_step(), 0);
    EXPECT_EQ(c.stats().overflow_skips, 3);
  });
  std::filesystem::remove_all(dir);
}

// A fixed loss_scale in the config is what the user asked for (often after a dynamic scale
// misbehaved): it wins over the checkpoint's dynamic scale, which would otherwise stay fixed
// at its saved value, and a note says so. Both dynamic: the saved scale goes on.
TEST(LossScaler, AFixedScaleInTheConfigWinsOverTheSavedOne) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("zt_fixed_" + std::to_string(::getpid())))
          .string();
  comm::run_threads(1, [&](comm::Communicator& comm) {
    zero::Config dynamic;
    dynamic.precision.fp16 = true;
    dynamic.precision.initial_scale_power = 40;  // overflows at once
    zero::Engine a(std::make_shared<lesson::TanhStack>(2, 8), comm, dynamic, {});
    for (int i = 0; i < 3; ++i) {
      manual_seed(static_cast<uint64_t>(i));
      a.backward(mean(a(randn({4, 8}).to(DType::f16)).to(DType::f32)));
      a.step();
    }
    ASSERT_EQ(a.loss_scale(), std::ldexp(1.0, 38));
    zero::CheckpointExtra extra;
    extra.step = 3;
    zero::save_checkpoint(a, dir, "step_000003", extra);

    zero::Config fixed = dynamic;
    fixed.precision.loss_scale = 128;
    zero::Engine b(std::make_shared<lesson::TanhStack>(2, 8), comm, fixed, {});
    ::testing::internal::CaptureStderr();
    zero::load_checkpoint(b, dir + "/step_000003");
    const std::string note = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(b.loss_scale(), 128.0);
    EXPECT_NE(note.find("note: the checkpoint's fp16 loss scale was dynamic, at 2.74878e+11, the "
                        "config's is fixed at 128; going on with the config's"),
              std::string::npos)
        << note;
    zero::Engine c(std::make_shared<lesson::TanhStack>(2, 8), comm, dynamic, {});
    zero::load_checkpoint(c, dir + "/step_000003");
    EXPECT_EQ(c.loss_scale(), a.loss_scale());
  });
  std::filesystem::remove_all(dir);
}
