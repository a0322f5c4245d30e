// The GPT's initialization and the sampler's edges (apps/vqgpt).
//  1. vqgpt::build_gpt gives GPT-2's initialization: every Linear and Embedding weight
//     N(0, 0.02), the projections that end a residual branch N(0, 0.02 / sqrt(2 n_layer)),
//     biases 0, LayerNorms 1 and 0; with tied embeddings the token table and the position
//     table start at the same scale. Built partitioned on two ranks, module by module, it
//     holds exactly the values a whole model on one rank gets.
//  2. Sampling refuses non-finite logits (a diverged model) instead of drawing a fixed
//     code, and top-k keeps every code tied with the k-th largest logit.
//  3. The Emu3 token layout the samples follow: BOS, rows of codes each closed by EOL, EOS,
//     built alike by the host loop and by tensor ops on the device.
#include <cmath>
#include <map>
#include <set>

#include "apps/vqgpt/vqgpt_app.h"
#include "common/test_util.h"

using namespace zt;

namespace {

gpt::GptSpec small_spec() {
  return {.vocab_size = 300, .block_size = 40, .n_layer = 3, .n_head = 2, .n_embd = 64};
}

// Every parameter of a Gpt built with build_gpt on `ranks` thread ranks, whole, by name.
std::map<std::string, Tensor> built_parameters(const gpt::GptSpec& spec, int ranks) {
  std::map<std::string, Tensor> out;
  comm::run_threads(ranks, [&](comm::Communicator& comm) {
    manual_seed(5);
    std::shared_ptr<gpt::Gpt> g = vqgpt::build_gpt(spec, comm, Device::cpu());
    zero::GatheredParameters whole(*g, comm);
    if (comm.rank() == 0)
      for (const auto& [name, p] : g->named_parameters()) out[name] = p.clone();
  });
  return out;
}

double std_of(const Tensor& t) {
  return std::sqrt(var(t.reshape({-1}), {0}).item());
}

}  // namespace

TEST(GptInit, Gpt2ScalesOnOneRankAndTheSameValuesOnTwo) {
  const gpt::GptSpec spec = small_spec();
  const std::map<std::string, Tensor> one = built_parameters(spec, 1);
  const double residual = 0.02 / std::sqrt(2.0 * static_cast<double>(spec.n_layer));
  int residual_ends = 0;
  for (const auto& [name, p] : one) {
    const bool is_bias = name.ends_with(".bias");
    if (name.starts_with("ln_") || name.find(".ln_") != std::string::npos) {
      EXPECT_EQ(max(abs(p - (is_bias ? 0.0 : 1.0))).item(), 0.0) << name;
    } else if (is_bias) {
      EXPECT_EQ(max(abs(p)).item(), 0.0) << name;
    } else {
      const bool ends_residual =
          name.ends_with("attn.out_proj.weight") || name.ends_with("mlp.proj.weight");
      residual_ends += ends_residual;
      // Thousands of draws each: the sample std is within 10% of the one drawn from.
      EXPECT_NEAR(std_of(p), ends_residual ? residual : 0.02,
                  0.1 * (ends_residual ? residual : 0.02))
          << name;
      EXPECT_NEAR(mean(p).item(), 0.0, 0.005) << name;
    }
  }
  EXPECT_EQ(residual_ends, 2 * spec.n_layer);

  const std::map<std::string, Tensor> two = built_parameters(spec, 2);
  ASSERT_EQ(two.size(), one.size());
  for (const auto& [name, p] : one) EXPECT_CLOSE(two.at(name), p, 0.0, 0.0) << name;
}

TEST(GptInit, TiedTokenAndPositionTablesStartAtOneScale) {
  gpt::GptSpec spec = small_spec();
  spec.tie_embeddings = true;
  const std::map<std::string, Tensor> p = built_parameters(spec, 2);
  ASSERT_EQ(p.count("head.weight"), 0u) << "listed once, as wte.weight";
  EXPECT_NEAR(std_of(p.at("wte.weight")), 0.02, 0.002);
  EXPECT_NEAR(std_of(p.at("wpe.weight")), 0.02, 0.002);
}

namespace {
const gpt::TokenLayout kLayout(6, 1, 1, 2);  // codes 0..5, BOS 6, EOL 7, EOS 8: 2 codes a clip

// Next-token logits that are `row` (over the 9 ids) for every sequence and position.
gpt::NextLogits constant_logits(std::vector<double> row) {
  return [row = std::move(row)](const Tensor& prefix) {
    return from_vector(row, {1, static_cast<int64_t>(row.size())})
        .expand({prefix.size(0), static_cast<int64_t>(row.size())});
  };
}
}  // namespace

