// vqgpt: building the {tokenizer, gpt} model, loading the frozen tokenizer, sampling and
// export (the training loop is in gpt_train.cpp).
//
// The tokenizer is never partitioned: it is built in a zero::Replicated scope, frozen,
// and its weights are read on rank 0 only, then broadcast by zero::load_state_dict — so
// a loader that filled only rank 0 (the classic ZeRO-3 bug) still gives identical
// replicas, and each tokenizer call is a plain local forward.
#include "apps/vqgpt/vqgpt_app.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>

#include <unistd.h>

#include "apps/common/host_memory.h"
#include "apps/common/output_paths.h"
#include "apps/common/run_checks.h"
#include "apps/common/saved_run.h"
#include "apps/vqtok/vqtok_app.h"
#include "core/ascii.h"
#include "core/ops.h"
#include "core/plural.h"
#include "core/text_file.h"
#include "data/caption.h"
#include "data/factory.h"
#include "data/image.h"
#include "data/npy.h"
#include "zero/checkpoint.h"

namespace zt::vqgpt {

namespace {

namespace fs = std::filesystem;

// How to get a tokenizer: train one with vqtok, or let vqgpt train a quick one.
const std::string kTrainWithVqtok =
    "train one first:\n"
    "  vqtok train --config configs/vqtok_tiny.yaml --ranks 2   (writes "
    "runs/vqtok_tiny/checkpoints)\n";
// Where no tokenizer is named at all: `vqgpt tokenizer` then needs --out, and the run the
// folder it writes.
const std::string kHowToTrainUnnamed =
    kTrainWithVqtok +
    "or let vqgpt train a quick one:\n"
    "  vqgpt tokenizer --config <this config> --out DIR --steps 200   (writes DIR/checkpoints)\n"
    "then set gpt.tokenizer_checkpoint to that checkpoints folder, or pass it as --tokenizer";
// Where the config names a tokenizer still to be trained.
const std::string kHowToTrain =
    kTrainWithVqtok +
    "or let vqgpt train a quick one into gpt.tokenizer_checkpoint:\n"
    "  vqgpt tokenizer --config <this config> --steps 200\n"
    "or pass --tokenizer with a vqtok checkpoint directory or an exported .safetensors file "
    "(vqtok export)";

const char* kCheckTheTokenizerPath =
    "check the path: --tokenizer takes a vqtok checkpoint directory (a run's "
    "output_dir/checkpoints, or the run folder) or an exported .safetensors file (vqtok export)";

// A vqtok checkpoint's own configuration (the YAML recorded in its meta.json).
config::AppConfig checkpoint_config(const std::string& dir) {
  const app::SavedRun run = app::read_saved_run(dir);
  ZT_CHECK(run.app != "vqgpt", "'", dir,
           "' is a vqgpt checkpoint; the tokenizer must come from a vqtok checkpoint "
           "(or an exported .safetensors file)");
  ZT_CHECK(!run.config_yaml.empty(), "'", run.dir,
           "/meta.json' records no configuration; export the tokenizer (vqtok export) and pass "
           "the .safetensors file instead");
  return app::saved_config(run, config::App::vqtok);
}

}  // namespace

// ---- the root module

VqGptModel::VqGptModel(std::shared_ptr<vq::VqModel> tok, std::shared_ptr<gpt::Gpt> g,
                       gpt::TokenLayout layout)
    : Module("VqGptModel"), layout_(layout) {
  ZT_CHECK(tok && g, "VqGptModel: tokenizer and gpt must be built");
  ZT_CHECK(g->spec().vocab_size >= layout.min_vocab(), "VqGptModel: the gpt's vocabulary (",
           g->spec().vocab_size, ") does not hold codes + BOS/EOL/EOS (", layout.min_vocab(), ")");
  tokenizer = register_module("tokenizer", std::move(tok));
  gpt = register_module("gpt", std::move(g));
  tokenizer->eval();
}

void VqGptModel::train(bool on) {
  Module::train(on);
  tokenizer->eval();  // frozen: BatchNorm keeps its running statistics
}

Device VqGptModel::device() const {
  return tokenizer->parameters().front().device();
}

Tensor VqGptModel::tokenize(const Tensor& clips) {
  const Device dev = device();
  return gpt::tokenize(*tokenizer, clips.to(dev), layout_).to(dev);
}

std::pair<Tensor, Tensor> VqGptModel::logits_and_targets(const Tensor& sequences) {
  const Tensor seq = sequences.to(device());
  const int64_t n = seq.size(1) - 1;
  Tensor inputs = seq.narrow(1, 0, n).contiguous();
  return {(*gpt)(inputs), seq.narrow(1, 1, n).contiguous()};  // (B, L - 1, V), (B, L - 1)
}

Tensor VqGptModel::loss(const Tensor& sequences) {
  // The GPT's forward is the step's activations, as under Engine::forward (training calls
  // this directly: the tokens come first, without a graph).
  MemTagScope tag(MemTag::kActivation);
  const auto [logits, targets] = logits_and_targets(sequences);
  const int64_t rows = targets.numel();
  return cross_entropy(logits.reshape({rows, logits.size(2)}), targets.reshape({rows}));
}

Tensor VqGptModel::sequence_losses(const Tensor& sequences) {
  MemTagScope tag(MemTag::kActivation);
  const auto [logits, targets] = logits_and_targets(sequences);
  std::vector<Tensor> each;
  for (int64_t i = 0; i < targets.size(0); ++i)
    each.push_back(cross_entropy(logits.select(0, i), targets.select(0, i)).reshape({1}));
  return cat(each, 0);
}

std::vector<Tensor> VqGptModel::forward(const std::vector<Tensor>& inputs) {
  ZT_CHECK(inputs.size() == 1, "VqGptModel: expected {clips}, got ", inputs.size(), " inputs");
  Tensor seq = tokenize(inputs[0]);
  return {loss(seq), seq};
}

// ---- building

std::string tokenizer_source(const config::AppConfig& cfg, const std::string& source) {
  return source.empty() ? cfg.gpt.value_or(config::GptConfig{}).tokenizer_checkpoint : source;
}

std::string tokenizer_key(const std::string& source) {
  return source.empty() ? "gpt.tokenizer_checkpoint" : "--tokenizer";
}

config::AppConfig with_tokenizer(const config::AppConfig& cfg, const std::string& path) {
  config::AppConfig out = cfg;
  if (out.gpt) out.gpt->tokenizer_checkpoint = path;
  if (!cfg.root) return out;
  out.root = config::parse_yaml(cfg.root.dump(), cfg.source);
  config::apply_override(out.root, "gpt.tokenizer_checkpoint=" + config::yaml_quoted(path));
  return out;
}

std::string recorded_tokenizer(const std::string& config_yaml) {
  const config::Node gpt = config::parse_yaml(config_yaml, "the checkpoint's config_yaml")["gpt"];
  const config::Node path = gpt.is_map() ? gpt["tokenizer_checkpoint"] : config::Node{};
  return path.is_scalar() ? path.as_string() : "";
}

std::shared_ptr<vq::VqModel> load_tokenizer(const config::AppConfig& cfg, const std::string& source,
                                            comm::Communicator& comm, Device device) {
  std::string path = tokenizer_source(cfg, source);
  const std::string key = tokenizer_key(source);
  ZT_CHECK(!path.empty(), "vqgpt: no tokenizer given (", key, " is not set); ", kHowToTrainUnnamed);
  // A path typed for this run is most likely mistyped; the config's may name a tokenizer
  // that is still to be trained.
  const std::string advice = source.empty() ? kHowToTrain : std::string(kCheckTheTokenizerPath);
  if (fs::is_regular_file(path) && fs::path(path).filename() == "latest")
    path = fs::path(path).parent_path().string();  // ".../checkpoints/latest" names the root
  ZT_CHECK(fs::exists(path), "vqgpt: no tokenizer at '", path, "' (", key, "); ", advice);
  // A tokenizer's run folder (what `vqgpt tokenizer` makes of a path not ending in
  // "checkpoints"): its checkpoints are in <path>/checkpoints.
  if (const std::string run = app::run_checkpoints(path); !run.empty()) path = run;
  config::AppConfig tok_cfg = cfg;
  if (fs::is_directory(path)) {
    ZT_CHECK(zero::has_checkpoint(path), "vqgpt: '", path, "' (", key,
             ") holds no vqtok checkpoint (no meta.json, no 'latest'); ", advice);
    // Load with the tokenizer's own settings (optimizer kind, ZeRO), but check that it
    // is the model this config describes.
    tok_cfg = checkpoint_config(zero::find_checkpoint(path));
    const std::vector<app::KeyChange> diff =
        app::model_changes(tok_cfg.model, cfg.model, /*weights_only=*/true);
    ZT_CHECK(diff.empty(), "vqgpt: the tokenizer at '", path, "' (", key,
             ") was trained with a different model (",
             app::describe(diff, "the tokenizer's config", "this config"),
             "); copy its model section into this config");
  }
  tok_cfg.replicated.clear();
  tok_cfg.gpt.reset();
  tok_cfg.warnings.clear();  // about the tokenizer's training, said when it trained
  tok_cfg.training_warnings.clear();
  return vqtok::load_frozen_model(tok_cfg, path, comm, device);
}

std::shared_ptr<vq::VqModel> random_tokenizer(const config::AppConfig& cfg,
                                              comm::Communicator& comm, Device device) {
  return vqtok::frozen_replica(cfg.model, device, comm);
}

std::shared_ptr<gpt::Gpt> build_gpt(const gpt::GptSpec& spec, comm::Communicator& comm,
                                    Device device, bool replicated) {
  const auto init = [n_layer = spec.n_layer](const std::string& name, nn::Module& m) {
    gpt::init_gpt2(name, m, n_layer);
  };
  app::check_host_can_build(spec.count_parameters(), replicated, device, comm, "the GPT");
  std::shared_ptr<gpt::Gpt> g;
  {
    // At registration, onto the device: no rank (and on a GPU, not the host) ever holds
    // the whole model.
    zero::Init partitioned(comm, device);
    std::optional<zero::Replicated> replicas;
    if (replicated) replicas.emplace(comm, device);
    g = std::make_shared<gpt::Gpt>(spec);
  }
  zero::apply_gathered(*g, comm, init);  // GPT-2's initialization, one module at a time
  return g;
}

std::shared_ptr<VqGptModel> build_model(const config::AppConfig& cfg,
                                        std::shared_ptr<vq::VqModel> tokenizer,
                                        comm::Communicator& comm, bool replicated_gpt) {
  manual_seed(static_cast<uint64_t>(cfg.train.seed));
  const Device device = tokenizer->parameters().front().device();  // the GPT goes there too
  std::shared_ptr<gpt::Gpt> g = build_gpt(gpt::gpt_spec(cfg), comm, device, replicated_gpt);
  app::checkpoint_activations(*g, cfg.train, {"GptBlock"});
  app::seed_dropout(cfg.train, comm);
  return std::make_shared<VqGptModel>(std::move(tokenizer), std::move(g),
                                      gpt::TokenLayout::of(cfg));
}

std::unique_ptr<zero::Engine> make_engine(std::shared_ptr<VqGptModel> model,
                                          const config::AppConfig& cfg, comm::Communicator& comm,
                                          app::EngineUse use, bool quiet) {
  return app::make_engine(std::move(model), cfg, comm, use, quiet);
}

// ---- sample / export

std::string checkpoint_root(const config::AppConfig& cfg) {
  return (fs::path(cfg.output_dir) / "checkpoints").string();
}

namespace {

// What sample and export read (outputs must not be among them): the config, the vqgpt
// checkpoint (`checkpoint`, or output_dir/checkpoints) and the tokenizer it names.
std::vector<std::string> read_by_run(const config::AppConfig& cfg, const std::string& checkpoint) {
  std::vector<std::string> inputs = app::config_inputs(cfg);
  inputs.insert(inputs.end(), {checkpoint.empty() ? checkpoint_root(cfg) : checkpoint,
                               tokenizer_source(cfg, "")});
  return inputs;
}

// The model and engine restored from a vqgpt checkpoint (tokenizer included), for the
// command `what`; `dtype_advice` as check_checkpoint_app's (neither command reads an export).
std::pair<std::shared_ptr<VqGptModel>, std::unique_ptr<zero::Engine>> load_run(
    const config::AppConfig& cfg, const std::string& checkpoint, comm::Communicator& comm,
    const char* what, const char* dtype_advice, int64_t* step = nullptr) {
  const std::string dir = checkpoint.empty() ? checkpoint_root(cfg) : checkpoint;
  ZT_CHECK(zero::has_checkpoint(dir), what, ": no vqgpt checkpoint at '", dir, "'",
           app::run_folder_hint(dir),
           "; train first (vqgpt train --config ...) or pass --checkpoint with a checkpoint "
           "directory or a run's output_dir/checkpoints");
  app::check_checkpoint_app(dir, "vqgpt", comm, &cfg, dtype_advice);
  const Device device = app::train_device(cfg.train, comm, what);
  auto model = build_model(cfg, random_tokenizer(cfg, comm, device), comm);
  auto engine = make_engine(model, cfg, comm, app::EngineUse::reading_weights);
  // The model alone (the tokenizer's weights and buffers come along); any optimizer's run.
  const int64_t saved_step = zero::load_checkpoint(*engine, dir, /*optimizer_state=*/false).step;
  if (step) *step = saved_step;
  return {model, std::move(engine)};
}

// images (n, 3, H, W) -> (rows, cols, 3, H, W), padded with grey, for a square grid.
Tensor square_grid(const Tensor& images) {
  const int64_t n = images.size(0);
  const auto cols = static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(n))));
  const int64_t rows = (n + cols - 1) / cols;
  Tensor all = zeros({rows * cols, images.size(1), images.size(2), images.size(3)});
  all.narrow(0, 0, n).copy_(images);
  return all.view({rows, cols, images.size(1), images.size(2), images.size(3)});
}

