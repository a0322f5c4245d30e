// Lesson 24 — tied weights.
// Invariant: a tensor registered in two modules (a language model's token table and its
// output head, as GPT-2 ties them) is ONE partitioned parameter: one shard, one fp32
// master, one gradient shard, updated once per step. Each module that uses it gathers it
// when called (one group per module, the tied parameter a member of both), and a module's
// release leaves it gathered while another module that holds it still needs it (an
// enclosing one that is still computing, or one kept gathered for its backward). Autograd
// sums the gradients of both uses before the parameter's gradient is final; a use inside
// a checkpointed module arrives in a backward of its own, and the reducer adds it in.
// Training is that of plain single-process training; a checkpoint resumes it exactly; an
// export writes it under every name, and a state dict that kept only one of the names
// loads (two that disagree are refused).
//
// Run alone: ctest --test-dir build -R zero.Lesson24
#include <algorithm>
#include <type_traits>

#include "nn/safetensors.h"
#include "zero/checkpoint.h"
#include "zero/checkpoint_util.h"
#include "zero/lesson_util.h"
#include "zero/memory_plan.h"

using namespace zt;
using lesson::adamw;
using lesson::count_of;

namespace {

constexpr int64_t kVocab = 13, kWidth = 6, kBatch = 12, kSeq = 5;  // kBatch: 1..4 ranks
constexpr int kSteps = 4;

// ids (B, T) -> logits (B, T, V): wte -> tanh(mid) -> head, head.weight being wte.weight
// (the first name: wte is registered first). The head's initialization is kept, as
// gpt::Gpt keeps it.
class TinyLm : public nn::UnaryModule {
 public:
  TinyLm() : nn::UnaryModule("TinyLm") {
    wte = register_module("wte", std::make_shared<nn::Embedding>(kVocab, kWidth));
    mid = register_module("mid", std::make_shared<nn::Linear>(kWidth, kWidth));
    head = register_module(
        "head", std::make_shared<nn::Linear>(nn::LinearOptions(kWidth, kVocab).bias(false)));
    wte->weight = head->weight;
    wte->replace_tensor("weight", head->weight);
  }
  std::shared_ptr<nn::Embedding> wte;
  std::shared_ptr<nn::Linear> mid, head;

 protected:
  Tensor forward(const Tensor& ids) override { return (*head)(tanh((*mid)((*wte)(ids)))); }
};

// A module that owns a matrix and lends it to a child: Outer computes x W^T itself after
// its child Inner (which registered the same tensor) has returned. Inner's release must
// not take the matrix from under Outer.
class Inner : public nn::UnaryModule {
 public:
  explicit Inner(const Tensor& w) : nn::UnaryModule("Inner") {
    weight = register_parameter("weight", w);
  }
  Tensor weight;

 protected:
  Tensor forward(const Tensor& x) override { return tanh(linear(x, weight)); }
};

class Outer : public nn::UnaryModule {
 public:
  Outer() : nn::UnaryModule("Outer") {
    weight = register_parameter("weight", mul(randn({kWidth, kWidth}), 0.3));
    inner = register_module("inner", std::make_shared<Inner>(weight));
    out = register_module("out", std::make_shared<nn::Linear>(kWidth, kVocab));
  }
  Tensor weight;
  std::shared_ptr<Inner> inner;
  std::shared_ptr<nn::Linear> out;

 protected:
  Tensor forward(const Tensor& x) override {
    return (*out)(linear((*inner)(x), weight));  // weight used after inner released
  }
};

// Outer without a module of its own after the child: the lent matrix is all it gathers.
class Lender : public nn::UnaryModule {
 public:
  static constexpr int64_t kSide = 24;
  Lender() : nn::UnaryModule("Lender") {
    weight = register_parameter("weight", mul(randn({kSide, kSide}), 0.3));
    inner = register_module("inner", std::make_shared<Inner>(weight));
  }
  Tensor weight;
  std::shared_ptr<Inner> inner;

 protected:
  Tensor forward(const Tensor& x) override { return linear((*inner)(x), weight); }
};

// One block registered under two names and applied twice (weights shared by layers, as
// ALBERT shares them): one module, so one group of parameters with one set of hooks.
class Twice : public nn::UnaryModule {
 public:
  Twice() : nn::UnaryModule("Twice") {
    first = register_module("first", std::make_shared<nn::Linear>(kWidth, kWidth));
    register_module("again", first);
    out = register_module("out", std::make_shared<nn::Linear>(kWidth, kVocab));
  }
  std::shared_ptr<nn::Linear> first, out;

