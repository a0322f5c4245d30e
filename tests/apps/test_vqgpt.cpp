// vqgpt: a GPT trained with ZeRO-3 on the tokens of a frozen, replicated tokenizer. What
// these tests pin down:
//  1. how the config's GPT sizes are reconciled with the Emu3 token layout (BOS, rows of
//     codes each closed by EOL, EOS; the layout itself: test_gpt_init_sampling.cpp);
//  2. with the tokenizer's weights and BatchNorm buffers read on rank 0 only, every rank
//     produces identical tokens — without a single collective per tokenizer call;
//  3. equivalence: 5 steps on N = 1, 2, 4 ranks with the same global batch give the same
//     parameters (f32, kEquivalence below);
//  4. a short run's loss falls below the unigram entropy of its token stream;
//  5. sampling follows the layout and decodes to images; export holds both children;
//  6. --resume survives a broken `latest`; a new run or quick tokenizer does not overwrite
//     an earlier one without --overwrite;
//  7. a fused q/k/v projection trains the same on one and two ranks.
// On a GPU: test_vqgpt_cuda.cpp.
// The tokenizer is a tiny random-init VqModel (ch 32, two levels: 8x8 frames -> 4x4 codes).
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "apps/app_test_util.h"
#include "apps/vqgpt/vqgpt_app.h"
#include "apps/vqgpt_test_util.h"
#include "common/gpu_skip.h"
#include "common/test_util.h"
#include "core/work_counts.h"
#include "nn/safetensors.h"
#include "zero/checkpoint.h"
#include "zero/load.h"

using namespace zt;
namespace fs = std::filesystem;

using namespace zt::vqgpt_test;

namespace {

Tensor clips(int64_t b, uint64_t seed) {
  Generator g(seed);
  return rand({b, 4, 3, 8, 8}, g) * 2.0 - 1.0;
}

}  // namespace

TEST(VqGptLayout, ConfigSizesFitTheLayout) {
  Scratch s("spec");
  // The loader's defaults are the layout's needs: K + 3 ids, BOS + rows x (codes + EOL).
  gpt::GptSpec spec = gpt::gpt_spec(tiny_config(s / "run"));
  EXPECT_EQ(spec.vocab_size, 64 + 3);
  EXPECT_EQ(spec.block_size, 1 + 4 * (4 + 1));
  // An explicit size that is too small names the key and the value needed.
  config::AppConfig cfg = tiny_config(s / "run");
  cfg.gpt->block_size = 18;
  try {
    gpt::gpt_spec(cfg);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gpt.block_size to 21"), std::string::npos) << e.what();
  }
}

// A one-block GPT small enough for a quick forward on either device.
const gpt::GptSpec kSmallGpt{
    .vocab_size = 16, .block_size = 8, .n_layer = 1, .n_head = 2, .n_embd = 8};

// The GPT's position ids are the first T of 0 .. block_size - 1, made once per device: a
// shorter sequence before a longer one (and after it) sees positions 0 .. T - 1, so its
// logits are those of the layers applied by hand, and (the model being causal) the full
// sequence's first ones.
// A sequence past block_size and an empty one are each refused for what they are.
TEST(VqGptModel, SequencesTooLongOrEmptyAreRefused) {
  gpt::Gpt m(kSmallGpt);
  EXPECT_TRUE(test::throws_with(
      [&] {
        m(zeros({1, 9}, DType::i64));
      },
      "sequence length 9 exceeds block_size 8"));
  EXPECT_TRUE(test::throws_with(
      [&] {
        m(zeros({1, 0}, DType::i64));
      },
      "Gpt: ids [1, 0] hold no token (T = 0)"));
}

