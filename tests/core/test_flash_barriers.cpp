// The fused attention kernels' barriers. The host emulation (core/cpu/flash_host.h) runs
// a block's lanes one after another, so it computes the right numbers even where the GPU
// would race for want of a barrier. Here every pass runs on a backend derived from it
// that records each shared-memory access with its lane and barrier epoch, and flags two
// accesses by different lanes, at least one a write, with no barrier between them; an
// asynchronous copy counts as in flight, to every lane, from its issue to the barrier
// after the wait that lands it. The checker is tested on planted races first.
#include <gtest/gtest.h>

#include <climits>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/cpu/flash_host.h"
#include "core/ops.h"

using namespace zt;
using flash::U4;

namespace {

// Shared memory's shadow: per 2-byte address, its last write and this epoch's readers.
struct Shadow {
  int writer = -1;              // the writing lane; -1: never written
  int64_t from = 0, until = 0;  // epochs in which the write is not yet visible
  bool async = false;           // an asynchronous copy: not even to its own lane
  int64_t read_epoch = -1;
  int reader = -1;
  bool many_readers = false;
};

struct Tracker {
  std::unordered_map<uintptr_t, Shadow> shadow;
  struct InFlight {
    uintptr_t address;
    int64_t group;  // groups are numbered from 0 as committed; `committed` is the open one
  };
  std::vector<InFlight> in_flight;  // asynchronous copies not yet landed
  int64_t committed = 0;            // groups committed so far
  int64_t epoch = 0;
  int lane = -1;  // the lane in Block::each; -1 outside
  uintptr_t lo = 0, hi = 0;
  std::vector<std::string> races;

  bool shared(const void* p) const {
    const auto a = reinterpret_cast<uintptr_t>(p);
    return a >= lo && a < hi;
  }
  void race(const char* kind, uintptr_t a, int first, int second) {  // first -1: several
    races.push_back(std::string(kind) + " at byte " + std::to_string(a - lo) + " by lanes " +
                    (first < 0 ? std::string("several") : std::to_string(first)) + " and " +
                    std::to_string(second) + " in epoch " + std::to_string(epoch));
  }
  bool unseen(const Shadow& s, int ln) const {  // s's write is not yet visible to ln
    return s.writer >= 0 && s.from <= epoch && epoch <= s.until && (s.async || s.writer != ln);
  }
  void write(const void* p, int bytes, int ln, bool async) {
    for (int b = 0; b < bytes; b += 2) {
      const uintptr_t a = reinterpret_cast<uintptr_t>(p) + b;
      Shadow& s = shadow[a];
      if (unseen(s, ln)) race("write after write", a, s.writer, ln);
      if (s.read_epoch == epoch && (s.many_readers || s.reader != ln))
        race("write after read", a, s.many_readers ? -1 : s.reader, ln);
      s.writer = ln;
      s.from = epoch;
      s.until = async ? INT64_MAX : epoch;
      s.async = async;
      if (async) in_flight.push_back({a, committed});
    }
  }
  void read(const void* p, int bytes, int ln) {
    for (int b = 0; b < bytes; b += 2) {
      const uintptr_t a = reinterpret_cast<uintptr_t>(p) + b;
      Shadow& s = shadow[a];
      if (unseen(s, ln)) race("read after write", a, s.writer, ln);
      if (s.read_epoch != epoch) {
        s.read_epoch = epoch;
        s.reader = ln;
        s.many_readers = false;
      } else if (s.reader != ln) {
        s.many_readers = true;
      }
    }
  }
  // The copies of every committed group but the newest `pending` (pending 0: every copy)
  // are visible after the next barrier.
  void land(int pending) {
    if (pending == 0) ++committed;
    std::vector<InFlight> still;
    for (const InFlight& c : in_flight) {
      if (c.group < committed - pending)
        shadow[c.address].until = epoch;
      else
        still.push_back(c);
    }
    in_flight = std::move(still);
  }
};

Tracker* tracker = nullptr;

/// The host block with every shared-memory access recorded.
template <class E, int kWarpCount>
struct RaceBlock : flash::HostBlock<E, kWarpCount> {
  using Base = flash::HostBlock<E, kWarpCount>;
  template <class T>
  using Reg = typename Base::template Reg<T>;

