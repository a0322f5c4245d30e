// vqtok train: the Emu3-style tokenizer built under zero::Init and trained with ZeRO-3.
// Per step: lr from the plan, gradient_accumulation_steps micro-batches of train.batch
// clips per rank (the DistributedSampler shards the data), loss = l2 * MSE + l1 * L1 +
// vq * (codebook + commitment * commit) through the straight-through quantizer, then the
// engine's step (reduce-scatter, clipping, AdamW on fp32 shards, BatchNorm buffer sync).
// Every log_every steps the window's losses, PSNR and codebook usage are reduced across
// ranks; rank 0 prints them and appends them to metrics.jsonl.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <sstream>

#include "apps/common/host_memory.h"
#include "apps/common/run_checkpoints.h"
#include "apps/common/run_checks.h"
#include "apps/common/saved_run.h"
#include "apps/common/step_log.h"
#include "apps/common/stop_signal.h"
#include "apps/vqtok/vqtok_app.h"
#include "core/ops.h"
#include "core/plural.h"
#include "core/step_graph.h"
#include "core/text_file.h"
#include "data/factory.h"
#include "data/image.h"
#include "data/plot.h"
#include "zero/checkpoint.h"
#include "zero/gathered.h"

namespace zt::vqtok {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Loss and PSNR curves, train and eval, drawn side by side in one SVG.
struct Curves {
  data::PlotSeries loss{"train", {}, {}}, eval_loss{"eval", {}, {}}, psnr{"train", {}, {}},
      eval_psnr{"eval", {}, {}};

  void add(const json& r) {
    if (!r.value("loss", json()).is_number() || !r.value("psnr", json()).is_number()) return;
    const bool ev = r.value("kind", "") == "eval";
    const double s = r["step"].get<double>();
    (ev ? eval_loss : loss).x.push_back(s);
    (ev ? eval_loss : loss).y.push_back(r["loss"].get<double>());
    (ev ? eval_psnr : psnr).x.push_back(s);
    (ev ? eval_psnr : psnr).y.push_back(r["psnr"].get<double>());
  }