TEST(VqGptModel, APrefixSeesTheFirstPositions) {
  manual_seed(9);
  gpt::Gpt m(kSmallGpt);
  Generator g(10);
  const Tensor ids = randint(0, 16, {2, 8}, g);
  const Tensor prefix = m(ids.narrow(1, 0, 5).contiguous());  // first call: a shorter one
  const Tensor full = m(ids);
  EXPECT_EQ(full.sizes(), (Shape{2, 8, 16}));
  EXPECT_CLOSE(prefix, full.narrow(1, 0, 5), 1e-5, 1e-6);
  EXPECT_CLOSE(m(ids.narrow(1, 0, 5).contiguous()), prefix, 0.0, 0.0);
  // The layers by hand, with positions 0 .. T - 1 built for the call.
  auto by_hand = [&](const Tensor& x_ids) {
    const int64_t t = x_ids.size(1);
    Tensor x = (*m.wte)(x_ids) + (*m.wpe)(arange(0, static_cast<double>(t), 1.0, DType::i64));
    for (const auto& b : *m.blocks) x = (*b)(x);
    return (*m.head)((*m.ln_f)(x));
  };
  EXPECT_CLOSE(full, by_hand(ids), 0.0, 0.0);
  EXPECT_CLOSE(prefix, by_hand(ids.narrow(1, 0, 5).contiguous()), 0.0, 0.0);
}

// tie_embeddings: head.weight is wte.weight, counted and listed once, saved under both names.
TEST(VqGptModel, TiedEmbeddingsAreOneMatrix) {
  gpt::GptSpec spec = kSmallGpt;
  spec.tie_embeddings = true;
  gpt::Gpt m(spec);
  EXPECT_TRUE(m.head->weight.same(m.wte->weight));
  EXPECT_EQ(m.num_parameters(), spec.count_parameters());
  EXPECT_EQ(spec.count_parameters(), kSmallGpt.count_parameters() - 16 * 8);
  for (const auto& [n, p] : m.named_parameters()) EXPECT_NE(n, "head.weight");
  int names = 0;
  for (const auto& [n, t] : nn::state_dict(m)) names += n == "head.weight" || n == "wte.weight";
  EXPECT_EQ(names, 2);
}

// Gpt::decode with a KV cache gives, token by token after a prompt, the rows of a forward
// over the whole sequence; sampling through the cache draws the sequences that sampling
// with whole-prefix forwards draws (f64: the logits agree to rounding far below any
// draw's margin).
TEST(VqGptModel, KvCacheDecodesAsTheWholeSequenceAndSamplesTheSame) {
  manual_seed(9);
  gpt::GptSpec spec = kSmallGpt;
  spec.block_size = 32;
  gpt::Gpt m(spec);
  m.to(DType::f64);
  m.eval();
  autograd::NoGradGuard ng;
  Generator g(10);
  const Tensor ids = randint(0, 16, {2, 9}, g);
  const Tensor full = m(ids);
  gpt::KvCache cache;
  EXPECT_CLOSE(m.decode(ids.narrow(1, 0, 3).contiguous(), cache), full.narrow(1, 0, 3), 1e-12,
               1e-13);
  for (int64_t t = 3; t < 9; ++t)
    EXPECT_CLOSE(m.decode(ids.narrow(1, t, 1).contiguous(), cache), full.narrow(1, t, 1), 1e-12,
                 1e-13)
        << "token " << t;
  EXPECT_EQ(cache.length, 9);
  EXPECT_TRUE(test::throws_with(
      [&] {
        m.decode(randint(0, 16, {2, 24}, g), cache);
      },
      "sequence length 33 exceeds block_size 32"));

  const gpt::TokenLayout layout(13, 1, 2, 3);  // codes 0..12, BOS 13, EOL 14, EOS 15
  gpt::SampleOptions o;
  o.seed = 4;
  o.temperature = 1.5;
  const Tensor cached =
      gpt::sample_sequences(gpt::cached_next_logits(m, Device::cpu()), layout, 5, o);
  const Tensor whole = gpt::sample_sequences(
      gpt::full_next_logits([&](const Tensor& x) { return m(x); }), layout, 5, o);
  EXPECT_EQ(cached.to_vector(), whole.to_vector());
  EXPECT_EQ(cached.size(1), layout.length());
}