// What the sheet's row of data under the samples is: the eval items of the config's data,
// which without data.eval_path an image folder or npy file draws from its training data.
static std::string sheet_data(const config::AppConfig& cfg) {
  return data::eval_held_out(cfg.data) ? "held-out data" : "training data";
}

// What the sample sheet shows, in words (its captions say the same): the row of data only
// where the sheet has one (`with_refs`; none where the data could not be read).
std::string sheet_legend(const config::AppConfig& cfg, int64_t num, bool with_refs) {
  const bool images = cfg.data.frames == 1;
  const std::string refs =
      with_refs ? "; below them, " + sheet_data(cfg) + (images ? " frames" : " clips") +
                      (data::eval_held_out(cfg.data) ? "" : " (data.eval_path is not set)") +
                      " encoded and decoded by the same tokenizer, for comparison"
                : "; no held-out data below them (the config's data could not be read)";
  if (images) {
    const auto cols = static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(num))));
    return "grid: " + counted(num, "sampled frame") + ", " + std::to_string(cols) +
           " per row (left to right, then top to bottom)" + refs;
  }
  return "grid: one sampled clip per row (" + std::to_string(num) + " rows), its " +
         counted(cfg.data.frames, "frame") + " left to right" + refs;
}

// Up to 4 eval clips of the config's data (2 for videos), as the sample sheet shows
// them under the samples; none, with a note on stderr, when the data cannot be read (a
// checkpoint sampled away from its data): the samples matter more than the comparison.
std::vector<Tensor> reference_clips(const config::AppConfig& cfg, bool quiet) {
  std::vector<Tensor> clips;
  try {
    auto eval_set = data::make_dataset(cfg.data, /*eval=*/true);
    const int64_t refs = std::min<int64_t>(cfg.data.frames == 1 ? 4 : 2, eval_set->size());
    for (int64_t i = 0; i < refs; ++i) clips.push_back(eval_set->get(i).clip);
  } catch (const std::exception& e) {
    if (!quiet)
      std::fprintf(stderr, "sample: note: the grid has no row of held-out data: %s\n", e.what());
    clips.clear();
  }
  return clips;
}