 protected:
  Tensor forward(const Tensor& x) override { return (*out)(tanh((*first)(tanh((*first)(x))))); }
};

// x (B, T, E) for Outer, ids (B, T) for TinyLm, and targets (B, T), from `step`.
Tensor inputs_of(bool ids, int step) {
  Generator g(static_cast<uint64_t>(100 + step));
  return ids ? randint(0, kVocab, {kBatch, kSeq}, g) : randn({kBatch, kSeq, kWidth}, g);
}
Tensor targets_of(int step) {
  Generator g(static_cast<uint64_t>(200 + step));
  return randint(0, kVocab, {kBatch, kSeq}, g);
}

Tensor lm_loss(const Tensor& logits, const Tensor& targets) {
  return cross_entropy(logits.reshape({-1, kVocab}), targets.reshape({-1}));
}

using Params = std::vector<std::pair<std::string, Tensor>>;

template <typename M>
Params train_plain() {
  manual_seed(5);
  auto m = std::make_shared<M>();
  auto opt = optim::make_optimizer(adamw(), m->named_parameters());
  for (int s = 0; s < kSteps; ++s) {
    m->zero_grad();
    lm_loss((*m)(inputs_of(std::is_same_v<M, TinyLm>, s)), targets_of(s)).backward();
    opt->step();
  }
  Params out;
  for (auto& [n, p] : m->named_parameters()) out.emplace_back(n, p.detach().clone());
  return out;
}

// How a ZeRO-3 run differs from the plain one besides the engine.
struct Variant {
  bool init = true;              // built under zero::Init (else the engine partitions it)
  bool checkpoint_head = false;  // TinyLm's head recomputes in backward
  int gas = 1;                   // micro-batches per step (each rank's slice split)
};

// kSteps under ZeRO-3 on `comm`, each rank its slice of the batch; checks the parameters
// against `expect`. Returns the coordinator's events of the last step.
template <typename M>
std::vector<std::string> train_zero3_and_compare(comm::Communicator& comm, zero::Config cfg,
                                                 const Params& expect, const Variant& v = {}) {
  manual_seed(5);
  std::shared_ptr<M> m;
  if (v.init) {
    zero::Init init(comm);
    m = std::make_shared<M>();
  } else {
    m = std::make_shared<M>();
  }
  if constexpr (std::is_same_v<M, TinyLm>) m->head->set_checkpointing(v.checkpoint_head);
  cfg.gradient_accumulation_steps = v.gas;
  zero::Engine engine(m, comm, cfg, adamw());
  const int64_t local = kBatch / comm.size() / v.gas;
  for (int s = 0; s < kSteps; ++s) {
    engine.set_event_log(s == kSteps - 1);
    const Tensor x = inputs_of(std::is_same_v<M, TinyLm>, s), y = targets_of(s);
    for (int k = 0; k < v.gas; ++k) {
      const int64_t at = (comm.rank() * v.gas + k) * local;
      engine.backward(lm_loss(engine(x.narrow(0, at, local)), y.narrow(0, at, local)));
      EXPECT_EQ(engine.step(), k == v.gas - 1);
    }
  }
  EXPECT_EQ(engine.partitioned().size(), expect.size()) << "the tied matrix is one parameter";
  const Params got = lesson::full_parameters(*m, comm);
  EXPECT_EQ(got.size(), expect.size());
  for (size_t i = 0; i < std::min(got.size(), expect.size()); ++i)
    EXPECT_CLOSE(got[i].second, expect[i].second, 1e-5, 1e-6)
        << got[i].first << " on rank " << comm.rank() << " of " << comm.size();
  return engine.events();
}

}  // namespace

