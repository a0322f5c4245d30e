// vqgpt train: the Gpt trained with ZeRO-3 on tokens the frozen tokenizer makes on the fly.
// Per step: lr from the plan; for each of gradient_accumulation_steps micro-batches of
// train.batch clips per rank, tokenize (timed: the tokenizer's share of the step), then
// next-token cross-entropy over the sequence and the engine's backward; then the engine's
// step (reduce-scatter, clipping, AdamW on fp32 shards, buffer policy, and every
// buffers.verify_every steps the replica check of the tokenizer's parameters and buffers).
// Every log_every steps the window's means are reduced across ranks; rank 0 prints them
// and appends them to metrics.jsonl.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>

#include "apps/common/ordered_sums.h"
#include "apps/common/run_checkpoints.h"
#include "apps/common/run_checks.h"
#include "apps/common/saved_run.h"
#include "apps/common/step_log.h"
#include "apps/common/stop_signal.h"
#include "apps/vqgpt/vqgpt_app.h"
#include "core/ops.h"
#include "core/plural.h"
#include "core/span_timer.h"
#include "core/step_graph.h"
#include "data/factory.h"
#include "zero/checkpoint.h"

namespace zt::vqgpt {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// Every rank's histogram (f64 counts on any device) summed on the host; the local one is
// left as is.
Tensor summed_histogram(const Tensor& local, comm::Communicator& comm) {
  Tensor t = local.to(Device::cpu()).clone();
  app::all_reduce_host(comm, t, comm::ReduceOp::kSum);
  return t;
}

// Entropy of the summed histograms of every rank.
double global_entropy(const Tensor& local, comm::Communicator& comm) {
  std::vector<int64_t> counts;
  for (double c : summed_histogram(local, comm).to_vector())
    counts.push_back(static_cast<int64_t>(c));
  return gpt::unigram_entropy(counts);
}

}  // namespace

double evaluate(VqGptModel& model, data::DataLoader& loader, int64_t batches,
                comm::Communicator& comm) {
  autograd::NoGradGuard no_grad;
  const int64_t n = app::begin_eval_pass(loader, batches, comm, "vqgpt eval");
  std::vector<app::IndexedValues<1>> losses;  // per sequence, added up in dataset order
  for (int64_t i = 0; i < n; ++i) {
    data::Batch b = loader.next();
    // The epoch's own samples only (DataLoader::unpadded); a batch of padding alone still
    // runs, as every rank runs each forward.
    const int64_t real = loader.unpadded(b);
    const Tensor each =
        model.sequence_losses(model.tokenize(real > 0 ? b.clips.narrow(0, 0, real) : b.clips));
    if (real == 0) continue;
    const std::vector<double> v = each.to_vector();
    const std::vector<int64_t> index = app::item_indices(b, real);
    for (int64_t k = 0; k < real; ++k) losses.push_back({index[k], {v[k]}});
  }
  const auto sums = app::sum_in_index_order(losses, comm, "vqgpt eval losses");
  return sums[0] / sums[1];
}

