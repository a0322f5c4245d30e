// Module mechanics: registration and dotted names, traversal order, modes, conversion,
// hooks through the single call() entry point, containers, printing, and seeded init.
#include <algorithm>
#include <cmath>

#include "common/test_util.h"
#include "core/allocator.h"
#include "nn/nn.h"

using namespace zt;
using zt::test::values_are;

namespace {

// A two-level model: Block(fc, bn) inside Net(block, head).
struct Block : nn::UnaryModule {
  Block() : nn::UnaryModule("Block") {
    fc = register_module("fc", std::make_shared<nn::Linear>(3, 4));
    scale = register_parameter("scale", ones({4}));
    register_buffer("count", zeros({1}));
    register_buffer("scratch", zeros({2}), /*persistent=*/false);
  }
  Tensor forward(const Tensor& x) override { return mul((*fc)(x), scale); }
  std::shared_ptr<nn::Linear> fc;
  Tensor scale;
};

struct Net : nn::UnaryModule {
  Net() : nn::UnaryModule("Net") {
    block = register_module("block", std::make_shared<Block>());
    head =
        register_module("head", std::make_shared<nn::Linear>(nn::LinearOptions(4, 2).bias(false)));
  }
  Tensor forward(const Tensor& x) override { return (*head)((*block)(x)); }
  std::shared_ptr<Block> block;
  std::shared_ptr<nn::Linear> head;
};

std::vector<std::string> names(const std::vector<std::pair<std::string, Tensor>>& v) {
  std::vector<std::string> out;
  for (auto& [n, t] : v) out.push_back(n);
  return out;
}

}  // namespace

TEST(Module, DottedNamesInRegistrationOrder) {
  auto net = std::make_shared<Net>();
  EXPECT_EQ(
      names(net->named_parameters()),
      (std::vector<std::string>{"block.scale", "block.fc.weight", "block.fc.bias", "head.weight"}));
  EXPECT_EQ(names(net->named_parameters(/*recurse=*/false)), std::vector<std::string>{});
  EXPECT_EQ(names(net->named_buffers()),
            (std::vector<std::string>{"block.count", "block.scratch"}));
  std::vector<std::string> mods;
  for (auto& [n, m] : net->named_modules()) mods.push_back(n);
  EXPECT_EQ(mods, (std::vector<std::string>{"", "block", "block.fc", "head"}));
  EXPECT_EQ(net->named_children().size(), 2u);
  EXPECT_EQ(net->find("block.fc").get(), net->block->fc.get());
  EXPECT_EQ(net->num_parameters(), 4 + 12 + 4 + 8);
  // state_dict: PyTorch order (own params, own persistent buffers, children), no scratch.
  EXPECT_EQ(names(nn::state_dict(*net)),
            (std::vector<std::string>{"block.scale", "block.count", "block.fc.weight",
                                      "block.fc.bias", "head.weight"}));
}

