// Shared app helpers: engine and learning-rate construction from an AppConfig, window
// statistics reduced across ranks, metrics files and the progress display.
#include "apps/common/train_util.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <numbers>
#include <set>
#include <sstream>

#include "configs/deepspeed.h"
#include "core/ops.h"
#include "core/text_file.h"
#include "zero/checkpoint.h"

namespace zt::app {

namespace fs = std::filesystem;

// ---- engine construction

zero::OptimizerConfig optimizer_config(const config::TrainConfig& train) {
  zero::OptimizerConfig o;
  switch (train.optimizer) {
    case config::Optimizer::adamw:
      o.type = "adamw";
      break;
    case config::Optimizer::adam:
      o.type = "adam";
      break;
    case config::Optimizer::sgd:
      o.type = "sgd";
      break;
  }
  o.lr = train.lr;
  o.beta1 = train.betas[0];
  o.beta2 = train.betas[1];
  o.eps = train.eps;
  o.weight_decay = train.weight_decay;
  o.weight_decay_1d = train.weight_decay_1d;
  o.no_weight_decay = train.no_weight_decay;
  o.param_groups = train.param_groups;
  o.momentum = train.momentum;
  return o;
}

zero::Config zero_config(const config::AppConfig& cfg) {
  return cfg.zero;  // parsed and checked by configs/ (zero_optimization, bf16/fp16, buffers)
}

namespace {

// Mixed precision at the edges of the model's parts: a module whose parameters are stored
// in `low` computes in it, while floating tensors enter and leave it in f32. So the code
// between parts (losses, the glue of a model's forward, a replicated f32 part such as a
// frozen tokenizer) never meets a 16-bit tensor, and gradients flow back through the casts.
void compute_in(nn::Module& m, DType low) {
  m.add_forward_pre_hook([low](nn::Module&, std::vector<Tensor>& inputs) {
    for (Tensor& t : inputs)
      if (t.defined() && t.dtype() == DType::f32) t = t.to(low);
  });
  m.add_forward_hook([low](nn::Module&, const std::vector<Tensor>&, std::vector<Tensor>& outputs) {
    for (Tensor& t : outputs)
      if (t.defined() && t.dtype() == low) t = t.to(DType::f32);
  });
}

bool stores_in(const nn::Module& m, DType low, bool recurse) {
  for (const auto& [name, p] : m.named_parameters(recurse))
    if (p.dtype() == low) return true;
  return false;
}

// The parts are the top-level submodules holding low-precision parameters (or the whole
// model when it holds such parameters itself).
void cast_at_part_edges(nn::Module& model, DType low) {
  if (stores_in(model, low, /*recurse=*/false)) {
    compute_in(model, low);
    return;
  }
  for (const auto& [name, child] : model.named_children())
    if (stores_in(*child, low, /*recurse=*/true)) compute_in(*child, low);
}

// Each message once per process (several engines may be built from one config).
void warn_once(const std::vector<std::string>& warnings, comm::Communicator& comm) {
  if (comm.rank() != 0) return;
  static std::mutex mu;
  static std::set<std::string> said;
  std::lock_guard<std::mutex> lock(mu);
  for (const std::string& w : warnings)
    if (said.insert(w).second) std::fprintf(stderr, "warning: %s\n", w.c_str());
}

}  // namespace

void apply_replicated(nn::Module& model, const std::vector<std::string>& paths,
                      comm::Communicator& comm) {
  for (const std::string& path : paths) {
    std::shared_ptr<nn::Module> sub = model.find(path);
    if (!sub) {
      std::string known;
      for (const auto& [name, m] : model.named_children())
        known += (known.empty() ? "" : ", ") + name;
      ZT_CHECK(false, "replicated: no module '", path, "' in the model; top-level modules: ", known,
               " (use dotted paths such as 'encoder.down.0')");
    }
    zero::replicate(*sub, comm);
  }
}

int64_t checkpoint_activations(nn::Module& model, const config::TrainConfig& train,
                               const std::vector<std::string>& block_types) {
  if (!train.activation_checkpointing) return 0;
  int64_t n = 0;
  for (const auto& [path, m] : model.named_modules())
    if (std::find(block_types.begin(), block_types.end(), m->type_name()) != block_types.end()) {
      m->set_checkpointing(true);
      ++n;
    }
  ZT_CHECK(n > 0, "train.activation_checkpointing: the model has no block to checkpoint");
  return n;
}

std::unique_ptr<zero::Engine> make_engine(std::shared_ptr<nn::Module> model,
                                          const config::AppConfig& cfg, comm::Communicator& comm) {
  warn_once(cfg.warnings, comm);
  config::check_world_size(cfg, comm.size());  // DeepSpeed's train_batch_size, if given
  apply_replicated(*model, cfg.replicated, comm);
  nn::Module& m = *model;
  auto engine = std::make_unique<zero::Engine>(std::move(model), comm, zero_config(cfg),
                                               optimizer_config(cfg.train));
  const DType low = cfg.zero.precision.dtype();
  if (low != DType::f32) cast_at_part_edges(m, low);
  if (!cfg.train.trace.empty()) engine->set_timeline(cfg.train.trace, cfg.train.trace_steps);
  return engine;
}

std::unique_ptr<StepGraph> make_step_graph(const config::TrainConfig& train, zero::Engine& engine,
                                           Device device, double dropout, const char* dropout_key,
                                           const char* app) {
  if (!train.cuda_graph) return nullptr;
  const std::string why = engine.capture_blocker();
  ZT_CHECK(why.empty(), app, ": train.cuda_graph: the step cannot be captured: ", why);
  ZT_CHECK(dropout == 0, app, ": train.cuda_graph: ", dropout_key, " is ", dropout,
           "; random draws cannot be replayed (set it to 0)");
  engine.set_capturable(true);
  return std::make_unique<StepGraph>(device);
}

std::string cuda_missing() {
#ifndef ZT_WITH_CUDA
  return "needs a CUDA build; rebuild with -DZT_CUDA=ON";
#else
  return cuda_available() ? "" : "but no GPU is visible; check nvidia-smi and CUDA_VISIBLE_DEVICES";
#endif
}

Device train_device(const config::TrainConfig& train, const comm::Communicator& comm,
                    const char* app) {
  if (!train.attention.empty()) set_attention_kernel(parse_attention_kernel(train.attention));
  if (train.device == "cpu") return Device::cpu();
  ZT_CHECK(train.device == "cuda", app, ": train.device must be cpu or cuda, got '", train.device,
           "'");
  if (const std::string why = cuda_missing(); !why.empty()) {
    ZT_FAIL(app, ": train.device 'cuda' ", why, ", or set train.device=cpu");
  }
  set_tf32({.matmul = train.tf32 == "all", .conv = train.tf32 != "none"});
  if (comm.device().is_cuda()) return comm.device();  // NCCL: this process's GPU
  ZT_CHECK(comm.size() == 1, app, ": train.device 'cuda' with ", comm.size(),
           " thread ranks; thread ranks exchange host memory, so on GPUs run one rank per "
           "process: mpirun -np N ... (NCCL, one GPU each), or --ranks 1");
  return Device::cuda(0);
}

void all_reduce_host(comm::Communicator& comm, Tensor& t, comm::ReduceOp op) {
  if (!comm.device().is_cuda()) {
    comm.all_reduce(t, op);
    return;
  }
  Tensor d = t.to(comm.device());
  comm.all_reduce(d, op);
  t.copy_(d.to(Device::cpu()));
}

// ---- learning rate

namespace {
// Warmup longer than the run (a short run of a long config) is cut to the run.
int64_t warmup_of(const config::TrainConfig& t) {
  return std::min(t.warmup, t.steps);
}

optim::LrSchedule base_schedule(const config::TrainConfig& t) {
  switch (t.schedule) {
    case config::Schedule::cosine:
      return optim::LrSchedule::warmup_cosine(t.lr, warmup_of(t), t.steps, t.min_lr);
    case config::Schedule::step:
      return optim::LrSchedule::step(t.lr, t.step_size, t.gamma);
    default:
      return optim::LrSchedule::constant(t.lr);
  }
}
}  // namespace

LrPlan::LrPlan(const config::TrainConfig& train)
    : kind_(train.schedule),
      deepspeed_(train.deepspeed_schedule),
      base_(train.lr),
      min_lr_(train.min_lr),
      warmup_(warmup_of(train)),
      total_(train.steps),
      deepspeed_warmup_(train.warmup),
      schedule_(base_schedule(train)) {}

double LrPlan::lr_at(int64_t step) const {
  if (deepspeed_) return deepspeed_lr_at(step);
  if (kind_ == config::Schedule::cosine) return schedule_.lr_at(step);  // has its own warmup
  if (step < warmup_) return base_ * static_cast<double>(step + 1) / static_cast<double>(warmup_);
  if (kind_ == config::Schedule::linear) {
    const int64_t span = std::max<int64_t>(1, total_ - warmup_);
    const double frac =
        std::min(1.0, static_cast<double>(step - warmup_) / static_cast<double>(span));
    return base_ + (min_lr_ - base_) * frac;
  }
  if (kind_ == config::Schedule::step) return schedule_.lr_at(step - warmup_);
  return base_;
}

// DeepSpeed's WarmupLR, WarmupDecayLR and WarmupCosineLR (linear warmup from 0), as they
// step: the scheduler starts at the warmup's start, and steps after each update, so update
// u >= 1 runs at iteration k = u - 1; the warmup lasts at least 2 iterations.
double LrPlan::deepspeed_lr_at(int64_t step) const {
  if (step == 0) return 0.0;
  const auto k = static_cast<double>(step - 1);
  const auto w = static_cast<double>(std::max<int64_t>(2, deepspeed_warmup_));
  const double after = std::max(1.0, static_cast<double>(total_) - w);
  if (k < w) return base_ * k / w;
  if (kind_ == config::Schedule::linear)
    return min_lr_ + (base_ - min_lr_) * std::max(0.0, (static_cast<double>(total_) - k) / after);
  if (kind_ == config::Schedule::cosine)
    return min_lr_ +
           (base_ - min_lr_) * 0.5 * (1.0 + std::cos(std::numbers::pi * (k - w + 1.0) / after));
  return base_;
}

// ---- statistics

double psnr_from_mse(double mse) {
  return mse > 0 ? 10.0 * std::log10(4.0 / mse) : 99.0;
}

void ScalarWindow::add(const std::string& name, double value) {
  auto it = std::lower_bound(names_.begin(), names_.end(), name);
  const auto i = static_cast<size_t>(it - names_.begin());
  if (it == names_.end() || *it != name) {
    names_.insert(it, name);
    sums_.insert(sums_.begin() + static_cast<std::ptrdiff_t>(i), 0.0);
    counts_.insert(counts_.begin() + static_cast<std::ptrdiff_t>(i), 0.0);
  }
  sums_[i] += value;
  counts_[i] += 1.0;
}

std::vector<std::pair<std::string, double>> ScalarWindow::reduce(comm::Communicator& comm) {
  // The names any rank holds, sorted; one all-reduce of their sums and counts (0 and 0
  // where this rank has none).
  std::string mine;
  for (const auto& n : names_) mine += n + '\n';
  std::set<std::string> names;
  for (const std::string& list : comm.all_gather_bytes(mine)) {
    std::istringstream in(list);
    for (std::string n; std::getline(in, n);) names.insert(n);
  }
  const auto n = static_cast<int64_t>(names.size());
  std::vector<double> v(2 * static_cast<size_t>(n), 0.0);
  int64_t i = 0;
  for (const std::string& name : names) {
    const auto it = std::lower_bound(names_.begin(), names_.end(), name);
    if (it != names_.end() && *it == name) {
      const auto at = static_cast<size_t>(it - names_.begin());
      v[static_cast<size_t>(i)] = sums_[at];
      v[static_cast<size_t>(n + i)] = counts_[at];
    }
    ++i;
  }
  std::vector<std::pair<std::string, double>> out;
  if (n > 0) {
    Tensor t = from_vector(v, {2 * n}, DType::f64);
    all_reduce_host(comm, t, comm::ReduceOp::kSum);
    const double* d = t.data<double>();
    i = 0;
    for (const std::string& name : names) {
      out.emplace_back(name, d[i] / d[n + i]);  // every name was added somewhere: count > 0
      ++i;
    }
  }
  names_.clear();
  sums_.clear();
  counts_.clear();
  return out;
}

CodebookUsage::CodebookUsage(int64_t codebook_size)
    : counts_(static_cast<size_t>(codebook_size), 0) {
  ZT_CHECK(codebook_size > 0, "CodebookUsage: codebook_size must be > 0, got ", codebook_size);
}

void CodebookUsage::add(const Tensor& codes) {
  Tensor c = codes.to(Device::cpu()).to(DType::i64).contiguous();
  const int64_t* d = c.data<int64_t>();
  const auto k = static_cast<int64_t>(counts_.size());
  for (int64_t i = 0; i < c.numel(); ++i) {
    ZT_CHECK(d[i] >= 0 && d[i] < k, "codebook usage: code id ", d[i], " outside [0, ", k, ")");
    ++counts_[static_cast<size_t>(d[i])];
  }
}

CodebookStats CodebookUsage::reduce(comm::Communicator& comm) {
  const auto k = static_cast<int64_t>(counts_.size());
  Tensor t = Tensor::empty({k}, DType::i64);
  std::copy(counts_.begin(), counts_.end(), t.data<int64_t>());
  all_reduce_host(comm, t, comm::ReduceOp::kSum);
  const int64_t* d = t.data<int64_t>();
  CodebookStats s;
  for (int64_t i = 0; i < k; ++i) s.tokens += d[i];
  double entropy = 0.0;
  for (int64_t i = 0; i < k; ++i) {
    if (d[i] == 0) continue;
    ++s.used;
    const double p = static_cast<double>(d[i]) / static_cast<double>(s.tokens);
    entropy -= p * std::log(p);
  }
  s.usage = static_cast<double>(s.used) / static_cast<double>(k);
  s.perplexity = s.tokens ? std::exp(entropy) : 0.0;
  std::fill(counts_.begin(), counts_.end(), 0);
  return s;
}

double StepTimer::stop() {
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  window_ += s;
  total_ += s;
  ++window_steps_;
  ++steps_;
  return s;
}

double StepTimer::window_mean() {
  const double m = window_steps_ ? window_ / static_cast<double>(window_steps_) : 0.0;
  window_ = 0.0;
  window_steps_ = 0;
  return m;
}

// ---- output

void say_nothing_to_train(const char* app, int64_t start, int64_t steps) {
  std::printf(
      "%s: nothing to train: the run is at step %lld and train.steps is %lld (raise "
      "train.steps to train further)\n",
      app, static_cast<long long>(start), static_cast<long long>(steps));
  std::fflush(stdout);
}

std::string format_duration(double seconds) {
  char buf[32];
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<int64_t>(seconds + 0.5);
  if (s < 60)  // rounded first: 59.6 s is "1m00s", not "60s"
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(s));
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  else
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>(s % 3600 / 60));
  return buf;
}