TEST(GptSampling, NonFiniteLogitsAreAnErrorNotAFixedCode) {
  gpt::SampleOptions o;
  for (double bad : {NAN, INFINITY}) {
    EXPECT_TRUE(test::throws_with(
        [&] {
          gpt::sample_sequences(constant_logits({0, 1, bad, 0, 0, 0, 0, 0, 0}), kLayout, 2, o);
        },
        "the logit of code 2 is"))
        << bad;
    o.top_k = 2;
  }
}

TEST(GptSampling, TopKKeepsEveryCodeTiedWithTheKthLogit) {
  gpt::SampleOptions o;
  o.top_k = 1;
  o.seed = 3;
  // Codes 1 and 4 tie for the largest logit; top-1 keeps both, each drawn about half the time.
  const Tensor seq =
      gpt::sample_sequences(constant_logits({0, 2, 1, 0, 2, -1, 5, 5, 5}), kLayout, 400, o);
  std::map<int64_t, int> counts;
  const std::vector<double> ids = seq.to_vector();
  for (int64_t i = 0; i < 400; ++i)
    for (int64_t pos = 1; pos < kLayout.length(); ++pos)
      if (kLayout.fixed_token(pos) < 0)
        ++counts[static_cast<int64_t>(ids[i * kLayout.length() + pos])];
  EXPECT_EQ(counts.size(), 2u) << "only the two tied codes";
  EXPECT_GT(counts[1], 300);  // of 800 draws: 400 expected, sd 14
  EXPECT_GT(counts[4], 300);
}

// Sequence i draws from its own place in the seed's stream (first_row + i): sampled with
// others or alone, by one rank or split over several, it is the same. Uniform logits
// make every draw count.
TEST(GptSampling, ASequenceIsTheSameWhateverIsSampledBesideIt) {
  const gpt::NextLogits flat = constant_logits({0, 0, 0, 0, 0, 0, 0, 0, 0});
  gpt::SampleOptions o;
  o.seed = 11;
  const Tensor all = gpt::sample_sequences(flat, kLayout, 6, o);
  o.first_row = 4;  // the last two, as a second rank would sample them
  const Tensor last = gpt::sample_sequences(flat, kLayout, 2, o);
  EXPECT_CLOSE(last, all.narrow(0, 4, 2), 0, 0);
  EXPECT_FALSE(test::all_close(all.narrow(0, 0, 2), last, 0, 0)) << "other rows differ";
}

TEST(VqGptLayout, Emu3RowsWithEndOfRowTokens) {
  gpt::TokenLayout layout(10, 1, 2, 3);  // K = 10, one frame of 2 x 3 codes
  EXPECT_EQ(layout.length(), 2 + 2 * 4);
  Tensor codes = from_vector({1, 2, 3, 4, 5, 6}, {1, 1, 2, 3}, DType::i64);
  Tensor seq = layout.sequence(codes);
  EXPECT_TRUE(test::values_are(seq, {10, 1, 2, 3, 11, 4, 5, 6, 11, 12}));
  EXPECT_TRUE(test::values_are(layout.codes(seq), codes.to_vector()));
  Tensor bad = seq.clone();
  bad.data<int64_t>()[4] = 7;  // a code where EOL belongs
  EXPECT_THROW(layout.codes(bad), Error);
}

// On a GPU the sequences are built by tensor ops where the codes are (nothing read back);
// on the CPU those ops give exactly the host loop's sequences, for clips and images.
TEST(VqGptLayout, TensorOpsBuildTheHostLoopsSequences) {
  Generator g(5);
  for (const auto& [t, shape] :
       std::vector<std::pair<int64_t, Shape>>{{2, {3, 2, 2, 3}}, {1, {4, 2, 3}}}) {
    gpt::TokenLayout layout(10, t, 2, 3);
    Tensor codes = randint(0, 10, shape, g);
    Tensor by_ops = layout.sequence_on_device(codes);
    EXPECT_EQ(by_ops.sizes(), (Shape{shape[0], layout.length()}));
    EXPECT_TRUE(test::values_are(by_ops, layout.sequence(codes).to_vector()));
    EXPECT_TRUE(test::values_are(layout.codes(by_ops), codes.to_vector()));
  }
}