// On a GPU a forward copies nothing from the host once the device's position ids exist
// (a copy would also stop a CUDA graph capture of the vqgpt step), and it gives the CPU's
// logits.
TEST(VqGptModel, GpuForwardCopiesNothingFromTheHost) {
  ZT_GPU_OR_SKIP("the GPT forward on a GPU needs one");
  const Tf32Policy saved = tf32();
  set_tf32({.matmul = false, .conv = false});  // exact f32 products on both devices
  manual_seed(9);
  gpt::Gpt cpu(kSmallGpt);
  manual_seed(9);
  gpt::Gpt gpu(kSmallGpt);
  gpu.to(Device::cuda());
  Generator g(11);
  const Tensor ids = randint(0, 16, {2, 8}, g);
  const Tensor on_gpu = ids.to(Device::cuda());
  (void)gpu(on_gpu);  // the first call on the device makes its position ids
  const WorkCounts before = work_counts();
  const Tensor full = gpu(on_gpu);
  const Tensor prefix = gpu(on_gpu.narrow(1, 0, 5).contiguous());
  const WorkCounts w = work_counts() - before;
  EXPECT_EQ(w.h2d_copies, 0);
  EXPECT_EQ(w.syncs, 0);
  EXPECT_CLOSE(full.to(Device::cpu()), cpu(ids), 1e-4, 1e-5);
  EXPECT_CLOSE(prefix.to(Device::cpu()), cpu(ids).narrow(1, 0, 5), 1e-4, 1e-5);
  set_tf32(saved);
}

// sequence_losses (vqgpt's evaluation, summed sequence by sequence in dataset order): each
// sequence's mean next-token loss, from one forward of the batch; their mean is loss()'s.
TEST(VqGptModel, SequenceLossesAreEachSequencesMeanLoss) {
  const config::AppConfig cfg = tiny_config("unused");
  comm::run_threads(1, [&](comm::Communicator& comm) {
    manual_seed(12);
    auto model = vqgpt::build_model(cfg, std::make_shared<vq::VqModel>(cfg.model), comm,
                                    /*replicated_gpt=*/true);
    autograd::NoGradGuard ng;
    const Tensor seqs = model->tokenize(rand({3, 4, 3, 8, 8}) * 2.0 - 1.0);
    const Tensor each = model->sequence_losses(seqs);
    ASSERT_EQ(each.sizes(), (Shape{3}));
    EXPECT_NEAR(mean(each).item(), model->loss(seqs).item(), 1e-6);
    for (int64_t i = 0; i < 3; ++i)
      EXPECT_NEAR(each.select(0, i).item(), model->loss(seqs.narrow(0, i, 1)).item(), 1e-5) << i;
    EXPECT_GT(max(each).item() - min(each).item(), 1e-6) << "three different sequences";
  });
}

TEST(VqGpt, RankZeroOnlyTokenizerLoadGivesIdenticalTokens) {
  Scratch s("tokens");
  const config::AppConfig cfg = tiny_config(s / "run");
  const std::string weights = s / "tokenizer.safetensors";
  const nn::NamedTensors state = pretrained_tokenizer(cfg);
  nn::save_safetensors(weights, state);
  const Tensor x = clips(4, 5);
  const gpt::TokenLayout layout = gpt::TokenLayout::of(cfg);

  // Single-process reference with the same weights and statistics.
  vq::VqModel ref(cfg.model);
  nn::load_state_dict(ref, state);
  ref.eval();
  const Tensor want = gpt::tokenize(ref, x, layout);

  for (int n : {2, 3}) {
    comm::run_threads(n, [&](comm::Communicator& comm) {
      manual_seed(100 + comm.rank());                        // ranks disagree on every random init
      auto tok = vqgpt::load_tokenizer(cfg, weights, comm);  // file read on rank 0 only
      for (const auto& [name, p] : tok->named_parameters()) {
        ASSERT_TRUE(zero::is_replicated(p)) << name;
        ASSERT_FALSE(p.requires_grad()) << name;
      }
      comm.reset_counters();
      const Tensor got = gpt::tokenize(*tok, x, layout);
      EXPECT_EQ(comm.counters().total_calls(), 0) << "tokenizing must not communicate";
      const auto hashes = comm.all_gather_object<uint64_t>(zero::tensor_hash(got));
      for (int r = 1; r < n; ++r) EXPECT_EQ(hashes[r], hashes[0]) << "rank " << r;
      EXPECT_TRUE(test::values_are(got, want.to_vector(), 0.0)) << "rank " << comm.rank();
    });
  }
  // The buffers matter: default statistics give other tokens.
  vq::VqModel plain(cfg.model);
  nn::NamedTensors params_only;
  for (const auto& [n, t] : state)
    if (n.find("running_") == std::string::npos && n.find("num_batches") == std::string::npos)
      params_only.emplace_back(n, t);
  nn::load_state_dict(plain, params_only, /*strict=*/false);
  plain.eval();
  EXPECT_NE(zero::tensor_hash(gpt::tokenize(plain, x, layout)), zero::tensor_hash(want));
}

