// Library call sites (core/api_profile.h): ZT_API counts every call in the thread's work
// counts, and while an ApiProfile lives each site sums its calls and host time; sites are
// reported per call site, most time first, and a profile sees only the calls made while
// it lived. A plain function stands in for a CUDA call: the machinery is the same.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "core/api_profile.h"
#include "core/work_counts.h"

namespace zt {
namespace {

int slow_call(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  return ms;
}

int quick_call(int x) {
  return x + 1;
}

// Two distinct call sites, each its own ZT_API expansion.
int call_slow(int ms) {
  return ZT_API(slow_call(ms));
}
int call_quick(int x) {
  return ZT_API(quick_call(x));
}

const ApiProfile::Site* find(const std::vector<ApiProfile::Site>& sites, const std::string& call) {
  for (const auto& s : sites)
    if (s.call == call) return &s;
  return nullptr;
}

TEST(ApiProfile, CountsAndTimesEachCallSite) {
  const WorkCounts before = work_counts();
  EXPECT_EQ(call_quick(1), 2) << "ZT_API passes the call's value through";
  EXPECT_EQ((work_counts() - before).api_calls, 1) << "counted without a profile too";

  ApiProfile profile;
  for (int i = 0; i < 3; ++i) EXPECT_EQ(call_slow(4), 4);
  for (int i = 0; i < 5; ++i) call_quick(i);
  EXPECT_EQ((work_counts() - before).api_calls, 9);

  const std::vector<ApiProfile::Site> sites = profile.sites();
  const ApiProfile::Site* slow = find(sites, "slow_call");
  const ApiProfile::Site* quick = find(sites, "quick_call");
  ASSERT_NE(slow, nullptr);
  ASSERT_NE(quick, nullptr);
  EXPECT_EQ(slow->calls, 3);
  EXPECT_EQ(quick->calls, 5) << "the call before the profile opened is not in it";
  EXPECT_GE(slow->host_ms, 12.0) << "three 4 ms sleeps";
  EXPECT_EQ(sites.front().call, "slow_call") << "most host time first";
  EXPECT_NE(slow->where.find("test_api_profile.cpp:"), std::string::npos) << slow->where;
  EXPECT_NE(slow->where, quick->where);
}

TEST(ApiProfile, SeesOnlyTheCallsMadeWhileItLived) {
  call_quick(0);  // the site exists, its totals are not 0 from earlier tests
  ApiProfile outer;
  call_quick(0);
  std::vector<ApiProfile::Site> inner_sites;
  {
    ApiProfile inner;
    call_quick(0);
    call_quick(0);
    inner_sites = inner.sites();
  }
  ASSERT_NE(find(inner_sites, "quick_call"), nullptr);
  EXPECT_EQ(find(inner_sites, "quick_call")->calls, 2);
  EXPECT_EQ(find(outer.sites(), "quick_call")->calls, 3) << "overlapping profiles each count";
  EXPECT_EQ(find(outer.sites(), "slow_call"), nullptr) << "a site not called is not listed";
}

TEST(ApiProfile, CountsCallsFromEveryThread) {
  ApiProfile profile;
  std::thread th([] {
    for (int i = 0; i < 4; ++i) call_quick(i);
  });
  th.join();
  call_quick(0);
  EXPECT_EQ(find(profile.sites(), "quick_call")->calls, 5);
}

// One ZT_API in a template: an ApiSite per instantiation, one row in the profile.
template <typename T>
T call_templated(T x) {
  return ZT_API(quick_call(static_cast<int>(x)));
}

TEST(ApiProfile, ASiteInATemplateIsOneRow) {
  ApiProfile profile;
  call_templated<int>(1);
  call_templated<long>(2);
  call_templated<short>(3);
  int rows = 0;  // only the template's site called quick_call while the profile lived
  int64_t calls = 0;
  for (const auto& site : profile.sites())
    if (site.call == "quick_call") {
      ++rows;
      calls += site.calls;
    }
  EXPECT_EQ(rows, 1);
  EXPECT_EQ(calls, 3);
}

}  // namespace
}  // namespace zt
