// zero::load_state_dict's verdict on a dict that does not fit the model. Keys the model has
// and the dict lacks (strict), like keys it does not have and wrong shapes, say the dict is
// of another model and what to do; an undefined entry or one of the wrong kind of dtype is
// the dict's own damage, and says only that. With strict=false the missing keys are left as
// they were and the rest is loaded on every rank.
#include <string>
#include <utility>
#include <vector>

#include "zero/lesson_util.h"

using namespace zt;
using lesson::Pair;

namespace {

const char* const kOtherModel =
    ". The state dict is of another model: build the model as it was when it was saved (for "
    "the apps, the config the weights were trained with)";

// Pair's state dict with every value 0.5 and b.bias left out.
std::vector<std::pair<std::string, Tensor>> without_b_bias() {
  Pair whole;
  std::vector<std::pair<std::string, Tensor>> state;
  for (const auto& [name, t] : nn::state_dict(whole))
    if (name != "b.bias") state.emplace_back(name, full(t.sizes(), 0.5));
  return state;
}

}  // namespace

TEST(LoadStateDictErrors, OnlyMissingKeysSayTheDictIsOfAnotherModel) {
  const auto state = without_b_bias();
  comm::run_threads(2, [&](comm::Communicator& comm) {
    auto m = lesson::partitioned<Pair>(comm);
    const auto before = lesson::full_parameters(*m, comm);
    auto before_of = [&](const std::string& name) {
      for (const auto& [n, t] : before)
        if (n == name) return t;
      return Tensor();
    };
    const std::string why = test::error_of(
        [&] { zero::load_state_dict(*m, comm.rank() == 0 ? state : decltype(state){}, comm); });
    EXPECT_NE(why.find(std::string("load_state_dict (rank 0's state dict): missing keys: b.bias") +
                       kOtherModel + "; or pass strict = false to load the part it holds"),
              std::string::npos)
        << why;
    EXPECT_EQ(why.find("unexpected keys"), std::string::npos) << why;
    const auto after = lesson::full_parameters(*m, comm);
    for (size_t i = 0; i < after.size(); ++i)
      EXPECT_TRUE(test::all_close(after[i].second, before[i].second, 0, 0))
          << after[i].first << ": a refused dict loads nothing";

    zero::load_state_dict(*m, comm.rank() == 0 ? state : decltype(state){}, comm,
                          /*strict=*/false);
    for (const auto& [name, t] : lesson::full_parameters(*m, comm)) {
      const Tensor want = name == "b.bias" ? before_of("b.bias") : full(t.sizes(), 0.5);
      EXPECT_TRUE(test::all_close(t, want, 0, 0)) << name;
    }
  });
}

TEST(LoadStateDictErrors, TheDictsOwnDamageDoesNotBlameTheModel) {
  Pair whole;
  std::vector<std::pair<std::string, Tensor>> undefined, ints;
  for (const auto& [name, t] : nn::state_dict(whole)) {
    undefined.emplace_back(name, name == "a.bias" ? Tensor() : t.clone());
    ints.emplace_back(name, name == "a.bias" ? t.to(DType::i32) : t.clone());
  }
  comm::run_threads(2, [&](comm::Communicator& comm) {
    auto m = lesson::partitioned<Pair>(comm);
    for (const auto* dict : {&undefined, &ints}) {
      const std::string why = test::error_of([&] {
        zero::load_state_dict(*m, comm.rank() == 0 ? *dict : decltype(undefined){}, comm);
      });
      EXPECT_NE(why.find(dict == &undefined
                             ? "load_state_dict (rank 0's state dict): undefined tensors: a.bias"
                             : "load_state_dict (rank 0's state dict): wrong kinds of dtype: "
                               "a.bias (checkpoint i32, model f32)"),
                std::string::npos)
          << why;
      EXPECT_EQ(why.find("another model"), std::string::npos) << why;
    }
  });
}
