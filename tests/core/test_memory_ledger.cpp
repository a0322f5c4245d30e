// The memory ledger's rules at their edges: a limit is a ceiling an allocation may reach
// but not pass; a refused allocation charges nothing, to its ledger or to the process's
// count; peaks per tag and in total follow every allocation, limited or not; the
// out-of-memory message names what is in use now (not the peak) and the consumers
// largest first; and the byte sizes that limits are written and reported in.
#include <cstdint>
#include <memory>
#include <string>

#include "common/test_util.h"

using namespace zt;

TEST(MemoryLedger, AnAllocationMayReachTheLimitButNotPassIt) {
  auto ledger = std::make_shared<MemoryLedger>("rank 1");
  ledger->set_limit(Device::cpu(), 4096);
  LedgerScope scope(ledger);
  Tensor full_limit = empty({1024});  // 4096 bytes: exactly the limit
  EXPECT_EQ(memory_stats().total_current, 4096);
  EXPECT_TRUE(
      test::throws_with([] { (void)empty({1}, DType::b8); }, "would pass its limit of 4.0 KiB"))
      << "one byte past the limit";
  EXPECT_EQ(memory_stats().total_current, 4096) << "the refused byte is not charged";
}

TEST(MemoryLedger, ARefusedOrFreedAllocationLeavesTheProcessCountAsItWas) {
  auto ledger = std::make_shared<MemoryLedger>("rank 0");
  ledger->set_limit(Device::cpu(), 1000);
  LedgerScope scope(ledger);
  const int64_t before = process_cpu_bytes();
  EXPECT_TRUE(test::throws_with([] { (void)empty({1000}); }, "would pass its limit"));
  EXPECT_EQ(process_cpu_bytes(), before) << "a refusal past the ledger's limit";
  {
    Tensor t = empty({100});  // 400 bytes
    EXPECT_EQ(process_cpu_bytes(), before + 400);
  }
  EXPECT_EQ(process_cpu_bytes(), before) << "a freed tensor";
}

TEST(MemoryLedger, PeaksPerTagFollowAllocationsUnderALimitToo) {
  auto ledger = std::make_shared<MemoryLedger>();
  ledger->set_limit(Device::cpu(), 1 << 20);
  LedgerScope scope(ledger);
  {
    MemTagScope tag(MemTag::kActivation);
    Tensor a = empty({100});  // 400 bytes, freed
  }
  MemoryCounters c = memory_stats();
  EXPECT_EQ(c.pk(MemTag::kActivation), 400);
  EXPECT_EQ(c.total_peak, 400);
  EXPECT_NE(ledger->report_json(Device::cpu()).find("\"total\":0,\"total_peak\":400}"),
            std::string::npos)
      << ledger->report_json(Device::cpu());
}

TEST(MemoryLedger, TheOutOfMemoryMessageNamesWhatIsHeldNowLargestFirst) {
  auto ledger = std::make_shared<MemoryLedger>("rank 2");
  ledger->set_limit(Device::cpu(), 2048);
  LedgerScope scope(ledger);
  { Tensor gone = empty({400}); }  // 1600 bytes, freed: the peak only
  MemTagScope tag(MemTag::kParamShard);
  Tensor p = empty({10}, DType::f64);  // 80 bytes
  MemTagScope inner(MemTag::kActivation);
  Tensor a = empty({100});  // 400 bytes
  const std::string msg = test::error_of([] { (void)empty({1000}); });
  EXPECT_NE(msg.find("rank 2 is out of memory on cpu: allocating 3.9 KiB (activation) with 480 B "
                     "in use would pass its limit of 2.0 KiB. Largest consumers: activation "
                     "400 B, param_shard 80 B (peak 1.6 KiB)."),
            std::string::npos)
      << msg;
}