// The sample sheet: the decoded samples under a caption, then `refs` (eval clips)
// through the tokenizer, what a perfect GPT's samples would look like.
data::Image sample_sheet(const config::AppConfig& cfg, vq::VqModel& tokenizer, const Tensor& frames,
                         const std::vector<Tensor>& refs, const gpt::SampleOptions& so) {
  const bool images = cfg.data.frames == 1;
  char params[64];
  std::snprintf(params, sizeof params, "T=%G TOP-K %s", so.temperature,  // as the run printed it
                so.top_k > 0 ? std::to_string(so.top_k).c_str() : "ALL");
  const std::string what = images ? "SAMPLED FRAMES" : "SAMPLED CLIPS, ONE PER ROW, FRAMES L TO R";
  const data::Image samples = data::with_caption(
      data::make_grid({images ? square_grid(frames) : frames}), what + " (" + params + ")");
  if (refs.empty()) return samples;
  const Device device = tokenizer.parameters().front().device();
  Tensor data = stack(refs, 0).to(device);  // (refs, T, 3, H, W)
  Tensor recon = tokenizer.decode_codes(tokenizer.encode(data).codes).to(Device::cpu());
  if (images) recon = recon.select(1, 0);
  const data::Image reference =
      data::with_caption(data::make_grid({images ? recon.unsqueeze(0) : recon}),
                         sheet_data(cfg) + " via tokenizer");  // the font prints upper case
  return data::stack_images({samples, reference});
}