TEST(Lesson24TiedWeights, ALanguageModelsTiedTableAndHeadTrainAsInOneProcess) {
  const Params expect = train_plain<TinyLm>();
  ASSERT_EQ(expect.front().first, "wte.weight");
  for (const auto& [n, p] : expect) EXPECT_NE(n, "head.weight") << "listed once";
  for (int N : {1, 2, 3}) {
    // Everything released after use: the matrix is gathered for wte and again for head,
    // in forward and in backward.
    comm::run_threads(N, [&](comm::Communicator& comm) {
      auto events = train_zero3_and_compare<TinyLm>(comm, lesson::eager_release_config(), expect);
      // (At one rank too: there a gather uses the shard in place, but is logged alike.)
      EXPECT_EQ(count_of(events, "gather:wte"), 2) << "forward and backward";
      EXPECT_EQ(count_of(events, "gather:head"), 2) << "released by wte, gathered again";
    });
    // The default reuse distance, a small prefetch window, small persistence, small buckets.
    comm::run_threads(N, [&](comm::Communicator& comm) {
      zero::Config cfg;
      cfg.reduce_bucket_size = 40;
      cfg.stage3_prefetch_bucket_size = 60;
      cfg.stage3_param_persistence_threshold = 10;
      train_zero3_and_compare<TinyLm>(comm, cfg, expect);
    });
  }
}

TEST(Lesson24TiedWeights, TrainsAsInOneProcessWithRecomputationAccumulationOrOffload) {
  const Params expect = train_plain<TinyLm>();
  comm::run_threads(2, [&](comm::Communicator& comm) {
    const zero::Config eager = lesson::eager_release_config();
    // The head recomputes in backward: its use of the matrix reaches the reducer in a
    // backward of its own, and the reducer adds it to the embedding's.
    train_zero3_and_compare<TinyLm>(comm, eager, expect, {.checkpoint_head = true});
    train_zero3_and_compare<TinyLm>(comm, eager, expect, {.gas = 2});
    train_zero3_and_compare<TinyLm>(comm, eager, expect, {.init = false});
    zero::Config offload = eager;
    offload.offload_optimizer = {zero::OffloadDevice::kCpu, /*pin_memory=*/true};
    train_zero3_and_compare<TinyLm>(comm, offload, expect);
  });
}

// With DeepSpeed's reuse distance (lesson 18), a module kept gathered for its backward keeps the
// matrix for it even when the other module holding it releases it: the head's release
// after its backward leaves the table to the embedding's backward, which comes after
// mid's.
TEST(Lesson24TiedWeights, AModuleKeptForReuseKeepsTheMatrix) {
  const Params expect = train_plain<TinyLm>();
  comm::run_threads(2, [&](comm::Communicator& comm) {
    zero::Config cfg;  // the default reuse distance
    cfg.stage3_param_persistence_threshold = 0;
    cfg.stage3_prefetch_bucket_size = 0;
    auto events = train_zero3_and_compare<TinyLm>(comm, cfg, expect);
    EXPECT_EQ(count_of(events, "gather:wte"), 1) << "kept from forward to backward";
    EXPECT_EQ(count_of(events, "gather:head"), 0) << "the embedding holds it";
  });
}

// A module that registers one tensor under two names (as PyTorch allows) gathers it once:
// counted once against stage3_max_live_parameters, so the gathers per step stay the same
// however long the run, and its all-gathers move what the model's without the second name
// do.
TEST(Lesson24TiedWeights, OneModuleRegisteringATensorTwiceGathersItOnce) {
  comm::run_threads(2, [&](comm::Communicator& comm) {
    zero::Config cfg;
    cfg.stage3_param_persistence_threshold = 0;
    cfg.stage3_max_live_parameters = 250;  // everything fits (120 elements) once
    // The all-gathered bytes of each of `steps` steps of a TinyLm, with mid's weight
    // registered twice or once; the gathers of each step in `gathers`.
    auto train = [&](bool twice, int steps, std::vector<int64_t>& gathers) {
      std::shared_ptr<TinyLm> m;
      {
        zero::Init init(comm);
        m = std::make_shared<TinyLm>();
        if (twice) m->mid->register_parameter("weight_again", m->mid->weight);
      }
      zero::Engine engine(m, comm, cfg, adamw());
      std::vector<int64_t> bytes;
      for (int s = 0; s < steps; ++s) {
        const int64_t before = engine.stats().gathers_issued;
        comm.reset_counters();
        engine.backward(lm_loss(engine(lesson::rank_slice(inputs_of(true, s), comm)),
                                lesson::rank_slice(targets_of(s), comm)));
        engine.step();
        gathers.push_back(engine.stats().gathers_issued - before);
        bytes.push_back(comm.counters()[comm::Collective::kAllGather].bytes);
      }
      return bytes;
    };
    std::vector<int64_t> gathers, unused;
    const std::vector<int64_t> bytes = train(true, 12, gathers);
    for (int s = 2; s < 12; ++s) EXPECT_EQ(gathers[s], gathers[1]) << "step " << s;
    EXPECT_EQ(bytes, train(false, 12, unused)) << "all-gathered bytes per step";
  });
}