// A tensor registered in two modules (tied weights, as a language model ties its output
// head to its token table) is one parameter: listed once, under its first name, so an
// optimizer built from the list steps it once; state_dict() keeps both names.
TEST(Module, TiedWeightsAreListedOnce) {
  nn::Sequential m;
  auto a = std::make_shared<nn::Linear>(nn::LinearOptions(3, 3).bias(false));
  auto b = std::make_shared<nn::Linear>(nn::LinearOptions(3, 3).bias(false));
  m.push_back(a);
  m.push_back(b);
  b->weight = a->weight;
  b->replace_tensor("weight", a->weight);
  EXPECT_TRUE(test::throws_with(
      [&] {
        b->replace_tensor("weight", ones({5, 5}));
      },
      "Linear: replace_tensor('weight'): the replacement is "));
  EXPECT_EQ(names(m.named_parameters()), (std::vector<std::string>{"0.weight"}));
  EXPECT_EQ(m.num_parameters(), 9);
  EXPECT_EQ(nn::state_dict(m).size(), 2u);
  EXPECT_EQ(names(nn::unique_state_dict(m)), (std::vector<std::string>{"0.weight"}));

  // A strict load takes a dict that kept either name; two that disagree are refused.
  const Tensor w = full({3, 3}, 2.0);
  nn::load_state_dict(m, nn::NamedTensors{{"1.weight", w}});
  EXPECT_CLOSE(a->weight, w, 0.0, 0.0);
  nn::load_state_dict(m, nn::NamedTensors{{"0.weight", w}, {"1.weight", w}});
  EXPECT_TRUE(test::throws_with(
      [&] {
        nn::load_state_dict(m, nn::NamedTensors{{"0.weight", w}, {"1.weight", mul(w, 2.0)}});
      },
      "0.weight and 1.weight hold different values for one tied tensor"));
  EXPECT_TRUE(test::throws_with(
      [&] {
        nn::load_state_dict(m, nn::NamedTensors{{"0.weight", w}, {"1.weight", ones({3, 2})}});
      },
      "1.weight [3, 2] but 0.weight [3, 3] (one tied tensor)"));
  // Either name may hold the value while the other is undefined; both undefined is refused.
  const Tensor w3 = full({3, 3}, 3.0);
  nn::load_state_dict(m, nn::NamedTensors{{"0.weight", Tensor()}, {"1.weight", w3}});
  EXPECT_CLOSE(a->weight, w3, 0.0, 0.0);
  nn::load_state_dict(m, nn::NamedTensors{{"0.weight", w}, {"1.weight", Tensor()}});
  EXPECT_CLOSE(a->weight, w, 0.0, 0.0);
  EXPECT_TRUE(test::throws_with(
      [&] {
        nn::load_state_dict(m, nn::NamedTensors{{"0.weight", Tensor()}, {"1.weight", Tensor()}});
      },
      "0.weight"));
  // A model's own state dict loads back, NaNs and all (NaN != NaN as a number).
  {
    autograd::NoGradGuard ng;
    a->weight.fill_(std::nan(""));
  }
  nn::load_state_dict(m, nn::state_dict(m));
  const auto nan = full({3, 3}, std::nan(""));
  nn::load_state_dict(m, nn::NamedTensors{{"0.weight", nan}, {"1.weight", nan.clone()}});
  // A dict that holds the tensor under its second name only is refused under that name,
  // the one its file shows, beside the model's first.
  EXPECT_TRUE(test::throws_with(
      [&] {
        nn::load_state_dict(m, nn::NamedTensors{{"1.weight", ones({3, 2})}});
      },
      "shape mismatches: 1.weight (tied to 0.weight; checkpoint [3, 2], model [3, 3])"));
  EXPECT_TRUE(test::throws_with(
      [&] {
        nn::load_state_dict(m, nn::NamedTensors{{"1.weight", ones({3, 3}, DType::i64)}});
      },
      "wrong kinds of dtype: 1.weight (tied to 0.weight; checkpoint i64, model f32)"));
}

// A module registered twice (one block applied at two places) is one module: listed once,
// under its first path, unless asked for every path; its weights once, its state under both.
TEST(Module, ASharedModuleIsListedOnce) {
  auto seq = std::make_shared<nn::Sequential>();
  nn::Sequential& m = *seq;
  auto block = std::make_shared<nn::Linear>(3, 3);
  m.push_back(block);
  m.push_back(std::make_shared<nn::Tanh>());
  m.push_back(block);
  std::vector<std::string> paths, all;
  for (const auto& [p, mod] : m.named_modules()) paths.push_back(p);
  for (const auto& [p, mod] : m.named_modules("", false)) all.push_back(p);
  EXPECT_EQ(paths, (std::vector<std::string>{"", "0", "1"}));
  EXPECT_EQ(all, (std::vector<std::string>{"", "0", "1", "2"}));
  EXPECT_EQ(names(m.named_parameters()), (std::vector<std::string>{"0.weight", "0.bias"}));
  EXPECT_EQ(nn::state_dict(m).size(), 4u);
}

TEST(Module, DuplicateAndBadNamesAreErrors) {
  Block b;
  EXPECT_THROW(b.register_parameter("scale", ones({1})), Error);
  EXPECT_THROW(b.register_buffer("fc", ones({1})), Error);
  EXPECT_THROW(b.register_parameter("a.b", ones({1})), Error);
}

// Misuse that would crash a traversal or hand back something surprising is named.
TEST(Module, CyclesStackOwnedRootsAndEmptyPathsAreNamed) {
  auto outer = std::make_shared<nn::Sequential>(), inner = std::make_shared<nn::Sequential>();
  outer->push_back(inner);
  EXPECT_TRUE(test::throws_with([&] { inner->push_back(outer); }, "would make a cycle"));
  EXPECT_TRUE(test::throws_with([&] { outer->push_back(outer); }, "would make a cycle"));
  EXPECT_EQ(outer->named_parameters().size(), 0u);  // still a tree, and traversable
  nn::Linear on_stack(2, 2);
  EXPECT_TRUE(test::throws_with([&] { on_stack.named_modules(); }, "std::shared_ptr"));
  EXPECT_EQ(outer->find("0"), inner);
  EXPECT_EQ(outer->find("0."), nullptr);
  EXPECT_EQ(outer->find(".0"), nullptr);
}