  template <typename F>
  static void each(F&& f) {
    Base::each([&](int ln) {
      tracker->lane = ln;
      f(ln);
    });
    tracker->lane = -1;
  }
  static void sync() { ++tracker->epoch; }
  template <typename F>
  static void ldsm(Reg<U4>& r, F&& addr, bool trans) {
    Base::ldsm(
        r,
        [&](int ln) {
          const uint16_t* row = addr(ln);
          tracker->read(row, 16, ln);
          return row;
        },
        trans);
  }
  template <class T>
  static T ld(const T* p, int ln) {
    tracker->read(p, sizeof(T), ln);
    return *p;
  }
  template <class T>
  static void st(T* p, T v, int ln) {
    tracker->write(p, sizeof(T), ln, false);
    *p = v;
  }
  static void copy16(uint16_t* dst, const uint16_t* src) {
    if (tracker->shared(src)) tracker->read(src, 16, tracker->lane);
    if (tracker->shared(dst)) tracker->write(dst, 16, tracker->lane, false);
    Base::copy16(dst, src);
  }
  static void zero16(uint16_t* dst) {
    tracker->write(dst, 16, tracker->lane, false);
    Base::zero16(dst);
  }
  static void copy16_async(uint16_t* dst, const uint16_t* src) {
    tracker->write(dst, 16, tracker->lane, true);
    Base::copy16_async(dst, src);
  }
  static void commit_async() {
    ++tracker->committed;
    Base::commit_async();
  }
  template <int kPending = 0>
  static void wait_async() {
    tracker->land(kPending);
    Base::template wait_async<kPending>();
  }
  static void store2(uint16_t* dst, float lo, float hi) {
    if (tracker->shared(dst)) tracker->write(dst, 4, tracker->lane, false);
    Base::store2(dst, lo, hi);
  }
};

using Block = RaceBlock<bf16, 1>;

// Runs every task of the passes that use shared memory (the forward, the split backward's
// two, the atomic backward's dk / dv), each block with fresh shared memory and a fresh
// shadow; returns the races found.
template <class Tiles>
std::vector<std::string> races_of(int64_t tq, int64_t tk, bool causal) {
  Generator g(5);
  auto normals = [&](int64_t rows) {
    return randn({1, 2, rows, Tiles::D}, g, DType::f64).to(DType::bf16);
  };
  const Tensor q = normals(tq), k = normals(tk), v = normals(tk), dout = normals(tq);
  const Tensor o = Tensor::empty(q.sizes(), DType::bf16),
               dq = Tensor::empty(q.sizes(), DType::bf16);
  const Tensor dk = Tensor::empty(k.sizes(), DType::bf16),
               dv = Tensor::empty(k.sizes(), DType::bf16);
  const Tensor lse = Tensor::empty({1, 2, tq}), delta = Tensor::empty({1, 2, tq});
  flash::Params p =
      flash::params(q, k, v, o, dout, dq, dk, dv, lse, delta, 1.0 / std::sqrt(Tiles::D), causal);
  std::vector<float> dq_acc(static_cast<size_t>(q.numel()));
  p.dq_acc = dq_acc.data();
  Tracker t;
  tracker = &t;
  std::vector<std::string> found;
  auto run = [&]<class Smem = typename Tiles::Smem>(int64_t rows, auto pass) {
    for (int64_t task = 0; task < Tiles::tasks(p, rows); ++task) {
      auto sm = std::make_unique<Smem>();
      t = Tracker{};
      t.lo = reinterpret_cast<uintptr_t>(sm.get());
      t.hi = t.lo + sizeof(Smem);
      pass(task, *sm);
      if (!t.in_flight.empty()) t.races.push_back("asynchronous copies still in flight at the end");
      found.insert(found.end(), t.races.begin(), t.races.end());
    }
  };
  run(tq, [&](int64_t task, typename Tiles::Smem& sm) { Tiles::forward(p, task, sm); });
  run(tq, [&](int64_t task, typename Tiles::Smem& sm) { Tiles::backward_dq(p, task, sm); });
  run(tk, [&](int64_t task, typename Tiles::Smem& sm) { Tiles::backward_dkdv(p, task, sm); });
  // The atomic backward's dk / dv pass, which stages ds for dq's share.
  run.template operator()<typename Tiles::SmemDq>(tk, [&](int64_t task, typename Tiles::Smem& sm) {
    Tiles::template backward_dkdv<true>(p, task, sm);
  });
  tracker = nullptr;
  return found;
}

::testing::AssertionResult no_races(const std::vector<std::string>& races) {
  if (races.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << races.size() << " races, the first: " << races[0];
}

}  // namespace

TEST(FlashBarriers, TheCheckerFindsPlantedRaces) {
  Tracker t;
  tracker = &t;
  alignas(16) uint16_t tile[64] = {};
  t.lo = reinterpret_cast<uintptr_t>(tile);
  t.hi = t.lo + sizeof(tile);
  auto lane0_writes_lane1_reads = [&](bool barrier) {
    t.races.clear();
    Block::each([&](int ln) {
      if (ln == 0) Block::st(&tile[0], uint16_t{1}, ln);
    });
    if (barrier) Block::sync();
    Block::each([&](int ln) {
      if (ln == 1) Block::ld(&tile[0], ln);
    });
    Block::sync();
    return t.races.size();
  };
  EXPECT_EQ(lane0_writes_lane1_reads(false), 1u);
  EXPECT_EQ(lane0_writes_lane1_reads(true), 0u);
  // An asynchronous copy read before its wait, or after the wait but before the barrier.
  alignas(16) const uint16_t src[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  for (int wait_then_sync = 0; wait_then_sync < 3; ++wait_then_sync) {
    t.races.clear();
    Block::each([&](int ln) {
      if (ln == 2) Block::copy16_async(&tile[8], src);
    });
    if (wait_then_sync >= 1) Block::wait_async();
    if (wait_then_sync >= 2) Block::sync();
    Block::each([&](int ln) {
      if (ln == 2) Block::ld(&tile[8], ln);  // even the copying lane must wait
    });
    Block::wait_async();
    Block::sync();
    EXPECT_EQ(t.races.empty(), wait_then_sync == 2) << wait_then_sync;
  }
  // Committed groups: wait_async<1> lands every group but the newest, on the host's block
  // too (its tile holds the first copy, not yet the second).
  t.races.clear();
  Block::each([&](int ln) {
    if (ln == 2) Block::copy16_async(&tile[24], src);
  });
  Block::commit_async();
  Block::each([&](int ln) {
    if (ln == 2) Block::copy16_async(&tile[32], src);
  });
  Block::commit_async();
  Block::wait_async<1>();
  Block::sync();
  EXPECT_EQ(tile[24], 1);
  EXPECT_EQ(tile[32], 0);
  Block::each([&](int ln) {
    if (ln == 3) Block::ld(&tile[24], ln);
  });
  EXPECT_TRUE(t.races.empty()) << t.races.front();
  Block::each([&](int ln) {
    if (ln == 3) Block::ld(&tile[32], ln);  // the newest group: still in flight
  });
  EXPECT_EQ(t.races.size(), 1u);
  Block::wait_async();
  Block::sync();
  EXPECT_EQ(tile[32], 1);
  // Two lanes writing one address in one epoch.
  t.races.clear();
  Block::each([&](int ln) {
    if (ln < 2) Block::st(&tile[16], static_cast<uint16_t>(ln), ln);
  });
  EXPECT_EQ(t.races.size(), 1u);
  tracker = nullptr;
}

TEST(FlashBarriers, EveryPassSyncsItsSharedMemory) {
  // Blocks of 4 warps (D = 32, steps of 32) and of 2 (D = 128, steps of 16); one tile and
  // several, partly filled; causal and not; fewer queries than keys and more.
  // Every tile shape built (flash_shapes.h): 16 or 32 rows per warp, steps of 32 or 64,
  // two stages or three.
  using Small = flash::Tiles<RaceBlock<bf16, 4>, 2>;
  using Wide = flash::Tiles<RaceBlock<bf16, 2>, 8>;
  using SmallLongSteps = flash::Tiles<RaceBlock<bf16, 4>, 2, 1, 4>;
  using SmallTwoTiles = flash::Tiles<RaceBlock<bf16, 4>, 2, 2, 2>;
  using SmallLargest = flash::Tiles<RaceBlock<bf16, 4>, 2, 2, 4>;
  using SmallThreeStages = flash::Tiles<RaceBlock<bf16, 4>, 2, 1, 2, 3>;
  using SmallLongStepsThreeStages = flash::Tiles<RaceBlock<bf16, 4>, 2, 1, 4, 3>;
  using WideThreeStages = flash::Tiles<RaceBlock<bf16, 2>, 8, 1, 1, 3>;
  for (bool causal : {false, true}) {
    for (int64_t t : {33, 100, 200}) {
      SCOPED_TRACE("T=" + std::to_string(t) + " causal=" + std::to_string(causal));
      EXPECT_TRUE(no_races(races_of<Small>(t, t, causal)));
      EXPECT_TRUE(no_races(races_of<Wide>(t, t, causal)));
      EXPECT_TRUE(no_races(races_of<SmallLongSteps>(t, t, causal)));
      EXPECT_TRUE(no_races(races_of<SmallTwoTiles>(t, t, causal)));
      EXPECT_TRUE(no_races(races_of<SmallLargest>(t, t, causal)));
      EXPECT_TRUE(no_races(races_of<SmallThreeStages>(t, t, causal)));
      EXPECT_TRUE(no_races(races_of<SmallLongStepsThreeStages>(t, t, causal)));
      EXPECT_TRUE(no_races(races_of<WideThreeStages>(t, t, causal)));
    }
  }
  EXPECT_TRUE(no_races(races_of<SmallThreeStages>(20, 150, false)));
  EXPECT_TRUE(no_races(races_of<Small>(20, 70, false)));
  EXPECT_TRUE(no_races(races_of<Wide>(70, 20, false)));
  EXPECT_TRUE(no_races(races_of<SmallLargest>(20, 150, false)));
  EXPECT_TRUE(no_races(races_of<SmallLargest>(150, 20, false)));
}