TEST(Lesson24TiedWeights, ALoadWithBothNamesChecksThem) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    std::shared_ptr<TinyLm> m = lesson::partitioned<TinyLm>(comm);
    nn::NamedTensors dict;
    for (const auto& [k, t] : lesson::full_parameters(*m, comm)) dict.emplace_back(k, add(t, 1.0));
    const Tensor w = dict.front().second;  // wte.weight
    dict.emplace_back("head.weight", w);   // the same values under the other name: loads
    zero::load_state_dict(*m, dict, comm);
    EXPECT_CLOSE(lesson::full_parameters(*m, comm).front().second, w, 0.0, 0.0);

    dict.back().second = mul(w, 3.0);
    EXPECT_TRUE(test::throws_with([&] { zero::load_state_dict(*m, dict, comm); },
                                  "tied names that disagree: wte.weight and head.weight hold "
                                  "different values for one tied tensor"));
    // Every rank raised it together (comm::AgreedError: launch() ends an mpirun job without
    // aborting it), and the communicator still works.
    try {
      zero::load_state_dict(*m, dict, comm);
      ADD_FAILURE() << "the load was not refused";
    } catch (const comm::AgreedError& e) {
      EXPECT_EQ(e.rank(), comm.rank());
    }
    comm.barrier();
    dict.back().second = zeros({kVocab, kWidth + 1});
    EXPECT_TRUE(test::throws_with([&] { zero::load_state_dict(*m, dict, comm); },
                                  "head.weight [13, 7] but wte.weight [13, 6] (one tied tensor)"));
    EXPECT_CLOSE(lesson::full_parameters(*m, comm).front().second, w, 0.0, 0.0)
        << "a refused load changes nothing";
    // A dict holding the tensor under its second name only is answered by that name.
    dict.erase(dict.begin());
    EXPECT_TRUE(test::throws_with(
        [&] { zero::load_state_dict(*m, dict, comm); },
        "wrong shapes: head.weight (tied to wte.weight; checkpoint [13, 7], model [13, 6])"));
  });
}

// A checkpoint holds the tied matrix once; a resume continues bit for bit.
TEST(Lesson24TiedWeights, ACheckpointOfATiedModelResumesExactly) {
  const lesson::TempDir dir;
  auto run = [&](comm::Communicator& comm, int from, int to, bool save, bool load) {
    manual_seed(5);
    std::shared_ptr<TinyLm> m = lesson::partitioned<TinyLm>(comm);
    auto e = std::make_unique<zero::Engine>(m, comm, lesson::eager_release_config(), adamw());
    if (load) zero::load_checkpoint(*e, dir.path);
    for (int s = from; s < to; ++s) {
      e->backward(lm_loss((*e)(lesson::rank_slice(inputs_of(true, s), comm)),
                          lesson::rank_slice(targets_of(s), comm)));
      e->step();
    }
    if (save) zero::save_checkpoint(*e, dir.path, zero::checkpoint_tag(to));
    return lesson::full_parameters(*m, comm);
  };
  Params straight, resumed;
  comm::run_threads(2, [&](comm::Communicator& comm) {
    Params p = run(comm, 0, 4, false, false);
    if (comm.rank() == 0) straight = p;
  });
  comm::run_threads(2, [&](comm::Communicator& comm) { run(comm, 0, 2, true, false); });
  comm::run_threads(2, [&](comm::Communicator& comm) {
    Params p = run(comm, 2, 4, false, true);
    if (comm.rank() == 0) resumed = p;
  });
  ASSERT_EQ(resumed.size(), straight.size());
  for (size_t i = 0; i < straight.size(); ++i)
    EXPECT_EQ(resumed[i].second.to_vector(), straight[i].second.to_vector()) << straight[i].first;
}

TEST(Lesson24TiedWeights, AnEnclosingModuleKeepsItsMatrixWhileTheChildReleasesIt) {
  const Params expect = train_plain<Outer>();
  comm::run_threads(2, [&](comm::Communicator& comm) {
    auto events = train_zero3_and_compare<Outer>(comm, lesson::eager_release_config(), expect);
    // Inner's release left the matrix to Outer; Outer's released it.
    EXPECT_EQ(count_of(events, "gather:inner"), 0) << "Outer had gathered it";
    EXPECT_EQ(count_of(events, "gather:<root>"), 2);
  });
}

