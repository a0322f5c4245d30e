// Lesson 11 — the frozen tokenizer, end to end.
// The situation: a frozen vision tokenizer with BatchNorm3d is built while ZeRO-3 is
// active and only rank 0's loader fills its pretrained running statistics.
// Invariants:
//  (a) zt broadcasts buffers, and replicas, from rank 0 (at engine creation and at
//      load), so every rank produces bit-identical outputs — in other stacks each rank
//      would tokenize with its own statistics;
//  (b) built in a zero::Replicated scope inside Init, the tokenizer is a plain replica:
//      identical outputs, ZERO collectives per forward and no engine hooks on its
//      modules;
//  (c) GatheredParameters with a modifier rank (rank 0 or any other): that rank's edit of
//      a parameter and a buffer reaches every rank; without a modifier rank an edit is an
//      error. (DeepSpeed broadcasts parameters only, and silently discards an edit made
//      without a modifier rank.)
#include "zero/lesson_util.h"

using namespace zt;

namespace {
Tensor video() {
  Generator g(5);
  return randn({2, 3, 4, 6, 6}, g);
}

void expect_same_everywhere(const Tensor& t, comm::Communicator& comm, const char* what) {
  auto h = lesson::hashes_across_ranks(t, comm);
  for (size_t r = 1; r < h.size(); ++r) EXPECT_EQ(h[r], h[0]) << what << ": rank " << r;
}
}  // namespace

TEST(Lesson11FrozenTokenizer, RankZeroOnlyLoadStillGivesIdenticalOutputs) {
  for (int N : {2, 3, 4}) {
    comm::run_threads(N, [](comm::Communicator& comm) {
      manual_seed(21 + comm.rank());
      std::shared_ptr<lesson::TokenizerLike> tok = lesson::partitioned<lesson::TokenizerLike>(comm);
      tok->requires_grad_(false);
      tok->eval();
      if (comm.rank() == 0) lesson::load_pretrained_stats(*tok);  // the classic bug
      zero::Engine engine(tok, comm, zero::Config{}, {});         // broadcasts buffers
      autograd::NoGradGuard ng;
      Tensor out = engine(video());
      expect_same_everywhere(out, comm, "tokenizer output");
      lesson::TokenizerLike loaded;  // what rank 0 holds
      lesson::load_pretrained_stats(loaded);
      EXPECT_CLOSE(tok->bn->running_var, loaded.bn->running_var, 0, 0) << "rank 0's statistics won";
    });
  }
}

TEST(Lesson11FrozenTokenizer, LoadingOnRankZeroOnlyBroadcasts) {
  manual_seed(3);
  auto pretrained = std::make_shared<lesson::TokenizerLike>();
  lesson::load_pretrained_stats(*pretrained);
  auto state = nn::state_dict(*pretrained);
  pretrained->eval();
  Tensor ref;
  {
    autograd::NoGradGuard ng;
    ref = (*pretrained)(video());
  }
  comm::run_threads(3, [&](comm::Communicator& comm) {
    manual_seed(30 + comm.rank());  // every rank builds different values
    std::shared_ptr<lesson::TokenizerLike> tok = lesson::partitioned<lesson::TokenizerLike>(comm);
    // Only rank 0 has the file; the others pass nothing. The load itself broadcasts: the
    // buffers agree before any engine exists (whose constructor would broadcast again).
    zero::load_state_dict(*tok, comm.rank() == 0 ? state : decltype(state){}, comm);
    for (const auto& [name, b] : tok->named_buffers())
      expect_same_everywhere(b, comm, name.c_str());
    tok->eval();
    zero::Engine engine(tok, comm, zero::Config{}, {});
    autograd::NoGradGuard ng;
    Tensor out = engine(video());
    expect_same_everywhere(out, comm, "output after rank-0 load");
    EXPECT_CLOSE(out, ref, 1e-6, 1e-6) << "loaded values are the pretrained ones";
  });
  // A state dict of another model is the same error on every rank, naming each mismatch
  // and what to do about it.
  auto other = state;
  other[0].second = zeros({2, 2});
  other.emplace_back("extra.weight", zeros({1}));
  comm::run_threads(2, [&](comm::Communicator& comm) {
    std::shared_ptr<lesson::TokenizerLike> tok = lesson::partitioned<lesson::TokenizerLike>(comm);
    std::string msg;
    try {
      zero::load_state_dict(*tok, comm.rank() == 0 ? other : decltype(other){}, comm);
    } catch (const Error& e) {
      msg = e.what();
    }
    for (const std::string& part :
         {"load_state_dict (rank 0's state dict): wrong shapes: " + other[0].first +
              " (checkpoint [2, 2], model ",
          std::string("; unexpected keys: extra.weight. The state dict is of another model: "
                      "build the model as it was when it was saved (for the apps, the config "
                      "the weights were trained with)")})
      EXPECT_NE(msg.find(part), std::string::npos) << "missing '" << part << "' in: " << msg;
    EXPECT_EQ(msg.find("strict = false"), std::string::npos)
        << "a wrong shape is no part of the model: " << msg;
  });
  // An undefined tensor (a converter that left an optional entry empty) is named as such on
  // every rank, as nn::load_state_dict names it.
  auto empty = state;
  empty[0].second = Tensor();
  comm::run_threads(2, [&](comm::Communicator& comm) {
    std::shared_ptr<lesson::TokenizerLike> tok = lesson::partitioned<lesson::TokenizerLike>(comm);
    EXPECT_TRUE(test::throws_with(
        [&] { zero::load_state_dict(*tok, comm.rank() == 0 ? empty : decltype(empty){}, comm); },
        "load_state_dict (rank 0's state dict): undefined tensors: " + empty[0].first));
  });
  // A tensor of another kind of dtype (integers where the model holds floats: a file's
  // label changed, its bytes read as another type's) is refused; a float of another
  // precision converts.
  auto ints = state, doubles = state;
  ints[0].second = ints[0].second.to(DType::i32);
  doubles[0].second = doubles[0].second.to(DType::f64);
  comm::run_threads(2, [&](comm::Communicator& comm) {
    std::shared_ptr<lesson::TokenizerLike> tok = lesson::partitioned<lesson::TokenizerLike>(comm);
    EXPECT_TRUE(test::throws_with(
        [&] { zero::load_state_dict(*tok, comm.rank() == 0 ? ints : decltype(ints){}, comm); },
        "load_state_dict (rank 0's state dict): wrong kinds of dtype: " + ints[0].first +
            " (checkpoint i32, model f32)"));
    EXPECT_EQ(test::error_of([&] {
                zero::load_state_dict(*tok, comm.rank() == 0 ? doubles : decltype(doubles){}, comm);
              }),
              "");
  });
}