// How far apart equal runs on different rank counts may end: each sums gradients in its
// own order, and Adam divides by sqrt(v), so an element with a near-zero gradient takes
// that rounding into its update, up to ~1e-4 of the 5 steps' budget (lr 3e-3 x 5; 8e-7
// measured). Pairing the wrong shards moves elements by the whole budget.
constexpr double kEquivalenceRtol = 1e-5, kEquivalenceAtol = 2e-6;

// Trains the tiny config (with `overrides`) for 5 steps on `n` thread ranks for each n of
// `ranks`, the same global batch of 8 clips (8 / n per rank), and exports each run.
std::map<int, nn::NamedTensors> train_and_export(const Scratch& s, const std::vector<int>& ranks,
                                                 const std::vector<std::string>& overrides = {}) {
  const std::string weights = s / "tokenizer.safetensors";
  nn::save_safetensors(weights, pretrained_tokenizer(tiny_config(s / "x")));
  std::map<int, nn::NamedTensors> exported;
  for (int n : ranks) {
    const std::string run = s / ("run" + std::to_string(n));
    const config::AppConfig base = tiny_config(run);
    for (const std::string& o : overrides) config::apply_override(base.root, o);
    config::AppConfig c = config::parse_app_config(base.root, config::App::vqgpt);
    c.train.batch = 8 / n;
    c.train.checkpoint_every = 5;
    comm::run_threads(n, [&](comm::Communicator& comm) {
      vqgpt::TrainOptions o;
      o.quiet = true;
      o.tokenizer = weights;
      const vqgpt::TrainResult r = vqgpt::train(c, o, comm);
      EXPECT_EQ(r.steps, 5);
      EXPECT_EQ(r.replica_checks, 1 + 2) << "at start and at steps 2 and 4";
      // Export runs on the CPU whatever train.device says: these ranks hold no GPU.
      config::AppConfig on_gpu = c;
      on_gpu.train.device = "cuda";
      vqgpt::export_model(on_gpu, "", run + ".safetensors", comm, true);
    });
    exported[n] = nn::load_safetensors(run + ".safetensors");
  }
  return exported;
}

TEST(VqGpt, SameParametersOnOneTwoAndFourRanks) {
  Scratch s("equiv");
  std::map<int, nn::NamedTensors> exported = train_and_export(s, {1, 2, 4});
  const nn::NamedTensors& one = exported[1];
  ASSERT_GT(one.size(), 0u);
  int64_t gpt_tensors = 0;
  for (int n : {2, 4}) {
    ASSERT_EQ(exported[n].size(), one.size());
    for (size_t i = 0; i < one.size(); ++i) {
      ASSERT_EQ(exported[n][i].first, one[i].first);
      if (one[i].first.rfind("gpt.", 0) == 0 && n == 2) ++gpt_tensors;
      EXPECT_CLOSE(exported[n][i].second, one[i].second, kEquivalenceRtol, kEquivalenceAtol)
          << one[i].first << " on " << n << " ranks";
    }
  }
  EXPECT_EQ(gpt_tensors, 2 + 2 * 12 + 2 + 1) << "wte, wpe, 2 blocks x 12, ln_f, head";
  // A vqgpt export serves as a tokenizer file too (vqgpt --tokenizer, vqtok --weights).
  comm::run_threads(1, [&](comm::Communicator& comm) {
    auto tok = vqtok::load_frozen_model(tiny_config(s / "run1"), s / "run1.safetensors", comm);
    int64_t compared = 0;
    for (const auto& [name, t] : nn::state_dict(*tok))
      for (const auto& [key, saved] : one)
        if (key == "tokenizer." + name) {
          EXPECT_EQ(zero::tensor_hash(t), zero::tensor_hash(saved)) << name;
          ++compared;
        }
    EXPECT_EQ(compared, static_cast<int64_t>(nn::state_dict(*tok).size()));
  });
}