TEST(Lesson24TiedWeights, ExportWritesBothNamesAndALoadTakesEither) {
  const lesson::TempDir dir;
  const std::string path = dir / "tied.safetensors";
  comm::run_threads(2, [&](comm::Communicator& comm) {
    manual_seed(5);
    std::shared_ptr<TinyLm> m;
    {
      zero::Init init(comm);
      m = std::make_shared<TinyLm>();
      // Registering the same tensor again under zero::Init keeps its one partition.
      m->register_parameter("again", m->wte->weight);
    }
    zero::Engine engine(m, comm, lesson::eager_release_config(), adamw());
    engine.backward(lm_loss(engine(lesson::rank_slice(inputs_of(true, 0), comm)),
                            lesson::rank_slice(targets_of(0), comm)));
    engine.step();
    zero::export_consolidated(engine, path);
    const auto saved = nn::load_safetensors(path);
    auto value = [&](const std::string& n) {
      for (const auto& [k, t] : saved)
        if (k == n) return t;
      ADD_FAILURE() << n << " is not in the export";
      return Tensor();
    };
    const Tensor w = value("wte.weight");
    EXPECT_CLOSE(value("head.weight"), w, 0.0, 0.0);
    EXPECT_CLOSE(value("again"), w, 0.0, 0.0);
    EXPECT_CLOSE(lesson::full_parameters(*m, comm).front().second, w, 0.0, 0.0);

    // A dict with the matrix under its second name only (the first name missing) loads it.
    std::vector<std::pair<std::string, Tensor>> dict;
    for (const auto& [k, t] : saved)
      if (k != "wte.weight" && k != "again")
        dict.emplace_back(k, k == "head.weight" ? mul(t, 2.0) : t);
    zero::load_state_dict(*m, dict, comm);
    EXPECT_CLOSE(lesson::full_parameters(*m, comm).front().second, mul(w, 2.0), 0.0, 0.0);
  });
}

TEST(Lesson24TiedWeights, ThePlannerStoresTheMatrixOnce) {
  comm::run_threads(1, [](comm::Communicator& comm) {
    std::shared_ptr<TinyLm> tied = lesson::partitioned<TinyLm>(comm);
    const zero::MemoryPlan plan = zero::plan_memory(*tied, 2, zero::Config{}, 2);
    int64_t shard_bytes = 0;
    for (const auto& [n, p] : tied->named_parameters())
      shard_bytes += zero::make_partition(p.numel(), 2).shard_numel * 4;
    EXPECT_EQ(plan.param_shard, shard_bytes);
  });
}

TEST(Lesson24TiedWeights, ThePlannerGathersAMatrixLentToAChildOnce) {
  // Lender gathers the matrix for its own call; Inner, inside it, finds it gathered.
  comm::run_threads(2, [](comm::Communicator& comm) {
    manual_seed(3);
    std::shared_ptr<Lender> m = lesson::partitioned<Lender>(comm);
    const zero::Config cfg = lesson::eager_release_config();
    zero::Engine engine(m, comm, cfg, {});
    const Tensor x = randn({kBatch, kSeq, Lender::kSide});
    const zero::MemoryReport got = zero::measure_memory(engine, [&] {
      const Tensor y = engine(x);
      return mean(mul(y, y));
    });
    const int64_t matrix = Lender::kSide * Lender::kSide * 4;
    EXPECT_EQ(got.gathered_param_peak, matrix);
    EXPECT_EQ(zero::plan_memory(*m, 2, cfg).gathered_peak, matrix);
  });
}

TEST(Lesson24TiedWeights, AModuleAppliedTwiceIsOneGroupAndTrainsAsInOneProcess) {
  const Params expect = train_plain<Twice>();
  comm::run_threads(2, [&](comm::Communicator& comm) {
    const auto events =
        train_zero3_and_compare<Twice>(comm, lesson::eager_release_config(), expect);
    EXPECT_EQ(count_of(events, "fetch:first"), 2) << "one fetch per call";
    for (const std::string& e : events) EXPECT_EQ(e.find(":again"), std::string::npos) << e;
  });
}