TEST(Lesson11FrozenTokenizer, ReplicatedScopeCostsNoCollectives) {
  for (int N : {2, 3, 4}) {
    comm::run_threads(N, [](comm::Communicator& comm) {
      manual_seed(40 + comm.rank());
      std::shared_ptr<lesson::TokenizerLike> tok;
      {
        zero::Init init(comm);
        zero::Replicated frozen(comm);
        tok = std::make_shared<lesson::TokenizerLike>();
      }
      for (auto& [n, p] : tok->named_parameters()) {
        EXPECT_TRUE(zero::is_replicated(p)) << n;
        EXPECT_TRUE(p.has_storage()) << n;
      }
      tok->requires_grad_(false);
      tok->eval();
      if (comm.rank() == 0) lesson::load_pretrained_stats(*tok);
      zero::Engine engine(tok, comm, zero::Config{}, {});  // replicas + buffers broadcast
      autograd::NoGradGuard ng;
      comm.reset_counters();
      engine.set_event_log(true);
      Tensor out;
      for (int i = 0; i < 3; ++i) out = engine(video());
      EXPECT_EQ(comm.counters().total_calls(), 0) << "a replica's forward is communication-free";
      EXPECT_EQ(engine.events(), std::vector<std::string>{})
          << "and hook-free: the engine fetches none of a replica's modules";
      expect_same_everywhere(out, comm, "replicated output");
    });
  }
}

// The engine broadcasts the replicas as it is built, as it does the buffers: weights that
// only rank 0's loader wrote into a replicated tokenizer (after its scope broadcast the
// initial ones) are every rank's once the engine exists.
TEST(Lesson11FrozenTokenizer, AReplicaWrittenOnRankZeroBeforeTheEngineIsBroadcastByIt) {
  comm::run_threads(3, [](comm::Communicator& comm) {
    std::shared_ptr<lesson::TokenizerLike> tok;
    {
      zero::Init init(comm);
      zero::Replicated frozen(comm);
      tok = std::make_shared<lesson::TokenizerLike>();
    }
    tok->requires_grad_(false);
    if (comm.rank() == 0) {  // the classic bug: a load on rank 0 only
      autograd::NoGradGuard ng;
      tok->conv->weight.fill_(0.5);
    }
    zero::Engine engine(tok, comm, zero::Config{}, {});
    EXPECT_TRUE(
        test::values_are(tok->conv->weight, std::vector<double>(tok->conv->weight.numel(), 0.5)))
        << "rank 0's weights, on rank " << comm.rank();
  });
}

// The modifier may be any rank: rank 0, then the last rank, edits and the others take its
// values.
TEST(Lesson11FrozenTokenizer, GatheredParametersWithModifierRank) {
  comm::run_threads(3, [](comm::Communicator& comm) {
    for (int modifier : {0, comm.size() - 1}) {
      std::shared_ptr<lesson::TokenizerLike> tok = lesson::partitioned<lesson::TokenizerLike>(comm);
      {
        zero::GatheredParameters g(*tok, comm, modifier);
        if (comm.rank() == modifier) {
          autograd::NoGradGuard no_grad;  // an edit, not part of any graph (as in PyTorch)
          tok->conv->bias.fill_(0.5);
          tok->bn->running_mean.fill_(0.25);
        }
      }
      EXPECT_FALSE(tok->conv->bias.has_storage()) << "re-partitioned on exit";
      {
        zero::GatheredParameters g({tok->conv->bias}, comm);
        for (double v : tok->conv->bias.to_vector()) EXPECT_EQ(v, 0.5) << "modifier " << modifier;
      }
      for (double v : tok->bn->running_mean.to_vector())
        EXPECT_EQ(v, 0.25) << "modifier " << modifier;
    }
  });
}

TEST(Lesson11FrozenTokenizer, EditWithoutModifierRankIsAnError) {
  try {
    comm::run_threads(2, [](comm::Communicator& comm) {
      std::shared_ptr<lesson::TokenizerLike> tok = lesson::partitioned<lesson::TokenizerLike>(comm);
      zero::GatheredParameters g(*tok, comm);
      autograd::NoGradGuard no_grad;
      tok->conv->weight.fill_(1.0);
      g.exit();
    });
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("conv.weight"), std::string::npos) << msg;
    EXPECT_NE(msg.find("modifier_rank"), std::string::npos) << msg;
  }
}