TEST(Module, APlaceholderBufferTakesAnyTensorAndIntegersNeverRequireGrad) {
  struct Cache : nn::UnaryModule {
    Cache() : nn::UnaryModule("Cache") {
      register_buffer("cache", Tensor());
      register_parameter("ids", zeros({2}, DType::i64), /*requires_grad=*/false);
      register_parameter("w", ones({2}));
    }
    Tensor forward(const Tensor& x) override { return x; }
  } m;
  m.replace_tensor("cache", ones({3}));
  EXPECT_EQ(m.named_buffers().size(), 1u);
  EXPECT_TRUE(test::throws_with([&] { m.replace_tensor("cache", ones({4})); },
                                "a tie or a load keeps shape"));
  EXPECT_TRUE(
      test::throws_with([&] { m.requires_grad_(true); }, "only floating tensors can require grad"));
  m.requires_grad_(false);
  for (const auto& [n, p] : m.named_parameters()) EXPECT_FALSE(p.requires_grad()) << n;
}

TEST(Module, TrainEvalToAndZeroGrad) {
  auto net = std::make_shared<Net>();
  net->eval();
  EXPECT_FALSE(net->block->fc->is_training());
  net->train();
  EXPECT_TRUE(net->head->is_training());

  Tensor w = net->head->weight;
  net->to(DType::f64);
  EXPECT_EQ(w.dtype(), DType::f64);  // same handle, converted in place
  EXPECT_TRUE(w.same(net->head->weight));
  net->to(Device::cpu(), DType::f32);
  EXPECT_EQ(w.dtype(), DType::f32);

  Tensor y = (*net)(ones({5, 3}));
  sum(y).backward();
  EXPECT_TRUE(w.grad().defined());
  const std::vector<double> g = w.grad().to_vector();
  net->to(DType::f64);  // the gradient moves with its parameter, as in PyTorch
  EXPECT_EQ(w.grad().dtype(), DType::f64);
  EXPECT_EQ(w.grad().to_vector(), g);
  net->to(DType::f32);
  net->zero_grad();
  EXPECT_FALSE(w.grad().defined());

  // An integer or bool dtype is refused, as PyTorch's Module.to refuses it: it would round
  // every weight to a whole number, and nothing is converted.
  const std::vector<double> before = w.to_vector();
  for (DType bad : {DType::i32, DType::i64, DType::b8}) {
    EXPECT_TRUE(test::throws_with([&] { net->to(bad); }, "only to a floating dtype"));
    EXPECT_TRUE(
        test::throws_with([&] { net->to(Device::cpu(), bad); }, "only to a floating dtype"));
  }
  EXPECT_EQ(w.dtype(), DType::f32);
  EXPECT_EQ(w.to_vector(), before);
}

TEST(Module, HooksCanReplaceInputsAndOutputs) {
  nn::Linear lin(nn::LinearOptions(2, 2).bias(false));
  lin.weight.detach().copy_(from_vector({1, 0, 0, 1}, {2, 2}));
  int pre_calls = 0;
  int pre = lin.add_forward_pre_hook([&](nn::Module&, std::vector<Tensor>& in) {
    ++pre_calls;
    in[0] = mul(in[0], 2.0);
  });
  int post = lin.add_forward_hook([](nn::Module&, const std::vector<Tensor>&,
                                     std::vector<Tensor>& out) { out[0] = add(out[0], 1.0); });
  EXPECT_TRUE(values_are(lin(from_vector({1, 2}, {1, 2})), {3, 5}));
  EXPECT_EQ(pre_calls, 1);
  EXPECT_EQ(lin.hook_count(), 2u);
  lin.remove_hook(pre);
  lin.remove_hook(post);
  EXPECT_EQ(lin.hook_count(), 0u);
  EXPECT_TRUE(values_are(lin(from_vector({1, 2}, {1, 2})), {1, 2}));
}

