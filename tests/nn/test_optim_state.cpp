// Optimizer state loads: a load that fails, out of memory for the new state included,
// leaves the optimizer as it was, and one into an optimizer that has state continues as a
// fresh optimizer loaded with the same state would.
#include <memory>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "core/allocator.h"
#include "optim/optim.h"

using namespace zt;

namespace {

// Two parameters of 1024 elements (4 KiB each in f32).
optim::NamedTensors two_params() {
  optim::NamedTensors ps;
  for (const char* name : {"a", "b"}) {
    Tensor p = full({1024}, 0.5, DType::f32);
    p.set_requires_grad(true);
    ps.emplace_back(name, p);
  }
  return ps;
}

// Three Adam steps over `ps` with gradients 0.1, 0.2, 0.3; the state, cloned.
optim::NamedTensors trained_state(const optim::NamedTensors& ps) {
  optim::Adam adam(ps, optim::AdamOptions(0.01));
  for (int s = 1; s <= 3; ++s) {
    for (const auto& [n, p] : ps) p.set_grad(full({1024}, 0.1 * s, DType::f32));
    adam.step();
  }
  optim::NamedTensors out;
  for (const auto& [k, t] : adam.state_dict()) out.emplace_back(k, t.clone());
  return out;
}

}  // namespace

// The moments of a fresh optimizer are allocated by the load: when memory runs out after
// the first parameter's, nothing is loaded (before, parameter a's state and the step count
// were, and a step then updated b as at step 3 from zero moments).
TEST(OptimizerState, ALoadOutOfMemoryLeavesTheOptimizerAsItWas) {
  const optim::NamedTensors saved = trained_state(two_params());
  const optim::NamedTensors ps = two_params();
  optim::Adam adam(ps, optim::AdamOptions(0.01));
  {
    auto ledger = std::make_shared<MemoryLedger>("rank 0");
    LedgerScope scope(ledger);
    ledger->set_limit(Device::cpu(), 3 * 4096);  // three of the four moments
    EXPECT_TRUE(test::throws_with([&] { adam.load_state_dict(saved); }, "out of memory"));
  }
  EXPECT_EQ(adam.step_count(), 0);
  EXPECT_EQ(adam.state_dict().size(), 1u) << "only the step count 0: no parameter has state";
  EXPECT_TRUE(adam.consistent());
  // With the memory it needs, the same load takes.
  adam.load_state_dict(saved);
  EXPECT_EQ(adam.step_count(), 3);
  EXPECT_EQ(adam.state_dict().size(), 7u);
}

// A load into an optimizer with state writes its state tensors: the next steps are those
// of a fresh optimizer loaded with the same state, and the optimizer's own state loads
// into itself unchanged.
TEST(OptimizerState, ALoadOverStateEqualsALoadIntoAFreshOptimizer) {
  const optim::NamedTensors saved = trained_state(two_params());
  const optim::NamedTensors ps = two_params(), qs = two_params();
  optim::Adam used(ps, optim::AdamOptions(0.01)), fresh(qs, optim::AdamOptions(0.01));
  for (const auto& [n, p] : ps) p.set_grad(full({1024}, -1.0, DType::f32));
  used.step();
  used.load_state_dict(saved);
  used.load_state_dict(used.state_dict());
  fresh.load_state_dict(saved);
  for (size_t i = 0; i < ps.size(); ++i) ps[i].second.detach().copy_(qs[i].second.detach());
  for (int s = 0; s < 2; ++s) {
    for (const auto& ts : {ps, qs})
      for (const auto& [n, p] : ts) p.set_grad(full({1024}, 0.05, DType::f32));
    used.step();
    fresh.step();
  }
  EXPECT_EQ(used.step_count(), 5);
  for (size_t i = 0; i < ps.size(); ++i)
    EXPECT_EQ(ps[i].second.to_vector(), qs[i].second.to_vector()) << ps[i].first;
}

// Another optimizer type's state is named as such (it said only "unexpected keys ... was the
// state saved for the same parameters?"), and a key given twice is refused (the last one
// was taken); either way the optimizer is left as it was.
TEST(OptimizerState, AnotherOptimizersStateAndKeysGivenTwiceAreNamed) {
  const optim::NamedTensors ps = two_params();
  optim::SGD sgd(ps, optim::SGDOptions(0.1).momentum(0.9));
  for (const auto& [n, p] : ps) p.set_grad(full({1024}, 0.1, DType::f32));
  sgd.step();
  optim::Adam adam(two_params(), optim::AdamOptions(0.01));
  EXPECT_TRUE(test::throws_with([&] { adam.load_state_dict(sgd.state_dict()); },
                                "Adam load_state_dict failed:"));
  EXPECT_TRUE(test::throws_with([&] { adam.load_state_dict(sgd.state_dict()); },
                                "the state of another optimizer? it holds momentum_buffer per "
                                "parameter, where this Adam keeps exp_avg, exp_avg_sq"));
  EXPECT_EQ(adam.state_dict().size(), 1u);

  optim::NamedTensors twice = sgd.state_dict();
  twice.emplace_back("a.step", scalar_tensor(7, DType::i64));
  EXPECT_TRUE(test::throws_with([&] { sgd.load_state_dict(twice); },
                                "SGD load_state_dict failed:\n  keys given more than once (1): "
                                "a.step"));
  EXPECT_EQ(sgd.state_dict()[1].first, "a.step");
  EXPECT_EQ(sgd.state_dict()[1].second.item(), 1.0);
}