bool stdout_is_tty() {
  return ::isatty(STDOUT_FILENO) == 1;
}

MetricsWriter::MetricsWriter(const std::string& path, bool append) : path_(path) {
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty()) fs::create_directories(parent);
  f_ = std::fopen(path.c_str(), append ? "a" : "w");
  ZT_CHECK(f_ != nullptr, "cannot open metrics file '", path, "' for writing; check that ",
           parent.string(), " is writable");
}

MetricsWriter::~MetricsWriter() {
  if (f_) std::fclose(f_);
}

// One record of a JSON-lines metrics file.
static std::string metrics_line(const nlohmann::json& record) {
  return record.dump() + "\n";
}

std::string epoch_note(int64_t batch, int64_t world, int64_t accumulation, int64_t dataset_size) {
  const int64_t per_step = batch * world * accumulation;
  if (per_step <= dataset_size) return "";
  return "one step reads " + std::to_string(per_step) + " clips (train.batch " +
         std::to_string(batch) + " x " + std::to_string(world) + " ranks x " +
         std::to_string(accumulation) +
         " train.gradient_accumulation_steps), more than the training data's " +
         std::to_string(dataset_size) + ": every step spans more than an epoch";
}

void MetricsWriter::write(const nlohmann::json& record) {
  const std::string line = metrics_line(record);
  // A full disk shows at the flush: the line would be lost without a word.
  ZT_CHECK(std::fwrite(line.data(), 1, line.size(), f_) == line.size() && std::fflush(f_) == 0,
           "writing metrics to '", path_, "' failed (disk full?)");
  if (!tb_ || !record.is_object()) return;
  const int64_t step = record.value("step", int64_t{0});
  const auto kind = record.find("kind");
  const std::string prefix =
      kind != record.end() && kind->is_string() ? kind->get<std::string>() + "/" : "";
  std::function<void(const std::string&, const nlohmann::json&)> add =
      [&](const std::string& tag, const nlohmann::json& v) {
        if (v.is_object())
          for (const auto& [k, x] : v.items()) add(tag + "/" + k, x);
        else if (v.is_number())
          tb_->add_scalar(tag, step, v.get<double>());
      };
  for (const auto& [k, v] : record.items())
    if (k != "step") add(prefix + k, v);
}