TEST(Module, OuterHooksRunAroundTheOthersWhenEverRegistered) {
  // What the ZeRO engine's gather and release hooks rely on: a module's other hooks run
  // between them, registered before the engine was built or after; a forward that fails
  // runs the outer error hooks last too.
  nn::Linear lin(2, 2);
  std::vector<std::string> ran;
  auto pre = [&](std::string name) {
    return [&ran, name](nn::Module&, std::vector<Tensor>&) { ran.push_back(name); };
  };
  auto post = [&](std::string name) {
    return [&ran, name](nn::Module&, const std::vector<Tensor>&, std::vector<Tensor>&) {
      ran.push_back(name);
    };
  };
  auto error = [&](std::string name) { return [&ran, name](nn::Module&) { ran.push_back(name); }; };
  lin.add_forward_pre_hook(pre("pre1"));
  lin.add_forward_hook(post("post1"));
  lin.add_forward_error_hook(error("error1"));
  lin.add_forward_pre_hook(pre("outer_pre1"), /*outer=*/true);
  lin.add_forward_hook(post("outer_post1"), /*outer=*/true);
  lin.add_forward_error_hook(error("outer_error1"), /*outer=*/true);
  lin.add_forward_pre_hook(pre("outer_pre2"), /*outer=*/true);
  lin.add_forward_hook(post("outer_post2"), /*outer=*/true);
  lin.add_forward_error_hook(error("outer_error2"), /*outer=*/true);
  lin.add_forward_pre_hook(pre("pre2"));
  lin.add_forward_hook(post("post2"));
  const int failing = lin.add_forward_error_hook(error("error2"));
  lin(ones({1, 2}));
  EXPECT_EQ(ran, (std::vector<std::string>{"outer_pre1", "outer_pre2", "pre1", "pre2", "post1",
                                           "post2", "outer_post1", "outer_post2"}));
  ran.clear();
  EXPECT_THROW(lin(ones({1, 3})), Error);
  EXPECT_EQ(ran, (std::vector<std::string>{"outer_pre1", "outer_pre2", "pre1", "pre2", "error1",
                                           "error2", "outer_error1", "outer_error2"}));
  lin.remove_hook(failing);
  EXPECT_EQ(lin.hook_count(), 11u);
}

TEST(Module, AHookMayRemoveItselfOrAddHooksWhileTheModuleRuns) {
  // The pre-forward hooks registered when a call begins run for it, as in PyTorch: a
  // one-shot hook removes itself and the next hook still runs; a pre-forward hook added
  // by one runs from the next call on.
  nn::Linear lin(2, 2);
  std::vector<std::string> ran;
  const std::string tag(100, 'x');  // a capture the function must keep while it runs
  int once = -1;
  once = lin.add_forward_pre_hook([&, tag](nn::Module&, std::vector<Tensor>&) {
    lin.remove_hook(once);
    ran.push_back("once:" + std::to_string(tag.size()));
    for (int i = 0; i < 8; ++i)  // enough to move the list's storage
      lin.add_forward_pre_hook([&](nn::Module&, std::vector<Tensor>&) { ran.push_back("added"); });
  });
  lin.add_forward_pre_hook([&](nn::Module&, std::vector<Tensor>&) { ran.push_back("next"); });
  lin(ones({1, 2}));
  EXPECT_EQ(ran, (std::vector<std::string>{"once:100", "next"}));
  ran.clear();
  lin(ones({1, 2}));
  EXPECT_EQ(ran.size(), 9u);
  EXPECT_EQ(ran.front(), "next");
  EXPECT_EQ(std::count(ran.begin(), ran.end(), "added"), 8);
}