  void save(const std::string& path) const {
    if (loss.x.empty()) return;
    auto nonempty = [](std::vector<data::PlotSeries> v) {
      std::erase_if(v, [](const data::PlotSeries& s) { return s.x.empty(); });
      return v;
    };
    data::PlotOptions lo;
    lo.title = "loss";
    lo.ylabel = "loss";
    lo.log_y = true;
    data::PlotOptions po;
    po.title = "PSNR";
    po.ylabel = "dB";
    std::string left = data::svg_plot(nonempty({loss, eval_loss}), lo);
    std::string right = data::svg_plot(nonempty({psnr, eval_psnr}), po);
    const size_t at = right.find("<svg ");
    if (at != std::string::npos)
      right.replace(at, 5, "<svg x=\"" + std::to_string(lo.width) + "\" ");
    std::ostringstream svg;
    svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << lo.width + po.width
        << "\" height=\"" << std::max(lo.height, po.height) << "\">\n"
        << left << right << "</svg>\n";
    write_text_atomically(path, svg.str());
  }
};

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace

// Dead-code restart: codes that no rank chose since the last restart are moved next to
// randomly picked used codes (plus a small offset), so a codebook initialized near zero
// does not collapse onto a handful of entries. `hits` counts this rank's choices (f64 on
// the training device); it is read back here, at a restart step, and reset. Rank 0 edits inside
// GatheredParameters(modifier_rank 0): every rank ends with rank 0's codebook, re-partitioned.
// Returns the number of codes moved.
int64_t restart_dead_codes(vq::VqModel& model, Tensor& hits, int64_t step,
                           comm::Communicator& comm) {
  Tensor summed = hits.to(Device::cpu()).to(DType::i64);
  app::all_reduce_host(comm, summed, comm::ReduceOp::kSum);
  const int64_t K = summed.numel();
  const int64_t* h = summed.data<int64_t>();
  std::vector<int64_t> used, dead;
  for (int64_t k = 0; k < K; ++k) (h[k] > 0 ? used : dead).push_back(k);
  if (!used.empty() && !dead.empty()) {
    const Tensor& w = model.quantize->embedding->weight;
    zero::GatheredParameters g({w}, comm, /*modifier_rank=*/0);
    if (comm.rank() == 0) {
      autograd::NoGradGuard ng;
      Generator gen(static_cast<uint64_t>(0x5eed + step));
      Tensor pick =
          randint(0, static_cast<int64_t>(used.size()), {static_cast<int64_t>(dead.size())}, gen);
      Tensor from = Tensor::empty({static_cast<int64_t>(dead.size())}, DType::i64);
      for (size_t i = 0; i < dead.size(); ++i)
        from.data<int64_t>()[i] = used[static_cast<size_t>(pick.data<int64_t>()[i])];
      // In f32 whatever the codebook's storage (bf16 under train.dtype=bf16): the noise
      // is drawn in f32, and copy_ rounds the moved codes back into w's dtype.
      Tensor src = index_select(w.detach(), 0, from.to(w.device())).to(DType::f32);
      Tensor scale = add(mul(abs(src), 0.05), 1e-3);
      Tensor moved = add(src, mul(randn(src.sizes(), gen).to(w.device()), scale));
      for (size_t i = 0; i < dead.size(); ++i)
        w.select(0, dead[i]).copy_(moved.select(0, static_cast<int64_t>(i)));
    }
  }
  hits.zero_();
  return used.empty() ? 0 : static_cast<int64_t>(dead.size());
}

Tensor vq_term(const std::vector<Tensor>& out, double commitment) {
  return out[4] + out[3] * commitment;  // codebook term + commitment * encoder term
}

Losses objective(const std::vector<Tensor>& out, const Tensor& clips, const config::LossConfig& w) {
  ZT_CHECK(out.size() >= 5, "vqtok: the model returned ", out.size(),
           " outputs; expected {recon, codes, loss_vq, loss_commit, loss_codebook}");
  ZT_CHECK(out[0].sizes() == clips.sizes(), "vqtok: reconstruction ", shape_str(out[0].sizes()),
           " does not match the input ", shape_str(clips.sizes()));
  Losses l;
  l.mse = mse_loss(out[0], clips);
  l.l1 = l1_loss(out[0], clips);
  l.vq = vq_term(out, w.commitment);
  l.total = l.mse * w.l2 + l.l1 * w.l1 + l.vq * w.vq;
  return l;
}

std::shared_ptr<vq::VqModel> build_model(const config::AppConfig& cfg, Device device,
                                         comm::Communicator& comm) {
  manual_seed(static_cast<uint64_t>(cfg.train.seed));
  app::check_host_can_build(vq::VqModel::count_parameters(cfg.model), false, device, comm,
                            "the tokenizer");
  std::shared_ptr<vq::VqModel> model;
  {
    // Each parameter is partitioned onto the device as it registers: no rank, and on a
    // GPU neither the host nor the device, ever holds the whole model.
    zero::Init init(comm, device);
    model = std::make_shared<vq::VqModel>(cfg.model);
  }
  app::checkpoint_activations(*model, cfg.train, vq::recomputed_block_types());
  app::seed_dropout(cfg.train, comm);
  return model;
}

std::string checkpoint_root(const config::AppConfig& cfg) {
  return (fs::path(cfg.output_dir) / "checkpoints").string();
}

TrainResult train(const config::AppConfig& cfg, const TrainOptions& options,
                  comm::Communicator& comm) {
  // A rank given other options would fail later inside a collective, or train silently
  // with another setting: compare before anything else.
  app::check_same_config(cfg, comm, "vqtok train");
  const Device device = app::train_device(cfg.train, comm, "vqtok train");
  const config::TrainConfig& tc = cfg.train;
  const bool rank0 = comm.rank() == 0;
  const bool say = rank0 && !options.quiet;
  const int64_t world = comm.size();
  const int64_t codebook = cfg.model.codebook_size;
  const app::LrPlan lr_plan(tc);

  // The data first: a dataset too small for the ranks fails before every rank builds a model.
  const app::TrainData train_data = app::make_train_data(cfg, comm, "vqtok train");
  data::DataLoader& loader = *train_data.loader;

  std::shared_ptr<vq::VqModel> model = build_model(cfg, device, comm);
  app::check_same_model(*model, comm, "vqtok train");
  auto engine = app::make_engine(model, cfg, comm, app::EngineUse::training, options.quiet);

  // Resume: the engine's state, the global step and the loader's position.
  const std::string ckpt_root = checkpoint_root(cfg);
  const app::RunStart run_start =
      app::start_run(cfg, ckpt_root, {"vqtok train", options.resume, options.overwrite, say}, comm);
  const std::string& resume_from = run_start.resume_from;
  int64_t start = 0;
  // This rank's code choices since the last dead-code restart (training state: a resume
  // continues the counts, rank 0 holding the sum over the ranks that saved them).
  Tensor hits = zeros({codebook}, DType::f64, device);
  if (!resume_from.empty()) {
    app::check_resume_config(cfg, resume_from, "vqtok", "vqtok train", comm, /*quiet=*/!say);
    const zero::CheckpointExtra extra = app::resume_training(*engine, loader, resume_from, comm,
                                                             say, "vqtok train", cfg.model.dropout);
    start = extra.step;
    if (comm.rank() == 0)
      if (const Tensor saved = app::checkpoint_counts(extra, "codebook_hits", codebook,
                                                      "code (model.codebook_size)");
          saved.defined())
        hits.copy_(saved.to(DType::f64).to(device));
    // A run that ended at a restart step skipped that restart (codes it moved would have
    // gone untrained) and saved its counts unreset. Extended (more train.steps), it runs
    // the restart now, as the longer run did at the end of that step.
    if (start < tc.steps && tc.codebook_restart_every > 0 &&
        start % tc.codebook_restart_every == 0) {
      Tensor counted = sum(hits).to(Device::cpu());
      app::all_reduce_host(comm, counted, comm::ReduceOp::kSum);
      if (counted.item() > 0) restart_dead_codes(*model, hits, start - 1, comm);
    }
  }

  std::unique_ptr<app::MetricsWriter> metrics;
  Curves curves;
  const std::string curves_path = (fs::path(cfg.output_dir) / "curves.svg").string();
  if (rank0) {
    metrics = app::open_run_metrics(cfg.output_dir, start, tc.tensorboard, "vqtok train");
    if (start > 0)  // the records up to the checkpoint
      for (const json& r : app::read_metrics(metrics->path())) curves.add(r);
  }
  if (say) {
    std::printf("model: %lld parameters, %lld tokens per clip; data: %s\n",
                static_cast<long long>(vq::VqModel::count_parameters(cfg.model)),
                static_cast<long long>(cfg.tokens_per_clip()),
                train_data.dataset->describe().c_str());
    std::printf(
        "batch %lld per rank x %s x %lld accumulation = %lld clips per step; "
        "steps %lld; output %s\n",
        static_cast<long long>(tc.batch), counted(world, "rank").c_str(),
        static_cast<long long>(tc.gradient_accumulation_steps),
        static_cast<long long>(tc.batch * world * tc.gradient_accumulation_steps),
        static_cast<long long>(tc.steps), cfg.output_dir.c_str());
    if (train_data.eval_set)
      std::printf("eval: %s\n", data::describe_eval(cfg.data, *train_data.eval_set).c_str());
    std::fflush(stdout);
    const std::string note = app::epoch_note(tc.batch, world, tc.gradient_accumulation_steps,
                                             train_data.dataset->size(), cfg.data.shuffle);
    if (!note.empty()) std::fprintf(stderr, "vqtok train: note: %s\n", note.c_str());
  }

  TrainResult result;
  result.start_step = start;
  app::ScalarWindow window;
  app::CodebookUsage usage(codebook);
  app::StepTimer timer;
  app::Progress progress(tc.steps, options.tty && say);
  std::function<void(int64_t)> settle_before_save;  // the loop's settle: no save holds a NaN
  app::RunCheckpoints checkpoints(tc, [&](int64_t step) {
    settle_before_save(step);
    // Summed over ranks: resumable at any world size.
    Tensor total_hits = hits.to(Device::cpu()).to(DType::i64);
    app::all_reduce_host(comm, total_hits, comm::ReduceOp::kSum);
    const std::string dir = app::save_training_checkpoint(*engine, ckpt_root, step, cfg, loader,
                                                          "vqtok", {{"codebook_hits", total_hits}});
    if (say) progress.line("checkpoint " + dir);
    return dir;
  });

  auto run_eval = [&](int64_t step) {
    auto eval_loader =
        data::make_loader(train_data.eval_set, cfg.data, tc.batch, comm.rank(), world,
                          /*eval=*/true);
    std::vector<Tensor> first;
    model->eval();
    // Evaluated on `device`; the outputs come back to the host with the batch.
    auto forward = [&](const Tensor& x) {
      std::vector<Tensor> out = engine->forward({x.to(device)});
      for (Tensor& t : out) t = t.to(Device::cpu());
      return out;
    };
    EvalResult ev = evaluate_batches(forward, *eval_loader, tc.eval_batches, cfg, comm, &first);
    model->train();
    result.eval_psnr = ev.psnr;
    if (!rank0) return;
    const int64_t n = std::min<int64_t>(4, first[0].size(0));
    char name[64];
    std::snprintf(name, sizeof name, "recon_step_%06lld.png", static_cast<long long>(step));
    const std::string grid = (fs::path(cfg.output_dir) / name).string();
    const data::Image grid_image =
        data::make_grid({first[0].narrow(0, 0, n), first[1].narrow(0, 0, n)});
    data::save_png(grid, grid_image);
    metrics->image("eval/recon", step, grid_image);
    const double total = cfg.loss.l2 * ev.mse + cfg.loss.l1 * ev.l1 + cfg.loss.vq * ev.loss_vq;
    json rec = ev.json();
    rec["kind"] = "eval";
    rec["step"] = step;
    rec["loss"] = total;
    metrics->write(rec);
    curves.add(rec);
    curves.save(curves_path);
    if (say)
      progress.line("eval  step " + std::to_string(step) + " | loss " + fmt("%.4f", total) +
                    " | psnr " + fmt("%.2f dB", ev.psnr) + " | codes " +
                    fmt("%.1f%%", 100.0 * ev.codebook.usage) + " | " + grid);
  };

  // train.cuda_graph: two eager warm-up steps, then the step (forward, loss, backward,
  // reduce, clip, AdamW) is captured once and replayed; each batch is staged into the one
  // device tensor the graph reads.
  const std::unique_ptr<StepGraph> graph =
      app::make_step_graph(tc, *engine, device, cfg.model.dropout, "model.dropout", "vqtok train");
  // One micro-step on `clips`: {total, mse, l1, vq, commit, codebook loss, codes}.
  Tensor clips;
  auto train_step = [&] {
    std::vector<Tensor> out = engine->forward({clips});
    Losses l = objective(out, clips, cfg.loss);
    engine->backward(l.total);
    engine->step();
    return std::vector<Tensor>{l.total, l.mse, l.l1, l.vq, out[3], out[4], out[1]};
  };

  model->train();
  double last_psnr = 0.0;
  // Every step's losses and gradient norm stay on the device until settle() reads them
  // (app::StepLog): after the first step, at log, eval and restart steps, before each
  // checkpoint, and when its queue is full. The codes are counted where they were chosen.
  app::StepLog log({{"loss", ""},
                    {"mse", "mse (decoder output vs. input)"},
                    {"l1", "l1 (decoder output vs. input)"},
                    {"vq", ""},
                    {"commit", "commitment (encoder output vs. its code, quantizer)"},
                    {"codebook_loss", "codebook loss (quantizer.embedding)"}},
                   "vqtok train");
  auto settle = [&](int64_t now) {
    for (const app::StepLog::Row& row : log.settle(*engine, now)) {
      if (!row.finite()) continue;  // fp16: an update the engine skipped
      const std::vector<double>& v = row.values;
      window.add("loss", v[0]);
      window.add("mse", v[1]);
      window.add("l1", v[2]);
      window.add("vq", v[3]);
      window.add("commit", v[4]);
      window.add("codebook_loss", v[5]);
      window.add("psnr", app::psnr_from_mse(v[1]));
    }
  };
  settle_before_save = settle;
  std::optional<app::StopOnSignal> stop_on_signal;  // SIGINT/SIGTERM: a checkpoint, then return
  if (options.stop_on_signal) stop_on_signal.emplace();
  int64_t reached = start;  // the last step run (fp16 overflows included)
  for (int64_t step = start; step < tc.steps; ++step) {
    // The schedule counts applied updates: it holds on a step an fp16 overflow skipped.
    const double lr = lr_plan.lr_at(engine->optimizer().step_count());
    engine->set_lr(lr);
    const int64_t done = step + 1;
    reached = done;
    timer.start();
    for (int64_t k = 0; k < tc.gradient_accumulation_steps; ++k) {
      data::Batch batch = loader.next();
      clips = graph ? graph->stage(batch.clips) : batch.clips.to(device);
      const std::vector<Tensor> r =
          graph ? graph->run(train_step, [&] { engine->before_replay(); }) : train_step();
      log.add(done, k, {r[0], r[1], r[2], r[3], r[4], r[5]}, clips);
      // A micro-batch whose loss is not finite (an update fp16 skips) counts no codes.
      const Tensor counts = bincount(r[6], codebook, isfinite(r[0]).to(DType::f64));
      usage.add_counts(counts);
      if (tc.codebook_restart_every > 0) add_(hits, counts);
    }
    log.add_norm(done, engine->last_grad_norm_tensor());
    // A stop by signal ends a log window early: it is logged, not lost.
    const bool stops = checkpoints.signalled(done, comm);
    const bool logs = done % tc.log_every == 0 || done == tc.steps || stops;
    const bool evals = tc.eval_every > 0 && (done % tc.eval_every == 0 || done == tc.steps);
    const bool restarts =
        tc.codebook_restart_every > 0 && done % tc.codebook_restart_every == 0 && done < tc.steps;
    if (step == start || logs || evals || restarts || log.full()) settle(done);
    // The earlier run's results go once this run has taken a step; a run that a signal
    // ends without a checkpoint (a quick tokenizer) keeps them until it saved its own.
    if (step == start && options.stop_on_signal) app::finish_start(run_start, comm);
    if (restarts) {
      const int64_t moved = restart_dead_codes(*model, hits, step, comm);
      if (say && moved > 0 && done % tc.log_every == 0)
        progress.line("codebook: restarted " + std::to_string(moved) + " unused codes");
    }
    timer.stop();

    if (logs) {
      std::map<std::string, double> m;
      for (const auto& [name, v] : window.reduce(comm)) m[name] = v;
      const app::CodebookStats cb = usage.reduce(comm);
      const double sec = timer.window_mean();
      const double eta = timer.eta(tc.steps - done);
      const zero::MemoryReport mem = engine->memory_report();
      // A window whose every micro-batch had a non-finite loss on every rank (fp16 steps
      // the engine skipped) measured nothing: null in the record, said in the log line.
      const bool measured = m.count("mse") > 0;
      auto value = [&](const char* k) { return measured ? json(m.at(k)) : json(); };
      if (measured) {  // PSNR of the window's mean MSE (the per-step PSNRs' mean too)
        last_psnr = app::psnr_from_mse(m["mse"]);
        result.log_steps.push_back(static_cast<double>(done));
        result.log_losses.push_back(m["loss"]);
        result.log_psnr.push_back(last_psnr);
        result.psnr = last_psnr;
      }
      result.codebook = cb;
      if (rank0) {
        json rec = {{"kind", "train"},
                    {"step", done},
                    {"loss", value("loss")},
                    {"mse", value("mse")},
                    {"l1", value("l1")},
                    {"vq", value("vq")},
                    {"commit", value("commit")},
                    {"codebook_loss", value("codebook_loss")},
                    {"psnr", measured ? json(last_psnr) : json()},
                    {"psnr_mean", value("psnr")},
                    {"skipped_steps", engine->stats().overflow_skips},
                    {"codebook_usage", cb.usage},
                    {"codes_used", cb.used},
                    {"perplexity", cb.perplexity},
                    {"lr", lr},
                    {"grad_norm", engine->last_grad_norm()},
                    {"step_time", sec},
                    {"eta_s", eta},
                    {"memory", json::parse(mem.json())}};
        metrics->write(rec);
        curves.add(rec);
        curves.save(curves_path);
        if (say)
          progress.line(
              "step " + std::to_string(done) + "/" + std::to_string(tc.steps) +
              (measured ? " | mean loss " + fmt("%.4f", m["loss"]) + " (mse " +
                              fmt("%.4f", m["mse"]) + " l1 " + fmt("%.4f", m["l1"]) + " vq " +
                              fmt("%.4f", m["vq"]) + ") | psnr " + fmt("%.2f dB", last_psnr)
                        : std::string(" | no finite loss in this window (") +
                              std::to_string(engine->stats().overflow_skips) +
                              " fp16 steps skipped so far)") +
              " | codes " + fmt("%.1f%%", 100.0 * cb.usage) + " (" + std::to_string(cb.used) + "/" +
              std::to_string(codebook) + ") | lr " + fmt("%.2e", lr) + " | " +
              fmt("%.3f s/step", sec) + " | eta " + app::format_duration(eta) + " | mem " +
              format_byte_size(mem.model_state()) + " state, " +
              format_byte_size(mem.activation_peak) + " act peak");
      }
    }
    if (say && progress.tty())  // loss, PSNR and codes are the last log line's (none before)
      progress.update(done, "step " + std::to_string(done) + "/" + std::to_string(tc.steps) +
                                (result.log_steps.empty()
                                     ? std::string()
                                     : " | loss " + fmt("%.4f", result.log_losses.back()) +
                                           " | psnr " + fmt("%.2f dB", last_psnr) + " | codes " +
                                           fmt("%.1f%%", 100.0 * result.codebook.usage)) +
                                " | " + fmt("%.3f s/step", timer.run_mean()) + " | eta " +
                                app::format_duration(timer.eta(tc.steps - done)));
    // Saved before it is evaluated: an evaluation that fails (a held-out image that does
    // not decode) loses no step.
    const bool stop = checkpoints.stop_after(done);
    if (tc.eval_every > 0 && (done % tc.eval_every == 0 || done == tc.steps)) run_eval(done);
    if (stop) {
      settle(done);  // a stop without a save still reads (and checks) what is queued
      break;
    }
  }
  checkpoints.finish(start, resume_from.empty() ? ckpt_root : resume_from);
  if (!options.stop_on_signal) app::finish_start(run_start, comm);
  result.stopped_by_signal = checkpoints.stopped_by();
  result.loss_reads = log.reads();
  progress.finish();
  engine->write_timeline();  // a run shorter than train.trace_steps: still one file

  result.steps = reached;
  result.seconds_per_step = timer.run_mean();
  result.final_checkpoint = checkpoints.last();
  if (say && start >= tc.steps) {
    app::say_nothing_to_train("vqtok train", start, tc.steps);
  } else if (say && result.stopped_by_signal) {
    std::printf("%s\n", checkpoints.stopped_line("vqtok train").c_str());
    std::fflush(stdout);
  } else if (say) {
    const std::string eval =
        result.eval_psnr != 0.0 ? fmt(" (eval %.2f dB)", result.eval_psnr) : "";  // 0: none ran
    std::printf(
        "done: step %lld | psnr %.2f dB%s | codebook usage %.1f%% | %.3f s/step | metrics %s\n",
        static_cast<long long>(result.steps), result.psnr, eval.c_str(),
        100.0 * result.codebook.usage, result.seconds_per_step, metrics->path().c_str());
    std::fflush(stdout);
  }
  return result;
}

}  // namespace zt::vqtok