// gpt.fused_qkv: one q/k/v projection per block (attn.qkv_proj, E -> 3E), trained under
// ZeRO-3 to the same values on one and two ranks (its gradient is one tensor where three
// were added up), and exported under its own name.
TEST(VqGpt, FusedQkvTrainsTheSameOnOneAndTwoRanks) {
  Scratch s("fused_qkv");
  std::map<int, nn::NamedTensors> exported = train_and_export(s, {1, 2}, {"gpt.fused_qkv=true"});
  std::map<std::string, Tensor> one(exported[1].begin(), exported[1].end());
  ASSERT_TRUE(one.count("gpt.blocks.0.attn.qkv_proj.weight"));
  EXPECT_EQ(one["gpt.blocks.0.attn.qkv_proj.weight"].sizes(), (Shape{96, 32}));
  EXPECT_EQ(one.count("gpt.blocks.0.attn.q_proj.weight"), 0u);
  ASSERT_EQ(exported[2].size(), exported[1].size());
  for (const auto& [name, t] : exported[2])
    EXPECT_CLOSE(t, one[name], kEquivalenceRtol, kEquivalenceAtol) << name << " on 2 ranks";
}

// gpt.tie_embeddings: one matrix for the token table and the output head, trained under
// ZeRO-3 to the same values on one and two ranks, and exported under both names.
TEST(VqGpt, TiedEmbeddingsTrainTheSameOnOneAndTwoRanks) {
  Scratch s("tied");
  std::map<int, nn::NamedTensors> exported =
      train_and_export(s, {1, 2}, {"gpt.tie_embeddings=true"});
  std::map<std::string, Tensor> one(exported[1].begin(), exported[1].end());
  ASSERT_TRUE(one.count("gpt.wte.weight") && one.count("gpt.head.weight"));
  EXPECT_CLOSE(one["gpt.head.weight"], one["gpt.wte.weight"], 0.0, 0.0);
  ASSERT_EQ(exported[2].size(), exported[1].size());
  for (size_t i = 0; i < exported[1].size(); ++i)
    EXPECT_CLOSE(exported[2][i].second, exported[1][i].second, kEquivalenceRtol, kEquivalenceAtol)
        << exported[1][i].first;
}

// train.activation_checkpointing recomputes each GptBlock in backward: with dropout on
// (the recomputation must draw the same masks), training ends in the same parameters bit
// for bit, on 2 ranks under ZeRO-3.
TEST(VqGpt, ActivationCheckpointingTrainsTheSameModel) {
  Scratch s("recompute");
  const std::string weights = s / "tokenizer.safetensors";
  nn::save_safetensors(weights, pretrained_tokenizer(tiny_config(s / "x")));
  std::vector<nn::NamedTensors> exported;
  std::vector<std::vector<double>> losses;
  std::vector<int64_t> activation_peak;  // the runs' largest, from metrics.jsonl
  for (bool on : {false, true}) {
    const std::string run = s / (on ? "on" : "off");
    config::AppConfig c = tiny_config(run);
    c.gpt->dropout = 0.1;
    c.train.activation_checkpointing = on;
    c.train.log_every = 1;
    c.train.checkpoint_every = 5;
    comm::run_threads(2, [&](comm::Communicator& comm) {
      vqgpt::TrainOptions o;
      o.quiet = true;
      o.tokenizer = weights;
      const vqgpt::TrainResult r = vqgpt::train(c, o, comm);
      vqgpt::export_model(c, "", run + ".safetensors", comm, true);
      if (comm.rank() == 0) losses.push_back(r.log_losses);
    });
    exported.push_back(nn::load_safetensors(run + ".safetensors"));
    int64_t peak = 0;
    for (const nlohmann::json& r : app::read_metrics(run + "/metrics.jsonl"))
      if (r.value("kind", "") == "train")
        peak = std::max(peak, r["memory"]["activation_peak"].get<int64_t>());
    activation_peak.push_back(peak);
  }
  // The blocks were recomputed: less was held from forward to backward.
  EXPECT_GT(activation_peak[0], 0);
  EXPECT_LT(activation_peak[1], activation_peak[0]);
  EXPECT_EQ(losses[1], losses[0]);
  ASSERT_EQ(exported[1].size(), exported[0].size());
  for (size_t i = 0; i < exported[0].size(); ++i)
    EXPECT_EQ(zero::tensor_hash(exported[1][i].second), zero::tensor_hash(exported[0][i].second))
        << exported[0][i].first;
}

