// The step's agreement on the gradient layout (zero/window_check.h), on its own: two ranks
// that reduced the same parameters in different orders lay their buckets out differently
// just as surely as ranks that reduced different parameters. No parameter is missing on
// any rank, so the error lists each rank's layout instead of naming one parameter.
#include <string>

#include "zero/lesson_util.h"
#include "zero/window_check.h"

using namespace zt;

// Rank 0 reduced 'a' then 'b', rank 1 'b' then 'a', one bucket each: the layouts' hashes
// differ, and the error on every rank shows both orders, bucket marks included.
TEST(WindowCheck, TheSameParametersInDifferentOrdersListEachRanksLayout) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    const std::string layout = comm.rank() == 0 ? "a.weight\nb.weight\n|\n"  // rank 0's order
                                                : "b.weight\na.weight\n|\n";
    const zero::WindowFlags any = zero::agree_on_window(layout, 7, false, {}, comm);
    EXPECT_FALSE(any.layouts_agree);
    EXPECT_TRUE(any.fetches_agree);
    EXPECT_TRUE(any.buffer_writes_agree);
    EXPECT_FALSE(any.replicas_written);
    const std::string why =
        test::error_of([&] { zero::fail_layouts_differ(layout, "Heads", comm); });
    EXPECT_NE(why.find("zero::Engine::step: the ranks reduced different gradients of this "
                       "engine's Heads in this window: the same parameters, in different "
                       "orders or buckets (rank 0: a.weight b.weight |; rank 1: b.weight "
                       "a.weight |). Every rank must backpropagate through the same "
                       "parameters at each step"),
              std::string::npos)
        << why;
    EXPECT_NE(why.find("This window's gradients were discarded; nothing was updated"),
              std::string::npos)
        << why;
    EXPECT_EQ(why.find("got a gradient on ranks"), std::string::npos) << why;
  });
}

// A layout longer than 200 characters is cut, with " ..." after the cut, so the error stays
// readable for a model with many parameters.
TEST(WindowCheck, ALongLayoutIsCutAt200Characters) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    std::string layout;
    for (int i = 0; i < 30; ++i) layout += "layer" + std::to_string(i) + ".weight\n";
    if (comm.rank() == 1) layout += "|\n";  // one more bucket mark: same parameters
    const std::string why =
        test::error_of([&] { zero::fail_layouts_differ(layout, "Deep", comm); });
    std::string first;  // rank 0's layout on one line, cut
    for (int i = 0; i < 30; ++i) first += "layer" + std::to_string(i) + ".weight ";
    first = first.substr(0, 200) + " ...";
    EXPECT_NE(why.find("(rank 0: " + first + "; rank 1: "), std::string::npos) << why;
  });
}