TEST(Module, SequentialCallsChildrenThroughTheirEntryPoint) {
  manual_seed(0);
  auto seq = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(3, 4), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(4, 1)});
  int seen = 0;
  for (auto& [n, m] : seq->named_modules())
    if (!n.empty()) m->add_forward_pre_hook([&](nn::Module&, std::vector<Tensor>&) { ++seen; });
  Tensor y = (*seq)(ones({2, 3}));
  EXPECT_EQ(y.sizes(), (Shape{2, 1}));
  EXPECT_EQ(seen, 3);
  EXPECT_EQ(names(seq->named_parameters()),
            (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  EXPECT_NE(seq->at<nn::Linear>(2), nullptr);
  EXPECT_THROW(seq->at<nn::Linear>(1), Error);
}

// The message an error raised by `f` carries ("" when none is raised).
template <typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Module, ErrorsNameTheModuleThatWasRunning) {
  auto net = std::make_shared<Net>();
  const std::string wrong_width = error_of([&] { (*net)(ones({2, 5})); });
  EXPECT_NE(wrong_width.find("\n  in module block.fc (Linear) of Net"), std::string::npos)
      << wrong_width;
  // Called directly, a child is the outermost module; once the calls have returned (by
  // the error), nothing is running.
  EXPECT_NE(error_of([&] {
              (*net->head)(ones({2, 3}));
            }).find("\n  in module Linear"),
            std::string::npos);
  const std::string outside = error_of([] { matmul(ones({2, 3}), ones({2, 3})); });
  EXPECT_FALSE(outside.empty());
  EXPECT_EQ(outside.find("in module"), std::string::npos) << outside;

  // A module called without being registered under its caller is named by its type.
  struct Adhoc : nn::UnaryModule {
    Adhoc() : nn::UnaryModule("Adhoc") {}
    Tensor forward(const Tensor& x) override { return nn::Linear(4, 2)(x); }
  };
  nn::Sequential seq({std::make_shared<Adhoc>()});
  const std::string adhoc = error_of([&] { seq(ones({1, 3})); });
  EXPECT_NE(adhoc.find("in module 0.<Linear> (Linear) of Sequential"), std::string::npos) << adhoc;

  // An out-of-memory error names the module too (its first allocation is block.fc's).
  const Tensor x = ones({2, 3});
  auto ledger = std::make_shared<MemoryLedger>("rank 0");
  LedgerScope scope(ledger);
  ledger->set_limit(Device::cpu(), 8);
  const std::string oom = error_of([&] { (*net)(x); });
  EXPECT_NE(oom.find("out of memory"), std::string::npos) << oom;
  EXPECT_NE(oom.find("\n  in module block.fc (Linear) of Net"), std::string::npos) << oom;
}

TEST(Module, ModuleListAndDict) {
  auto list = std::make_shared<nn::ModuleList>();
  list->push_back(std::make_shared<nn::Linear>(2, 2));
  list->push_back(std::make_shared<nn::Linear>(2, 3));
  EXPECT_EQ(list->size(), 2u);
  EXPECT_EQ(list->at<nn::Linear>(1)->options.out_features(), 3);
  EXPECT_THROW((*list)(ones({1, 2})), Error);
  EXPECT_EQ(names(list->named_parameters())[2], "1.weight");
  // Sequential and ModuleList share indexing; errors name the container.
  EXPECT_TRUE(test::throws_with([&] { (*list)[2]; }, "ModuleList: index 2 out of range (size 2)"));
  EXPECT_TRUE(test::throws_with([&] { list->at<nn::SiLU>(0); }, "ModuleList: child 0 is a Linear"));
  nn::Sequential seq({std::make_shared<nn::SiLU>()});
  EXPECT_TRUE(test::throws_with([&] { seq[1]; }, "Sequential: index 1 out of range (size 1)"));
  EXPECT_EQ(seq.at<nn::SiLU>(0).get(), seq[0].get());

  auto dict = std::make_shared<nn::ModuleDict>();
  dict->insert("enc", std::make_shared<nn::Linear>(2, 2));
  dict->insert("act", std::make_shared<nn::SiLU>());
  EXPECT_TRUE(dict->contains("enc"));
  EXPECT_EQ(dict->keys(), (std::vector<std::string>{"enc", "act"}));
  EXPECT_THROW((*dict)["nope"], Error);
  EXPECT_EQ(names(dict->named_parameters())[0], "enc.weight");
}

TEST(Module, PrettyPrintShowsShapesAndCounts) {
  auto net = std::make_shared<Net>();
  std::string s = net->pretty_print();
  EXPECT_NE(s.find("Net  [28 params]"), std::string::npos) << s;
  EXPECT_NE(s.find("(fc): Linear(in_features=3, out_features=4, bias=true)"), std::string::npos)
      << s;
  EXPECT_NE(s.find("weight: [4, 3]"), std::string::npos) << s;
  EXPECT_NE(s.find("count (buffer): [1]"), std::string::npos) << s;
}