void MetricsWriter::enable_tensorboard(const std::string& dir, int64_t resumed_step) {
  tb_ = std::make_unique<data::TensorBoardWriter>(dir);
  if (resumed_step > 0) tb_->add_session_start(resumed_step + 1);
}

void MetricsWriter::image(const std::string& tag, int64_t step, const data::Image& img) {
  if (tb_) tb_->add_image(tag, step, data::encode_png(img), img.height, img.width, 3);
}

std::vector<nlohmann::json> read_metrics(const std::string& path, std::string* torn) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  if (!in) {  // none yet is no records; one that cannot be read is not
    ZT_CHECK(!fs::exists(path), "cannot read the metrics file '", path,
             "': ", std::strerror(errno));
    return out;
  }
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  for (size_t n = 0; n < lines.size(); ++n) {
    if (lines[n].empty()) continue;
    try {
      out.push_back(nlohmann::json::parse(lines[n]));
    } catch (const nlohmann::json::exception& e) {
      if (torn && n + 1 == lines.size()) {
        *torn = path + ":" + std::to_string(n + 1) +
                ": dropped a torn last line (a write cut short when the run stopped)";
        break;
      }
      ZT_FAIL(path, ":", n + 1, ": not a JSON object (", e.what(),
              "); fix or delete that line (a torn line is dropped only when it is the last)");
    }
    const nlohmann::json& r = out.back();
    const auto kind = r.is_object() ? r.find("kind") : r.end();
    ZT_CHECK(r.is_object() && r.contains("step") && r["step"].is_number_integer() &&
                 (kind == r.end() || kind->is_string()),
             path, ":", n + 1, ": not a metrics record (a JSON object with an integer \"step\" ",
             "and a string \"kind\" if any): ", lines[n].substr(0, 80),
             "; fix or delete that line");
  }
  return out;
}