// The advice ends with the setting that shrinks the largest consumer, the request included:
// offloading for optimizer state, the gather window for gathered parameters, and so on.
TEST(MemoryLedger, TheOutOfMemoryAdviceNamesTheSettingOfTheLargestConsumer) {
  struct Case {
    MemTag held, asked;
    int64_t held_n, asked_n;
    const char *advice, *not_advised;  // the other settings' advice is left out
  };
  for (const Case& c : {
           Case{MemTag::kOptimState, MemTag::kActivation, 300, 200, "offload_optimizer",
                "stage3_max_live_parameters"},
           Case{MemTag::kParamShard, MemTag::kGatheredParam, 100, 350, "stage3_max_live_parameters",
                "reduce_bucket_size"},
           Case{MemTag::kOptimState, MemTag::kActivation, 100, 350, "activation_checkpointing",
                "stage3_max_live_parameters"},
           Case{MemTag::kCommBuffer, MemTag::kOther, 300, 200, "reduce_bucket_size",
                "stage3_max_live_parameters"},
       }) {
    auto ledger = std::make_shared<MemoryLedger>("rank 0");
    ledger->set_limit(Device::cpu(), 1600);
    LedgerScope scope(ledger);
    Tensor held;
    {
      MemTagScope tag(c.held);
      held = empty({c.held_n});
    }
    MemTagScope tag(c.asked);
    const std::string msg = test::error_of([&] { (void)empty({c.asked_n}); });
    EXPECT_NE(msg.find(c.advice), std::string::npos) << msg;
    EXPECT_EQ(msg.find(c.not_advised), std::string::npos) << msg;
  }
}

// Without a LedgerScope a thread charges the process's own ledger, named so in errors.
TEST(MemoryLedger, TheProcessLedgerIsNamedThisProcess) {
  const int64_t terabytes = int64_t{1} << 40;  // 4 TiB of f32: more than any test machine
  EXPECT_TRUE(test::throws_with([&] { (void)empty({terabytes}); },
                                "this process is out of memory on cpu: allocating 4096.00 GiB"));
}

TEST(ByteSizes, EachUnitHasItsOwnMultiple) {
  EXPECT_EQ(parse_byte_size("3K"), 3 * 1024);
  EXPECT_EQ(parse_byte_size("3KiB"), 3 * 1024);
  EXPECT_EQ(parse_byte_size("3KB"), 3000);
  EXPECT_EQ(parse_byte_size("3M"), 3 << 20);
  EXPECT_EQ(parse_byte_size("3G"), int64_t{3} << 30);
  EXPECT_EQ(parse_byte_size("3GB"), 3'000'000'000);
  EXPECT_EQ(parse_byte_size("3B"), 3);
  // 2^63 bytes is one past the largest int64: refused, never wrapped.
  EXPECT_TRUE(test::throws_with([] { parse_byte_size("8589934592G"); }, "larger than any memory"));
}

TEST(ByteSizes, FormattingChangesUnitAtEachPowerOf1024) {
  EXPECT_EQ(format_byte_size(1023), "1023 B");
  EXPECT_EQ(format_byte_size(1024), "1.0 KiB");
  EXPECT_EQ(format_byte_size(int64_t{1} << 20), "1.0 MiB");
  EXPECT_EQ(format_byte_size(int64_t{1} << 30), "1.00 GiB");
}

// Tag scopes closed out of order (one held by an object that ends early): the scope still
// open keeps its tag, and after the last close the tag is the one before the first opened.
TEST(MemoryLedger, TagScopesClosedOutOfOrderRestoreTheTagBeforeTheFirst) {
  const MemTag before = current_mem_tag();
  auto outer = std::make_unique<MemTagScope>(MemTag::kParamShard);
  auto inner = std::make_unique<MemTagScope>(MemTag::kActivation);
  outer.reset();
  EXPECT_EQ(current_mem_tag(), MemTag::kActivation);
  inner.reset();
  EXPECT_EQ(current_mem_tag(), before) << "not the tag of the scope closed first";
}