// The decoded frames of all of `codes` (n, T', h, w) on rank 0, which writes them, in
// [-1, 1]: images (n, 3, H, W) or clips (n, T' x temporal factor, 3, H, W); the other ranks
// return none (0 rows). The tokenizer is a replica on every rank: rank r decodes its rows
// [r x per, (r + 1) x per), train.batch at a time (a whole sample set at once would hold
// every clip's activations), and broadcasts them to rank 0 in turn, so a rank other than 0
// holds its own rows and one rank's in transit, never the whole set (64 Emu3-sized clips
// are about 0.8 GB).
Tensor decode_rows(vq::VqModel& tokenizer, const Tensor& codes, const config::AppConfig& cfg,
                   int64_t per, comm::Communicator& comm) {
  const bool images = cfg.data.frames == 1;
  const int64_t n = codes.size(0), s = cfg.model.spatial_factor();
  Shape shape = {n, 3, codes.size(2) * s, codes.size(3) * s};
  if (!images)
    shape.insert(shape.begin() + 1, codes.size(1) * cfg.model.temporal_downsample_factor);
  auto rows = [&](Shape sized, int64_t count) {
    sized[0] = count;
    return zeros(sized);
  };
  auto first_of = [&](int r) { return std::min<int64_t>(n, r * per); };
  auto count_of = [&](int r) { return std::min<int64_t>(n - first_of(r), per); };
  const int rank = comm.rank();
  Tensor all = rows(shape, rank == 0 ? n : 0);
  Tensor mine = rank == 0 ? all.narrow(0, first_of(0), count_of(0)) : rows(shape, count_of(rank));
  const Device device = tokenizer.parameters().front().device();
  for (int64_t i = 0; i < mine.size(0); i += cfg.train.batch) {
    const int64_t b = std::min(cfg.train.batch, mine.size(0) - i);
    const Tensor c = codes.narrow(0, first_of(rank) + i, b).to(device);
    mine.narrow(0, i, b).copy_(images ? tokenizer.decode_codes(c.select(1, 0))
                                      : tokenizer.decode_codes(c));
  }
  Tensor in_transit;  // another rank's rows, passing a rank that is neither 0 nor theirs
  for (int r = 1; r < comm.size() && count_of(r) > 0; ++r) {
    Tensor t;
    if (rank == 0) {
      t = all.narrow(0, first_of(r), count_of(r));
    } else if (rank == r) {
      t = mine;
    } else {
      if (!in_transit.defined()) in_transit = rows(shape, per);
      t = in_transit.narrow(0, 0, count_of(r));
    }
    app::broadcast_host(comm, t, r);
  }
  return all;
}

}  // namespace