std::string filter_metrics(const std::string& path,
                           const std::function<bool(const nlohmann::json&)>& keep) {
  std::string torn;
  auto records = read_metrics(path, &torn);
  int64_t dropped = 0;
  std::string kept;
  for (const auto& r : records) {
    if (keep(r))
      kept += metrics_line(r);
    else
      ++dropped;
  }
  write_text_atomically(path, kept);
  std::string note = torn;
  if (dropped > 0)
    note += (note.empty() ? "" : "; ") + path + ": dropped " + std::to_string(dropped) + " record" +
            (dropped == 1 ? "" : "s") + " past the resumed step";
  return note;
}

// Under mpirun a rank's stdout may be a pseudo-terminal even when mpirun's own output
// goes to a file, so redrawing is off there: plain lines only.
Progress::Progress(int64_t total_steps, bool tty)
    : total_(std::max<int64_t>(1, total_steps)), tty_(tty && !comm::under_mpirun()) {}

void Progress::update(int64_t step, const std::string& stats) {
  if (!tty_) return;
  constexpr int kWidth = 24;
  const double frac = std::clamp(static_cast<double>(step) / static_cast<double>(total_), 0.0, 1.0);
  const int filled = static_cast<int>(frac * kWidth);
  std::string bar(static_cast<size_t>(filled), '#');
  bar += std::string(static_cast<size_t>(kWidth - filled), '.');
  std::printf("\r\033[K[%s] %3.0f%% %s", bar.c_str(), frac * 100.0, stats.c_str());
  std::fflush(stdout);
  drawn_ = true;
}