TEST(VqGpt, LossFallsBelowUnigramEntropyAndSamplesFollowTheLayout) {
  Scratch s("learn");
  const std::string weights = s / "tokenizer.safetensors";
  config::AppConfig cfg = tiny_config(s / "run");
  nn::save_safetensors(weights, pretrained_tokenizer(cfg));
  cfg.train.steps = 40;
  cfg.train.log_every = 10;
  cfg.train.checkpoint_every = 40;
  double loss = 0.0, entropy = 0.0;
  Tensor frames_of_two;  // rank 0's decoded samples of the 2-rank run
  comm::run_threads(2, [&](comm::Communicator& comm) {
    vqgpt::TrainOptions o;
    o.quiet = true;
    o.tokenizer = weights;
    o.resume = false;
    const vqgpt::TrainResult r = vqgpt::train(cfg, o, comm);
    ASSERT_EQ(r.log_losses.size(), 4u);
    EXPECT_GT(r.unigram_entropy, 1.0);
    EXPECT_LT(r.loss, r.unigram_entropy) << "first window " << r.log_losses.front();
    EXPECT_LT(r.log_losses.back(), r.log_losses.front());
    EXPECT_GT(r.tokenizer_share, 0.0);
    EXPECT_LT(r.tokenizer_share, 1.0);
    EXPECT_EQ(r.loss_reads, 5) << "after step 1 and at the 4 log steps, not once a step";
    if (comm.rank() == 0) {
      loss = r.loss;
      entropy = r.unigram_entropy;
    }

    vqgpt::SampleOptions so;
    so.num = 3;  // not a multiple of the ranks
    so.out = s / "grid.png";
    so.quiet = true;
    so.sampling.top_k = 8;
    const vqgpt::SampleResult sr = vqgpt::sample(cfg, so, comm);
    EXPECT_EQ(sr.sequences.sizes(), (Shape{3, 22}));
    EXPECT_EQ(sr.codes.sizes(), (Shape{3, 1, 4, 4}));
    const auto hashes = comm.all_gather_object<uint64_t>(zero::tensor_hash(sr.sequences));
    EXPECT_EQ(hashes.front(), hashes.back());
    // Each rank decodes its own rows and sends them to rank 0, which writes the grid; the
    // others keep none (a rank that sampled none too: one sequence on two ranks, below).
    const bool writes = comm.rank() == 0;
    EXPECT_EQ(sr.frames.sizes(), (Shape{writes ? 3 : 0, 4, 3, 8, 8}));
    if (writes) frames_of_two = sr.frames;
    vqgpt::SampleOptions one = so;
    one.num = 1;
    one.out = "";
    const vqgpt::SampleResult r1 = vqgpt::sample(cfg, one, comm);
    ASSERT_EQ(r1.frames.sizes(), (Shape{writes ? 1 : 0, 4, 3, 8, 8}));
    // Sample i is the same whatever is sampled beside it: here, fewer sequences per rank.
    EXPECT_CLOSE(r1.sequences, sr.sequences.narrow(0, 0, 1), 0, 0);
    if (writes) {
      EXPECT_GT(zt::sum(zt::abs(r1.frames)).item(), 0.0);
    }
    // The grid is a PNG: another name is refused before anything runs.
    so.out = s / "grid.jpg";
    EXPECT_TRUE(test::throws_with([&] { vqgpt::sample(cfg, so, comm); },
                                  "so --out must end in .png, got '"));
    so.out = s / "grid.png";
    so.tokens_out = so.out;
    EXPECT_TRUE(
        test::throws_with([&] { vqgpt::sample(cfg, so, comm); }, "is the grid's file (--out '"));
    // Sampled away from its data: the grid has no held-out row, and the codes go to a
    // folder made for them.
    config::AppConfig away = cfg;
    away.data.kind = data::DataKind::image_folder;
    away.data.path = s / "no-such-data";
    so.out = s / "away.png";
    so.tokens_out = s / "codes/away.npy";
    EXPECT_EQ(vqgpt::sample(away, so, comm).codes.size(0), 3);
    // The clip size fixes the token layout the GPT learned: another one is refused.
    config::AppConfig bigger = cfg;
    bigger.data.height = 16;
    EXPECT_TRUE(test::throws_with([&] { vqgpt::sample(bigger, one, comm); }, "data.height"));
  });
  // One rank decodes all three itself: the same frames, rank 1's row in its place.
  comm::run_threads(1, [&](comm::Communicator& comm) {
    vqgpt::SampleOptions so;
    so.num = 3;
    so.quiet = true;
    so.sampling.top_k = 8;
    EXPECT_CLOSE(vqgpt::sample(cfg, so, comm).frames, frames_of_two, 1e-5, 1e-5);
  });
  EXPECT_TRUE(fs::exists(s / "grid.png"));
  EXPECT_FALSE(fs::exists(s / "grid.jpg"));
  EXPECT_TRUE(fs::exists(s / "away.png"));
  EXPECT_TRUE(fs::exists(s / "codes/away.npy"));
  RecordProperty("final_loss", std::to_string(loss));
  RecordProperty("unigram_entropy", std::to_string(entropy));
}