TEST(Init, SameSeedSameModel) {
  manual_seed(42);
  Net a;
  manual_seed(42);
  Net b;
  auto pa = a.named_parameters(), pb = b.named_parameters();
  for (size_t i = 0; i < pa.size(); ++i)
    EXPECT_EQ(pa[i].second.to_vector(), pb[i].second.to_vector());
  Net c;  // the generator moved on: different values
  EXPECT_NE(c.head->weight.to_vector(), a.head->weight.to_vector());
}

TEST(Init, DefaultBoundsFollowPyTorch) {
  manual_seed(1);
  nn::Conv2d conv(nn::Conv2dOptions(4, 8, 3));
  const double bound = 1.0 / std::sqrt(4.0 * 9.0);  // kaiming_uniform(a=sqrt(5)) == 1/sqrt(fan_in)
  for (double v : conv.weight.to_vector()) EXPECT_LE(std::abs(v), bound);
  for (double v : conv.bias.to_vector()) EXPECT_LE(std::abs(v), bound);
  // The spread uses the whole range (not a smaller constant).
  EXPECT_GT(max(abs(conv.weight)).item(), 0.8 * bound);

  Tensor w = empty({64, 32});
  nn::init::kaiming_normal_(w, 0.0, "fan_out", "relu");
  double sd = std::sqrt(mean(mul(w, w)).item());
  EXPECT_NEAR(sd, std::sqrt(2.0 / 64.0), 0.01);
  nn::init::zeros_(w);
  EXPECT_EQ(sum(abs(w)).item(), 0.0);
  nn::init::ones_(w);
  EXPECT_EQ(sum(w).item(), 64.0 * 32.0);
  // Like the random ones, the constant initializers fill a parameter in grad mode.
  nn::Linear lin(3, 2);
  nn::init::constant_(lin.bias, 0.5);
  EXPECT_TRUE(values_are(lin.bias, {0.5, 0.5}));
  nn::init::zeros_(lin.weight);
  EXPECT_EQ(sum(abs(lin.weight)).item(), 0.0);
  EXPECT_NEAR(nn::init::calculate_gain("leaky_relu", std::sqrt(5.0)), std::sqrt(1.0 / 3.0), 1e-12);
  EXPECT_THROW(nn::init::calculate_gain("swoosh"), Error);
}

TEST(Init, XavierAndConstantFollowPyTorch) {
  manual_seed(2);
  // fan_in 32, fan_out 64: Xavier's bound sqrt(6 / 96) = 0.25, its std sqrt(2 / 96).
  Tensor w = empty({64, 32});
  nn::init::xavier_uniform_(w, 2.0);
  for (double v : w.to_vector()) EXPECT_LE(std::abs(v), 2.0 * 0.25);
  EXPECT_GT(max(abs(w)).item(), 0.9 * 2.0 * 0.25);
  nn::init::xavier_normal_(w);
  EXPECT_NEAR(std::sqrt(mean(mul(w, w)).item()), std::sqrt(2.0 / 96.0), 0.01);
  nn::init::constant_(w, 0.5);
  EXPECT_EQ(sum(w).item(), 0.5 * 64.0 * 32.0);
}

namespace {
double abs_sum(const Tensor& t) {
  double s = 0;
  for (double v : t.to_vector()) s += std::abs(v);
  return s;
}
struct Recorder : nn::RegistrationObserver {
  std::vector<std::pair<std::string, double>> seen;
  void on_parameter(nn::Module&, const std::string& name, const Tensor& p) override {
    seen.emplace_back(name, abs_sum(p));
  }
  void on_buffer(nn::Module&, const std::string& name, const Tensor& b) override {
    seen.emplace_back(name, abs_sum(b));
  }
};
}  // namespace

TEST(Init, ParametersAreInitializedBeforeRegistration) {
  Recorder r;
  nn::push_registration_observer(&r);
  nn::Linear lin(8, 8);
  nn::BatchNorm2d bn(nn::BatchNormOptions(3));
  nn::pop_registration_observer(&r);
  ASSERT_EQ(r.seen.size(), 2u + 5u);
  EXPECT_EQ(r.seen[0].first, "weight");
  EXPECT_GT(r.seen[0].second, 0.0);  // initialized values, not zeros
  EXPECT_GT(r.seen[1].second, 0.0);
  EXPECT_EQ(r.seen[2].first, "weight");
  EXPECT_EQ(r.seen[2].second, 3.0);  // BatchNorm weight = 1
  EXPECT_EQ(r.seen[5].first, "running_var");
  EXPECT_EQ(r.seen[5].second, 3.0);
}