void Progress::line(const std::string& text) {
  if (tty_ && drawn_) std::printf("\r\033[K");
  std::printf("%s\n", text.c_str());
  std::fflush(stdout);
  drawn_ = false;
}

void Progress::finish() {
  if (tty_ && drawn_) std::printf("\n");
  std::fflush(stdout);
  drawn_ = false;
}

void export_engine(zero::Engine& engine, const std::string& out, comm::Communicator& comm) {
  ZT_CHECK(!out.empty(), "export: pass --out with the .safetensors file to write");
  if (comm.rank() == 0) {
    const fs::path parent = fs::path(out).parent_path();
    if (!parent.empty()) fs::create_directories(parent);
  }
  comm.barrier();
  zero::export_consolidated(engine, out);
}

std::string save_training_checkpoint(zero::Engine& engine, const std::string& root, int64_t step,
                                     const config::AppConfig& cfg, const data::DataLoader& loader,
                                     const std::string& app_name,
                                     std::vector<std::pair<std::string, Tensor>> state) {
  const data::LoaderState pos = loader.state();
  zero::CheckpointExtra extra;
  extra.step = step;
  extra.config_yaml = cfg.root.dump();
  // A DeepSpeed JSON sets much of the run (config_yaml holds only its path): kept as it
  // was, so that a resume compares the settings it gave, not the file as it is then.
  if (!cfg.deepspeed_config.empty())
    extra.user["deepspeed_json"] = config::read_deepspeed_file(cfg.deepspeed_config);
  extra.loader_epoch = pos.epoch;
  extra.loader_position = pos.position;
  extra.loader_batch = loader.options().batch_size;
  extra.loader_dataset_size = loader.sampler().dataset_size();
  extra.user["app"] = app_name;
  extra.state = std::move(state);
  extra.state.emplace_back("rng_state", gather_rng_state(engine.comm()));
  return zero::save_checkpoint(engine, root, zero::checkpoint_tag(step), extra,
                               static_cast<int>(cfg.train.keep_checkpoints));
}

Tensor checkpoint_state(const std::vector<std::pair<std::string, Tensor>>& state,
                        const std::string& name) {
  for (const auto& [n, t] : state)
    if (n == name) return t;
  return {};
}

}  // namespace zt::app