TEST(VqGpt, ResumeSurvivesABrokenLatestAndANewRunDoesNotOverwrite) {
  Scratch s("resume");
  const std::string weights = s / "tokenizer.safetensors";
  config::AppConfig cfg = tiny_config(s / "run");
  nn::save_safetensors(weights, pretrained_tokenizer(cfg));
  cfg.train.steps = 4;
  cfg.train.checkpoint_every = 2;
  cfg.train.keep_checkpoints = 0;
  auto train = [&](const config::AppConfig& c, bool resume, bool overwrite) {
    vqgpt::TrainResult out;
    comm::run_threads(1, [&](comm::Communicator& comm) {
      vqgpt::TrainOptions o;
      o.quiet = true;
      o.tokenizer = weights;
      o.resume = resume;
      o.overwrite = overwrite;
      out = vqgpt::train(c, o, comm);
    });
    return out;
  };
  const vqgpt::TrainResult whole = train(cfg, false, false);
  const std::string ck = s / "run/checkpoints";
  // `latest` garbage and the newest step without meta.json: resume from step 2.
  std::ofstream(ck + "/latest") << "garbage\n";
  fs::remove(ck + "/step_000004/meta.json");
  const vqgpt::TrainResult r = train(cfg, true, false);
  EXPECT_EQ(r.start_step, 2);
  EXPECT_EQ(r.steps, 4);
  // The run's token statistics go on from the checkpoint: as if never interrupted.
  EXPECT_EQ(r.unigram_entropy, whole.unigram_entropy);
  EXPECT_TRUE(fs::exists(ck + "/step_000002/meta.json"));
  EXPECT_TRUE(fs::exists(ck + "/step_000004/meta.json"));
  // A new run into the same folder: refused, nothing deleted; --overwrite starts over.
  config::AppConfig shorter = cfg;
  shorter.train.steps = 2;
  try {
    train(shorter, false, false);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--overwrite"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::exists(ck + "/step_000004/meta.json"));
  train(shorter, false, true);
  EXPECT_FALSE(fs::exists(ck + "/step_000004"));
  EXPECT_EQ(zero::find_checkpoint(ck), ck + "/step_000002");
}

TEST(VqGpt, QuickTokenizerIsTheModelItsConfigDescribes) {
  Scratch s("quick_model");
  config::AppConfig cfg = tiny_config(s / "run");
  cfg.model.l2_norm_codes = true;  // fields that change the model or its training
  cfg.model.out_init_scale = 0.25;
  cfg.model.dropout = 0.125;
  const std::string out = s / "tok";
  comm::run_threads(1, [&](comm::Communicator& comm) {
    const std::string dir = vqgpt::train_quick_tokenizer(cfg, 1, out, comm, true);
    std::ifstream meta(dir + "/meta.json");
    const config::AppConfig saved = config::parse_app_config(
        config::parse_yaml(nlohmann::json::parse(meta).value("config_yaml", "")),
        config::App::vqtok);
    EXPECT_TRUE(saved.model.l2_norm_codes);
    EXPECT_EQ(saved.model.out_init_scale, 0.25);
    EXPECT_EQ(saved.model.dropout, 0.125);
    EXPECT_NO_THROW(vqgpt::load_tokenizer(cfg, out + "/checkpoints", comm));  // the same model
    // The folder it was told to write (gpt.tokenizer_checkpoint, or --out) reads too: its
    // checkpoints are in <out>/checkpoints.
    EXPECT_NO_THROW(vqgpt::load_tokenizer(cfg, out, comm));
  });
}

TEST(VqGpt, QuickTokenizerDoesNotReplaceAnExistingOne) {
  Scratch s("quick");
  const config::AppConfig cfg = tiny_config(s / "run");
  const std::string out = s / "tok";
  comm::run_threads(1, [&](comm::Communicator& comm) {
    vqgpt::train_quick_tokenizer(cfg, 2, out, comm, true);
    try {
      vqgpt::train_quick_tokenizer(cfg, 1, out, comm, true);
      ADD_FAILURE() << "expected an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--overwrite to replace it (the old one is set aside"),
                std::string::npos)
          << e.what();
    }
    EXPECT_TRUE(fs::exists(out + "/checkpoints/step_000002/meta.json"));
    vqgpt::train_quick_tokenizer(cfg, 1, out, comm, true, /*overwrite=*/true);
  });
  EXPECT_FALSE(fs::exists(out + "/checkpoints/step_000002"));
  EXPECT_TRUE(fs::exists(out + "/checkpoints/step_000001/meta.json"));
}