// A state saved over f32 parameters loads into f64 ones, converted (as PyTorch casts a
// loaded state), but moments in integers are refused by name: they were truncated to
// whole numbers without a word.
TEST(OptimizerState, SlotsConvertToTheParametersDtypeButMustBeFloating) {
  const optim::NamedTensors saved = trained_state(two_params());
  optim::NamedTensors ps;
  for (const auto& [n, p] : two_params()) {
    Tensor q = p.detach().to(DType::f64);
    q.set_requires_grad(true);
    ps.emplace_back(n, q);
  }
  optim::Adam adam(ps, optim::AdamOptions(0.01));
  adam.load_state_dict(saved);
  EXPECT_EQ(adam.state_dict()[2].first, "a.exp_avg");
  EXPECT_EQ(adam.state_dict()[2].second.dtype(), DType::f64);
  EXPECT_EQ(adam.state_dict()[2].second.to_vector(), saved[2].second.to_vector());

  optim::NamedTensors ints = saved;
  ints[2].second = ints[2].second.to(DType::i64);
  optim::Adam fresh(two_params(), optim::AdamOptions(0.01));
  EXPECT_TRUE(test::throws_with([&] { fresh.load_state_dict(ints); },
                                "a.exp_avg (i64, expected a floating tensor)"));
  EXPECT_EQ(fresh.step_count(), 0);
}

// A load after the parameters changed dtype (a module's to(), which converts them in place)
// converts the state the optimizer already held as it converts a new one: it had kept its
// f32 moments for the f64 parameters, and the next step failed on the mixed dtypes.
TEST(OptimizerState, ALoadAfterTheParametersChangedDtypeConvertsTheHeldState) {
  const optim::NamedTensors saved = trained_state(two_params());
  const optim::NamedTensors ps = two_params();
  optim::Adam adam(ps, optim::AdamOptions(0.01));
  for (const auto& [n, p] : ps) p.set_grad(full({1024}, -1.0, DType::f32));
  adam.step();
  for (const auto& [n, p] : ps) {
    p.set_grad(Tensor());
    p.set_data(p.to(DType::f64));
  }
  adam.load_state_dict(saved);
  EXPECT_EQ(adam.state_dict()[2].first, "a.exp_avg");
  EXPECT_EQ(adam.state_dict()[2].second.dtype(), DType::f64);
  EXPECT_EQ(adam.state_dict()[2].second.to_vector(), saved[2].second.to_vector());

  optim::NamedTensors qs;
  for (const auto& [n, p] : ps) {
    Tensor q = p.detach().clone();
    q.set_requires_grad(true);
    qs.emplace_back(n, q);
  }
  optim::Adam fresh(qs, optim::AdamOptions(0.01));
  fresh.load_state_dict(saved);
  for (const auto& ts : {ps, qs})
    for (const auto& [n, p] : ts) p.set_grad(full({1024}, 0.05, DType::f64));
  adam.step();
  fresh.step();
  for (size_t i = 0; i < ps.size(); ++i)
    EXPECT_EQ(ps[i].second.to_vector(), qs[i].second.to_vector()) << ps[i].first;
}

// A step that runs out of memory for the state it makes is taken back whole, whatever
// the parameters' step counts: SGD's momentum buffer made for a parameter that had taken
// steps without one (a state saved at momentum 0) was kept, zero, so the step taken again
// started from it (buf = 0.9 * 0 + 0.5 g) rather than from the gradient (buf = g).
TEST(OptimizerState, AStepOutOfMemoryForItsStateTakesBackEveryNewSlot) {
  const optim::NamedTensors old = two_params();
  optim::SGD plain(old, optim::SGDOptions(0.1));
  for (const auto& [n, p] : old) p.set_grad(full({1024}, 0.1, DType::f32));
  plain.step();
  const optim::NamedTensors saved = plain.state_dict();

  const auto options = optim::SGDOptions(0.1).momentum(0.9).dampening(0.5);
  const optim::NamedTensors ps = two_params(), qs = two_params();
  optim::SGD failed(ps, options), fresh(qs, options);
  failed.load_state_dict(saved);
  fresh.load_state_dict(saved);
  for (const auto& ts : {ps, qs})
    for (const auto& [n, p] : ts) p.set_grad(full({1024}, 0.2, DType::f32));
  {
    auto ledger = std::make_shared<MemoryLedger>("rank 0");
    LedgerScope scope(ledger);
    ledger->set_limit(Device::cpu(), 4096);  // a's momentum buffer, not b's
    EXPECT_TRUE(test::throws_with([&] { failed.step(); }, "out of memory"));
  }
  EXPECT_EQ(failed.state_dict().size(), saved.size()) << "no momentum buffer was kept";
  failed.step();
  fresh.step();
  for (size_t i = 0; i < ps.size(); ++i)
    EXPECT_EQ(ps[i].second.to_vector(), qs[i].second.to_vector()) << ps[i].first;
}