TrainResult train(const config::AppConfig& cfg, const TrainOptions& options,
                  comm::Communicator& comm) {
  app::check_same_config(cfg, comm, "vqgpt train");
  // Rank 0 reads the tokenizer and the others receive it: a path that differs on another
  // rank would be passed over, or (a folder against a file) part ways in the collectives.
  app::check_same_options({{"--tokenizer", options.tokenizer}}, comm, "vqgpt train");
  const Device device = app::train_device(cfg.train, comm, "vqgpt train");
  const config::TrainConfig& tc = cfg.train;
  const bool rank0 = comm.rank() == 0;
  const bool say = rank0 && !options.quiet;
  const int64_t world = comm.size();

  // The data first: a dataset too small for the ranks fails before anything is built.
  const app::TrainData train_data = app::make_train_data(cfg, comm, "vqgpt train");
  data::DataLoader& loader = *train_data.loader;

  // Where to start, before the tokenizer: a vqgpt checkpoint carries it (none is loaded then).
  const std::string ckpt_root = checkpoint_root(cfg);
  const app::RunStart run_start = app::start_run(
      cfg, ckpt_root,
      {"vqgpt train",
       options.resume,
       options.overwrite,
       say,
       {{tokenizer_key(options.tokenizer), tokenizer_source(cfg, options.tokenizer)}}},
      comm);
  const std::string& resume_from = run_start.resume_from;
  if (!resume_from.empty()) {
    // Compared with the checkpoint's: the tokenizer named now, by --tokenizer or the config.
    app::check_resume_config(with_tokenizer(cfg, tokenizer_source(cfg, options.tokenizer)),
                             resume_from, "vqgpt", "vqgpt train", comm, /*quiet=*/!say);
    if (say && !options.tokenizer.empty())
      std::fprintf(stderr,
                   "vqgpt train: note: --tokenizer '%s' is not read on a resume: the checkpoint "
                   "holds the tokenizer it trained with\n",
                   options.tokenizer.c_str());
  }
  auto tokenizer = resume_from.empty() ? load_tokenizer(cfg, options.tokenizer, comm, device)
                                       : random_tokenizer(cfg, comm, device);
  auto model = build_model(cfg, tokenizer, comm);
  app::check_same_model(*model, comm, "vqgpt train");
  auto engine = make_engine(model, cfg, comm, app::EngineUse::training,
                            options.quiet);  // verifies replicas once built
  TrainResult result;
  const gpt::TokenLayout layout = model->layout();
  const gpt::GptSpec& spec = model->gpt->spec();
  // The run's target tokens per vocabulary entry (unigram_entropy): this rank's, and on
  // rank 0 those of the run before a resume (saved summed over ranks).
  Tensor histogram = zeros({spec.vocab_size}, DType::f64, device);

  // What the checkpoints record as gpt.tokenizer_checkpoint: the tokenizer this run trains
  // with, named now, or on a resume the one the checkpoint recorded (it holds those weights;
  // a path named now is not read).
  std::string used_tokenizer = tokenizer_source(cfg, options.tokenizer);
  int64_t start = 0;
  if (!resume_from.empty()) {
    const zero::CheckpointExtra extra =
        app::resume_training(*engine, loader, resume_from, comm, say, "vqgpt train", spec.dropout);
    start = extra.step;
    if (!extra.config_yaml.empty()) used_tokenizer = recorded_tokenizer(extra.config_yaml);
    if (comm.rank() == 0)
      if (const Tensor saved = app::checkpoint_counts(extra, "token_histogram", spec.vocab_size,
                                                      "token (gpt.vocab_size)");
          saved.defined())
        histogram.copy_(saved.to(DType::f64).to(device));
  }

  std::unique_ptr<app::MetricsWriter> metrics;
  if (rank0) metrics = app::open_run_metrics(cfg.output_dir, start, tc.tensorboard, "vqgpt train");
  const int64_t targets_per_clip = layout.length() - 1;
  const int64_t clips_per_step = tc.batch * world * tc.gradient_accumulation_steps;
  if (say) {
    const int64_t unused = spec.vocab_size - layout.min_vocab();
    const std::string spare =
        unused > 0 ? " + " + std::to_string(unused) + " unused (gpt.vocab_size)" : "";
    std::printf(
        "gpt: %lld parameters (ZeRO-3 over %s), vocab %lld = %lld codes + BOS/EOL/EOS%s, "
        "block %lld, %lld layers x %lld heads x %lld\n",
        static_cast<long long>(spec.count_parameters()), counted(world, "rank").c_str(),
        static_cast<long long>(spec.vocab_size), static_cast<long long>(layout.codebook_size()),
        spare.c_str(), static_cast<long long>(spec.block_size),
        static_cast<long long>(spec.n_layer), static_cast<long long>(spec.n_head),
        static_cast<long long>(spec.n_embd));
    std::printf(
        "tokenizer: %lld parameters + %zu buffers, frozen replica on every rank (eval, no grad); "
        "replicas verified identical on %s\n",
        static_cast<long long>(model->tokenizer->num_parameters()),
        model->tokenizer->named_buffers().size(), counted(world, "rank").c_str());
    std::printf(
        "tokens per clip %lld (BOS + %lld x %lld rows x (%lld codes + EOL) + EOS); %lld clips "
        "per step; steps %lld; data %s; output %s\n",
        static_cast<long long>(layout.length()), static_cast<long long>(layout.frames()),
        static_cast<long long>(layout.rows()), static_cast<long long>(layout.cols()),
        static_cast<long long>(clips_per_step), static_cast<long long>(tc.steps),
        train_data.dataset->describe().c_str(), cfg.output_dir.c_str());
    if (train_data.eval_set)
      std::printf("eval: %s\n", data::describe_eval(cfg.data, *train_data.eval_set).c_str());
    std::fflush(stdout);
    const std::string note = app::epoch_note(tc.batch, world, tc.gradient_accumulation_steps,
                                             train_data.dataset->size(), cfg.data.shuffle);
    if (!note.empty()) std::fprintf(stderr, "vqgpt train: note: %s\n", note.c_str());
  }

  const config::AppConfig recorded = with_tokenizer(cfg, used_tokenizer);
  app::LrPlan lr_plan(tc);
  app::ScalarWindow window;
  app::StepTimer timer;
  app::Progress progress(tc.steps, options.tty && say);
  double run_tok_seconds = 0.0, run_step_seconds = 0.0;
  std::function<void(int64_t)> settle_before_save;  // the loop's settle: no save holds a NaN
  app::RunCheckpoints checkpoints(tc, [&](int64_t step) {
    settle_before_save(step);
    // Summed over ranks: resumable at any world size.
    const Tensor total = summed_histogram(histogram, comm).to(DType::i64);
    const std::string dir = app::save_training_checkpoint(
        *engine, ckpt_root, step, recorded, loader, "vqgpt", {{"token_histogram", total}});
    if (say) progress.line("checkpoint " + dir);
    return dir;
  });

  // train.cuda_graph: after two eager warm-up steps the whole step (tokenize, GPT forward,
  // loss, backward, reduce, update) is captured and replayed; each batch is copied into the
  // one device tensor the graph reads. The tokenizer's share is then not timed apart.
  const std::unique_ptr<StepGraph> graph =
      app::make_step_graph(tc, *engine, device, spec.dropout, "gpt.dropout", "vqgpt train");
  Tensor graph_clips;                    // the graph's input: stage() keeps it at one address
  auto learn = [&](const Tensor& seq) {  // the GPT's part of a step, on tokens
    Tensor loss = model->loss(seq);
    engine->backward(loss);
    engine->step();
    return loss;
  };
  auto graph_step = [&] {
    Tensor seq = model->tokenize(graph_clips);
    return std::vector<Tensor>{learn(seq), seq};
  };

  // The losses and gradient norms stay on the device until settle() reads them
  // (app::StepLog): after the first step, at log and eval steps, before each checkpoint,
  // and when its queue is full. On a GPU the tokenizer is timed by events, read then too.
  app::StepLog log({{"loss", "cross-entropy (gpt logits vs. tokens)"}}, "vqgpt train");
  SpanTimer tok_timer(device);
  int64_t settled = start;  // the last step settle() read
  auto settle = [&](int64_t now) {
    // Each step's mean over its finite micro-batches (none: every one an fp16 skip).
    std::map<int64_t, std::pair<double, int>> steps;
    for (const app::StepLog::Row& row : log.settle(*engine, now))
      if (row.finite()) {
        steps[row.step].first += row.values[0];
        ++steps[row.step].second;
      }
    for (const auto& [s, sum_count] : steps) window.add("loss", sum_count.first / sum_count.second);
    const double tok = tok_timer.take_seconds();
    if (!graph && now > settled) window.add("tok_s", tok, static_cast<double>(now - settled));
    run_tok_seconds += tok;
    settled = now;
  };
  settle_before_save = settle;

  model->train();                          // the tokenizer stays in eval mode
  const app::StopOnSignal stop_on_signal;  // SIGINT/SIGTERM: a checkpoint, then return
  int64_t last_done = start;               // a stop signal may end the loop early
  int64_t reached = start;                 // the last step run (fp16 overflows included)
  for (int64_t step = start; step < tc.steps; ++step) {
    // The schedule counts applied updates: it holds on a step an fp16 overflow skipped.
    const double lr = lr_plan.lr_at(engine->optimizer().step_count());
    engine->set_lr(lr);
    const int64_t done = step + 1;
    reached = done;
    timer.start();
    const Clock::time_point t0 = Clock::now();
    // The engine counts the replica checks it ran: after an applied update that
    // buffers.verify_every selects, never on a skipped fp16 step or a graph replay.
    const int64_t checks_before = engine->stats().replica_verifications;
    for (int64_t k = 0; k < tc.gradient_accumulation_steps; ++k) {
      data::Batch batch = loader.next();
      Tensor seq, loss;
      if (graph) {
        graph_clips = graph->stage(batch.clips);
        const std::vector<Tensor> r = graph->run(graph_step, [&] { engine->before_replay(); });
        loss = r[0];
        seq = r[1];
      } else {
        tok_timer.begin();
        seq = model->tokenize(batch.clips);  // (B, L), no gradients, no collectives
        tok_timer.end();
        loss = learn(seq);
      }
      log.add(done, k, {loss});
      // A micro-batch whose loss is not finite (an update fp16 skips) counts no tokens.
      add_(histogram, bincount(seq.narrow(1, 1, targets_per_clip), spec.vocab_size,
                               isfinite(loss).to(DType::f64)));
    }
    log.add_norm(done, engine->last_grad_norm_tensor());
    // A stop by signal ends a log window early: it is logged, not lost.
    const bool stops = checkpoints.signalled(done, comm);
    const bool logs = done % tc.log_every == 0 || done == tc.steps || stops;
    const bool evals = tc.eval_every > 0 && (done % tc.eval_every == 0 || done == tc.steps);
    if (step == start || logs || evals || log.full()) settle(done);
    if (step == start) app::finish_start(run_start, comm);  // the earlier run is gone now
    const double step_seconds = seconds_since(t0);
    timer.stop();
    run_step_seconds += step_seconds;
    window.add("step_s", step_seconds);
    const bool verified = engine->stats().replica_verifications > checks_before;

    if (logs) {
      std::map<std::string, double> m;
      for (const auto& [name, v] : window.reduce(comm)) m[name] = v;
      const double entropy = global_entropy(histogram, comm);
      const double share = m["step_s"] > 0 ? m["tok_s"] / m["step_s"] : 0.0;
      const json tok_time = graph ? json() : json(m["tok_s"]);  // null: not timed apart
      const json tok_share = graph ? json() : json(share);
      const double tps = static_cast<double>(clips_per_step * targets_per_clip) / m["step_s"];
      const double eta = timer.eta(tc.steps - done);
      // A window whose every micro-batch had a non-finite loss on every rank (fp16 steps
      // the engine skipped) measured no loss: null in the record, said in the log line.
      const bool measured = m.count("loss") > 0;
      if (measured) {
        result.log_steps.push_back(static_cast<double>(done));
        result.log_losses.push_back(m["loss"]);
        result.loss = m["loss"];
      }
      if (rank0) {
        const zero::MemoryReport mem = engine->memory_report();
        metrics->write({{"kind", "train"},
                        {"step", done},
                        {"loss", measured ? json(m["loss"]) : json()},
                        {"skipped_steps", engine->stats().overflow_skips},
                        {"unigram_entropy", entropy},
                        {"lr", lr},
                        {"grad_norm", engine->last_grad_norm()},
                        {"step_time", m["step_s"]},
                        {"tokenizer_time", tok_time},
                        {"tokenizer_share", tok_share},
                        {"tokens_per_s", tps},
                        {"eta_s", eta},
                        {"memory", json::parse(mem.json())}});
        if (say)
          progress.line("step " + std::to_string(done) + "/" + std::to_string(tc.steps) +
                        (measured ? " | mean loss " + fmt("%.4f", m["loss"])
                                  : std::string(" | no finite loss in this window")) +
                        " (unigram " + fmt("%.3f", entropy) + ") | lr " + fmt("%.2e", lr) + " | " +
                        fmt("%.3f s/step", m["step_s"]) +
                        (graph ? std::string(" (cuda graph)")
                               : " (tokenizer " + fmt("%.0f%%", 100.0 * share) + ")") +
                        " | " + fmt("%.0f tok/s", tps) + " | eta " + app::format_duration(eta) +
                        " | mem " + format_byte_size(mem.model_state()) + " state");
      }
    }
    if (say && verified)
      progress.line("step " + std::to_string(done) + ": tokenizer replicas verified (" +
                    std::to_string(engine->replicated().size()) + " parameters, " +
                    std::to_string(model->tokenizer->named_buffers().size()) +
                    " buffers identical on " + counted(world, "rank") + ")");
    if (say && progress.tty())  // the loss is the last log line's (none before it)
      progress.update(done, "step " + std::to_string(done) + "/" + std::to_string(tc.steps) +
                                (result.log_steps.empty()
                                     ? std::string()
                                     : " | loss " + fmt("%.4f", result.log_losses.back())) +
                                " | " + fmt("%.3f s/step", timer.run_mean()));
    // Saved before it is evaluated: an evaluation that fails (a held-out image that does
    // not decode) loses no step.
    const bool stop = checkpoints.stop_after(done);
    if (tc.eval_every > 0 && (done % tc.eval_every == 0 || done == tc.steps)) {
      auto eval_loader = data::make_loader(train_data.eval_set, cfg.data, tc.batch, comm.rank(),
                                           world, /*eval=*/true);
      model->eval();
      result.eval_loss = evaluate(*model, *eval_loader, tc.eval_batches, comm);
      model->train();
      if (rank0) metrics->write({{"kind", "eval"}, {"step", done}, {"loss", result.eval_loss}});
      if (say)
        progress.line("eval  step " + std::to_string(done) + " | loss " +
                      fmt("%.4f", result.eval_loss));
    }
    last_done = done;
    if (stop) {
      settle(done);  // a stop without a save still reads (and checks) what is queued
      break;
    }
  }
  checkpoints.finish(start, resume_from.empty() ? ckpt_root : resume_from);
  result.stopped_by_signal = checkpoints.stopped_by();
  result.loss_reads = log.reads();
  progress.finish();
  engine->write_timeline();  // a run shorter than train.trace_steps: still one file

  result.start_step = start;
  result.steps = reached;
  // The construction's, the resume's load's and the steps' (each one that passed).
  result.replica_checks = engine->stats().replica_verifications;
  result.unigram_entropy = global_entropy(histogram, comm);
  result.seconds_per_step = timer.run_mean();
  // Shares and throughput from every rank's run totals.
  Tensor tot = from_vector({run_tok_seconds, run_step_seconds}, {2}, DType::f64);
  app::all_reduce_host(comm, tot, comm::ReduceOp::kSum);
  const auto t = tot.to_vector();
  const int64_t steps_run = last_done - start;
  result.tokenizer_share = t[1] > 0 ? t[0] / t[1] : 0.0;
  if (t[1] > 0 && steps_run > 0)
    result.tokens_per_second = static_cast<double>(steps_run * clips_per_step * targets_per_clip) /
                               (t[1] / static_cast<double>(world));
  result.final_checkpoint = checkpoints.last();
  if (say && start >= tc.steps) {
    app::say_nothing_to_train("vqgpt train", start, tc.steps);
  } else if (say && result.stopped_by_signal) {
    std::printf("%s\n", checkpoints.stopped_line("vqgpt train").c_str());
    std::fflush(stdout);
  } else if (say) {
    const std::string eval =
        result.eval_loss != 0.0 ? fmt(" | eval %.4f", result.eval_loss) : "";  // 0: none ran
    const std::string tok_part =
        graph ? "a replayed CUDA graph"
              : fmt("tokenizer %.0f%% of it", 100.0 * result.tokenizer_share);
    std::printf(
        "done: step %lld | loss %.4f (unigram entropy %.4f)%s | %.3f s/step, %s | %.0f tokens/s | "
        "metrics %s\n",
        static_cast<long long>(result.steps), result.loss, result.unigram_entropy, eval.c_str(),
        result.seconds_per_step, tok_part.c_str(), result.tokens_per_second,
        metrics->path().c_str());
    std::fflush(stdout);
  }
  return result;
}

}  // namespace zt::vqgpt
