// Partitioning scopes closed out of the order they opened in (held in a std::optional or a
// unique_ptr, which may end anywhere). Closing one takes away exactly that one: the scopes
// still open keep deciding, the innermost open one alone, and once all are closed
// parameters are plain and allocations carry the tag they had before the first opened.
#include <optional>

#include "zero/lesson_util.h"

using namespace zt;

TEST(ScopeCloseOrder, AnOuterScopeClosedFirstLeavesTheInnerOneDeciding) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    const MemTag before = current_mem_tag();
    std::optional<zero::Init> outer(std::in_place, comm);
    std::optional<zero::Replicated> inner(std::in_place, comm);
    outer.reset();  // the Init first, while the Replicated scope opened inside it is open
    auto a = std::make_shared<nn::Linear>(4, 4);
    EXPECT_TRUE(zero::is_replicated(a->weight)) << "the scope still open decides";
    EXPECT_EQ(current_mem_tag(), MemTag::kOther) << "the Replicated scope's tag";
    inner.reset();
    auto b = std::make_shared<nn::Linear>(4, 4);
    EXPECT_EQ(zero::zero_param(b->weight), nullptr) << "no scope open: a plain parameter";
    EXPECT_EQ(current_mem_tag(), before);

    // The other way round: an Init inside a Replicated scope, the Replicated closed first.
    std::optional<zero::Replicated> outer2(std::in_place, comm);
    std::optional<zero::Init> inner2(std::in_place, comm);
    outer2.reset();
    auto c = std::make_shared<nn::Linear>(4, 4);
    EXPECT_TRUE(zero::is_partitioned(c->weight));
    EXPECT_EQ(current_mem_tag(), MemTag::kGatheredParam) << "the Init scope's tag";
    inner2.reset();
    EXPECT_EQ(current_mem_tag(), before) << "the tag of no scope, not the closed Replicated's";
    auto d = std::make_shared<nn::Linear>(4, 4);
    EXPECT_EQ(zero::zero_param(d->weight), nullptr);
  });
}

// Three scopes, the middle one closed first: the innermost still decides, then the outer.
TEST(ScopeCloseOrder, AMiddleScopeClosedFirstHandsOverToTheOuterOne) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    const MemTag before = current_mem_tag();
    std::optional<zero::Init> outer(std::in_place, comm);
    std::optional<zero::Replicated> middle(std::in_place, comm);
    std::optional<zero::Init> inner(std::in_place, comm);
    middle.reset();
    auto a = std::make_shared<nn::Linear>(4, 4);
    EXPECT_TRUE(zero::is_partitioned(a->weight));
    inner.reset();
    auto b = std::make_shared<nn::Linear>(4, 4);
    EXPECT_TRUE(zero::is_partitioned(b->weight)) << "the outer Init decides again";
    EXPECT_EQ(current_mem_tag(), MemTag::kGatheredParam);
    outer.reset();
    EXPECT_EQ(current_mem_tag(), before);
  });
}