// A tokenizer that is not there is blamed on the option that named it: a --tokenizer path
// is to be checked; the config's key may name one still to be trained.
TEST(VqGpt, AMissingTokenizerNamesTheOptionItCameFrom) {
  Scratch s("tok_source");
  fs::create_directories(s / "empty");
  const config::AppConfig cfg =
      tiny_config(s / "run", "", {"gpt.tokenizer_checkpoint=" + (s / "tok")});
  std::string typed, folder, configured;
  comm::run_threads(1, [&](comm::Communicator& comm) {
    typed = test::error_of([&] { vqgpt::load_tokenizer(cfg, s / "tok.safetensors", comm); });
    folder = test::error_of([&] { vqgpt::load_tokenizer(cfg, s / "empty", comm); });
    configured = test::error_of([&] { vqgpt::load_tokenizer(cfg, "", comm); });
  });
  for (const std::string& e : {typed, folder}) {
    EXPECT_NE(e.find("(--tokenizer)"), std::string::npos) << e;
    EXPECT_NE(e.find("check the path: --tokenizer takes a vqtok checkpoint"), std::string::npos)
        << e;
    EXPECT_EQ(e.find("gpt.tokenizer_checkpoint"), std::string::npos) << e;
    EXPECT_EQ(e.find("train one first"), std::string::npos) << e;
  }
  EXPECT_NE(typed.find("no tokenizer at '" + (s / "tok.safetensors") + "'"), std::string::npos);
  EXPECT_NE(folder.find("' (--tokenizer) holds no vqtok checkpoint"), std::string::npos) << folder;
  EXPECT_NE(configured.find("no tokenizer at '" + (s / "tok") +
                            "' (gpt.tokenizer_checkpoint); train one first"),
            std::string::npos)
      << configured;
}
