// vqgpt tokenizer: a quick vqtok tokenizer for vqgpt, trained from a small recipe fitted to
// the vqgpt config's data (train_quick_tokenizer in vqgpt_app.h).
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "apps/common/output_paths.h"
#include "apps/common/run_checks.h"
#include "apps/common/saved_run.h"
#include "apps/vqgpt/vqgpt_app.h"
#include "apps/vqtok/vqtok_app.h"
#include "core/plural.h"

namespace zt::vqgpt {

namespace fs = std::filesystem;

std::string train_quick_tokenizer(const config::AppConfig& cfg, int64_t steps,
                                  const std::string& out_root, comm::Communicator& comm, bool quiet,
                                  bool overwrite) {
  ZT_CHECK(steps >= 1, "tokenizer: --steps must be at least 1, got ", steps);
  // Named as given: the recipe turns them into config keys (train.steps and
  // checkpoint_every, output_dir) that the ranks would otherwise be told differ.
  app::check_same_options({{"--steps", std::to_string(steps)},
                           {"--out", out_root},
                           {"--overwrite", overwrite ? "true" : "false"}},
                          comm, "vqgpt tokenizer");
  std::string root =
      out_root.empty() ? cfg.gpt.value_or(config::GptConfig{}).tokenizer_checkpoint : out_root;
  ZT_CHECK(!root.empty(), "tokenizer: pass --out or set gpt.tokenizer_checkpoint");
  fs::path p(root);
  if (p.filename() == "latest") p = p.parent_path();
  ZT_CHECK(!fs::is_regular_file(p), "tokenizer: '", p.string(),
           "' is a file (exported weights?); vqgpt tokenizer writes a checkpoint folder: pass "
           "--out DIR");
  // vqtok writes <output_dir>/checkpoints: aim it so that `root` is that folder.
  const fs::path output_dir = p.filename() == "checkpoints" ? p.parent_path() : p;
  app::check_on_rank0(comm, [&] {
    app::check_output_folder("tokenizer --out", output_dir, app::config_inputs(cfg));
  });
  auto fmt_g = [](double v) {  // exact: %.17g reads back as the same double
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return std::string(buf);
  };
  auto list = [](const std::vector<int64_t>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]";
  };
  // The recipe's batch of 4 per rank, or the run's where that is smaller: the run's fits its
  // data on these ranks (make_loader refuses one that does not, naming train.batch).
  const int64_t batch = std::min<int64_t>(4, cfg.train.batch);
  const config::ModelConfig& m = cfg.model;
  const data::DataConfig& d = cfg.data;
  // The vqtok config as YAML, so its checkpoint records a config vqtok itself can read.
  std::string y;
  y += "model:\n  codebook_size: " + std::to_string(m.codebook_size) +
       "\n  embed_dim: " + std::to_string(m.embed_dim) +
       "\n  z_channels: " + std::to_string(m.z_channels) +
       "\n  in_channels: " + std::to_string(m.in_channels) +
       "\n  out_channels: " + std::to_string(m.out_channels) +
       "\n  temporal_downsample_factor: " + std::to_string(m.temporal_downsample_factor) +
       "\n  ch: " + std::to_string(m.ch) + "\n  ch_mult: " + list(m.ch_mult) +
       "\n  num_res_blocks: " + std::to_string(m.num_res_blocks) +
       "\n  attn_resolutions: " + list(m.attn_resolutions) + "\n  dropout: " + fmt_g(m.dropout) +
       "\n  l2_norm_codes: " + (m.l2_norm_codes ? "true" : "false") +
       "\n  out_init_scale: " + fmt_g(m.out_init_scale) + "\n";
  y += std::string("data:\n  kind: ") + config::data_kind_name(d.kind) +
       (d.path.empty() ? "" : "\n  path: " + config::yaml_quoted(d.path)) +
       "\n  frames: " + std::to_string(d.frames) + "\n  height: " + std::to_string(d.height) +
       "\n  width: " + std::to_string(d.width) +
       "\n  eval_samples: " + std::to_string(d.eval_samples) +
       "\n  seed: " + std::to_string(d.seed) +
       (d.kind == data::DataKind::synthetic ? "\n  num_samples: " + std::to_string(d.num_samples) +
                                                  "\n  num_shapes: " + std::to_string(d.num_shapes)
                                            : "") +
       "\n  shuffle: " + (d.shuffle ? "true" : "false") +
       "\n  workers: " + std::to_string(d.workers) + "\n  prefetch: " + std::to_string(d.prefetch) +
       "\n  timeout: " + fmt_g(d.timeout) +
       (d.kind == data::DataKind::image_folder
            ? std::string("\n  resize: ") + config::filter_name(d.resize) +
                  "\n  fit: " + config::fit_name(d.fit) +
                  "\n  on_bad_image: " + config::bad_image_name(d.on_bad_image)
            : "") +
       "\n";
  y += "train:\n  steps: " + std::to_string(steps) + "\n  batch: " + std::to_string(batch) +
       "\n  lr: 2.0e-3\n  warmup: " + std::to_string(std::min<int64_t>(20, steps / 5)) +
       "\n  min_lr: 1.0e-4\n  betas: [0.9, 0.99]\n  gradient_clipping: 1.0\n  log_every: " +
       std::to_string(std::max<int64_t>(1, steps / 10)) +
       "\n  eval_every: 0\n  checkpoint_every: " + std::to_string(steps) +
       "\n  keep_checkpoints: 1\n";
  y += "loss:\n  l2: 1.0\n  l1: 0.1\n";
  y += "buffers:\n  sync: average\n";
  y += "output_dir: " + config::yaml_quoted(output_dir.string()) + "\n";
  const config::AppConfig tok_cfg = config::parse_app_config(
      config::parse_yaml(y, "<vqgpt quick tokenizer>"), config::App::vqtok);
  const std::string ckpt_root = (output_dir / "checkpoints").string();
  if (!overwrite && zero::holds_checkpoints(ckpt_root)) {
    // Whose they are: their meta.json says which app saved them ("" when it does not).
    std::string saved_by;
    try {
      saved_by = app::read_saved_run(ckpt_root).app;
    } catch (const Error&) {
    }
    ZT_CHECK(saved_by.empty() || saved_by == "vqtok", "tokenizer: '", ckpt_root, "' already holds ",
             saved_by,
             " checkpoints (their meta.json says so), not a tokenizer's; pass another --out "
             "folder for the tokenizer (--overwrite would delete that ",
             saved_by, " run's checkpoints and its metrics in '", output_dir.string(),
             "' once the new tokenizer is saved)");
    ZT_FAIL("tokenizer: '", ckpt_root, "' already holds ",
            saved_by.empty() ? "checkpoints (an earlier tokenizer?)"
                             : "checkpoints of a tokenizer (vqtok's, their meta.json says)",
            "; to use it, point gpt.tokenizer_checkpoint at it; to train a new one, pass "
            "another --out folder, or --overwrite to replace it (the old one is set aside, and "
            "deleted once the new tokenizer is saved: its checkpoints and metrics in '",
            output_dir.string(), "')");
  }
  if (comm.rank() == 0 && !quiet) {
    std::printf("tokenizer: training a quick vqtok tokenizer (%s) into %s\n",
                counted(steps, "step").c_str(), ckpt_root.c_str());
    std::fflush(stdout);
  }
  vqtok::TrainOptions to;
  to.quiet = quiet;
  to.overwrite = overwrite;
  // Unfinished, a quick tokenizer is of no use and cannot be resumed: a signal ends the
  // run at once, leaving no checkpoint for vqgpt train to pick up.
  to.stop_on_signal = false;
  const vqtok::TrainResult r = vqtok::train(tok_cfg, to, comm);
  if (comm.rank() == 0 && !quiet) {
    const std::string configured = cfg.gpt.value_or(config::GptConfig{}).tokenizer_checkpoint;
    const bool read_by_config = out_root.empty() || out_root == configured;
    const std::string how = read_by_config
                                ? "vqgpt train reads it from gpt.tokenizer_checkpoint"
                                : "for vqgpt train, set gpt.tokenizer_checkpoint: " + ckpt_root +
                                      " (or pass --tokenizer " + ckpt_root + ")";
    std::printf("tokenizer: %s (psnr %.2f dB, codebook usage %.1f%%); %s\n",
                r.final_checkpoint.c_str(), r.psnr, 100.0 * r.codebook.usage, how.c_str());
    std::fflush(stdout);
  }
  return r.final_checkpoint;
}

}  // namespace zt::vqgpt