nlohmann::json EvalResult::json() const {
  return {{"kind", "eval"}, {"step", step}, {"loss", loss}};
}

EvalResult evaluate_checkpoint(const config::AppConfig& cfg, const std::string& checkpoint,
                               comm::Communicator& comm) {
  app::check_same_options({{"--checkpoint", checkpoint}}, comm, "vqgpt eval");
  auto dataset =
      data::make_dataset(cfg.data, /*eval=*/true, app::scored_eval_items(cfg, comm.size()));
  app::check_same_data(*dataset, comm, "vqgpt eval");
  if (comm.rank() == 0 && !data::eval_held_out(cfg.data))
    std::fprintf(stderr, "vqgpt eval: note: eval split: %s\n",
                 data::describe_eval(cfg.data, *dataset).c_str());
  auto loader = data::make_loader(dataset, cfg.data, cfg.train.batch, comm.rank(), comm.size(),
                                  /*eval=*/true);
  EvalResult r;
  auto [model, engine] = load_run(cfg, checkpoint, comm, "eval", "", &r.step);
  model->eval();
  r.loss = evaluate(*model, *loader, cfg.train.eval_batches, comm);
  return r;
}

SampleResult sample(const config::AppConfig& cfg, const SampleOptions& o,
                    comm::Communicator& comm) {
  ZT_CHECK(o.num >= 1, "sample: --num must be at least 1, got ", o.num);
  char temperature[32];  // the shortest text that reads back as the same double
  *std::to_chars(temperature, temperature + sizeof temperature - 1, o.sampling.temperature).ptr =
      '\0';
  app::check_same_options({{"--checkpoint", o.checkpoint},
                           {"--num", std::to_string(o.num)},
                           {"--temperature", temperature},
                           {"--top-k", std::to_string(o.sampling.top_k)},
                           {"--seed", std::to_string(o.sampling.seed)}},
                          comm, "vqgpt sample");
  const std::string ext = ascii_lower(fs::path(o.out).extension().string());
  ZT_CHECK(o.out.empty() || ext == ".png", "sample: the grid is written as a PNG image, so --out ",
           "must end in .png, got '", o.out, "'");
  const std::vector<std::string> inputs = read_by_run(cfg, o.checkpoint);
  std::vector<Tensor> refs;
  app::check_on_rank0(comm, [&] {
    app::check_output_writable("sample --out", o.out, inputs);
    std::error_code ec;
    ZT_CHECK(o.out.empty() || o.tokens_out.empty() ||
                 fs::weakly_canonical(fs::absolute(o.out), ec) !=
                     fs::weakly_canonical(fs::absolute(o.tokens_out), ec),
             "sample --tokens '", o.tokens_out, "' is the grid's file (--out '", o.out,
             "'); pass another");
    app::check_output_writable("sample --tokens", o.tokens_out, inputs);
    if (!o.out.empty()) refs = reference_clips(cfg, o.quiet);  // before the sampling, not after
  });
  auto [model, engine] = load_run(cfg, o.checkpoint, comm, "sample", "");
  model->eval();
  const gpt::TokenLayout& layout = model->layout();
  const int world = comm.size(), rank = comm.rank();
  // Every rank samples the same number of sequences (ZeRO-3 forwards are collective);
  // rank r keeps rows [r * per, (r + 1) * per) of the result.
  const int64_t per = (o.num + world - 1) / world;
  gpt::SampleOptions so = o.sampling;
  so.first_row = rank * per;
  autograd::NoGradGuard no_grad;
  const Device device = model->device();
  Tensor mine =
      gpt::sample_sequences(gpt::cached_next_logits(*model->gpt, device), layout, per, so);
  SampleResult r;
  r.sequences = zeros({o.num, layout.length()}, DType::i64);
  const int64_t first = std::min<int64_t>(o.num, so.first_row);
  const int64_t count = std::min<int64_t>(o.num - first, per);
  if (count > 0) r.sequences.narrow(0, first, count).copy_(mine.narrow(0, 0, count));
  if (world > 1) {  // host tensors: through the GPU under NCCL
    Tensor flat = r.sequences.view({r.sequences.numel()});
    app::all_reduce_host(comm, flat, comm::ReduceOp::kSum);
  }
  r.codes = layout.codes(r.sequences);
  r.frames = decode_rows(*model->tokenizer, r.codes, cfg, per, comm);
  if (rank == 0 && !o.out.empty()) r.legend = sheet_legend(cfg, o.num, !refs.empty());
  if (rank == 0) {  // after the last collective
    // The sheet is made before anything is written. Then both files, or neither: the codes
    // are written in full to their temporary, the grid replaced while they wait there, and
    // the codes renamed into place after it (a grid that cannot be written leaves the
    // earlier codes, not new ones beside the earlier grid that would pass for their images).
    std::vector<uint8_t> png;
    if (!o.out.empty())
      png = data::encode_png(sample_sheet(cfg, *model->tokenizer, r.frames, refs, o.sampling));
    const auto write_grid = [&] {
      if (o.out.empty()) return;
      app::make_parent_folders(o.out);
      write_file_atomically(o.out,
                            [&](std::FILE* f) { return write_all(f, png.data(), png.size()); });
    };
    if (o.tokens_out.empty()) {
      write_grid();
    } else {
      app::make_parent_folders(o.tokens_out);
      const std::string header = data::npy_header(DType::i64, r.codes.sizes());
      write_file_atomically(o.tokens_out, [&](std::FILE* f) {
        if (!write_all(f, header.data(), header.size()) ||
            !write_all(f, r.codes.data_ptr(),
                       static_cast<size_t>(r.codes.numel()) * sizeof(int64_t)) ||
            std::fflush(f) != 0 || ::fsync(::fileno(f)) != 0)
          return false;
        write_grid();
        return true;
      });
    }
    if (!o.quiet) {
      std::printf("sample: %s of %lld tokens (temperature %g, top-k %s) -> %s%s%s\n",
                  counted(o.num, "sequence").c_str(), static_cast<long long>(layout.length()),
                  o.sampling.temperature,
                  o.sampling.top_k > 0 ? std::to_string(o.sampling.top_k).c_str() : "off",
                  o.out.empty() ? "(no image)" : o.out.c_str(), o.tokens_out.empty() ? "" : ", ",
                  o.tokens_out.c_str());
      if (!o.out.empty()) std::printf("%s\n", r.legend.c_str());
      std::fflush(stdout);
    }
  }
  return r;
}

void export_model(const config::AppConfig& cfg, const std::string& checkpoint,
                  const std::string& out, comm::Communicator& comm, bool quiet) {
  ZT_CHECK(!out.empty(), "export: pass --out with the .safetensors file to write");
  app::check_same_options({{"--checkpoint", checkpoint}}, comm, "vqgpt export");
  const std::vector<std::string> inputs = read_by_run(cfg, checkpoint);
  app::check_on_rank0(comm, [&] { app::check_output_writable("export -o", out, inputs); });
  // On the CPU, as vqtok export: the ranks of a CPU launch (--ranks, mpirun) hold no GPU.
  config::AppConfig on_cpu = cfg;
  on_cpu.train.device = "cpu";
  auto [model, engine] = load_run(on_cpu, checkpoint, comm, "export", app::kExportIsFp32);
  app::export_engine(*engine, out, comm);
  if (comm.rank() == 0 && !quiet)
    std::printf(
        "export: %s -> %s (%zu tensors: tokenizer.* and gpt.*, fp32)\n",
        zero::find_checkpoint(checkpoint.empty() ? checkpoint_root(cfg) : checkpoint).c_str(),
        out.c_str(), nn::state_dict(*model).size());
}

}  // namespace zt::vqgpt
