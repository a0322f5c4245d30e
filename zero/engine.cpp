// The ZeRO-3 engine: hooks, fetch/prefetch/release, gradient reduction and the step.
#include "zero/engine.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/ops.h"
#include "zero/replicas.h"
#include "zero/sync_batchnorm.h"

namespace zt::zero {

std::string MemoryReport::json() const {
  std::ostringstream os;
  os << "{\"param_shard\":" << param_shard << ",\"grad_shard\":" << grad_shard
     << ",\"optim_state\":" << optim_state << ",\"model_state\":" << model_state()
     << ",\"gathered_param\":" << gathered_param
     << ",\"gathered_param_peak\":" << gathered_param_peak << ",\"activation\":" << activation
     << ",\"activation_peak\":" << activation_peak << ",\"comm_buffer_peak\":" << comm_buffer_peak
     << "}";
  return os.str();
}

Engine::Engine(std::shared_ptr<nn::Module> model, comm::Communicator& comm, Config config,
               OptimizerConfig optimizer)
    : model_(std::move(model)), comm_(comm), config_(std::move(config)) {
  ZT_CHECK(model_ != nullptr, "zero::Engine: model is null");
  ZT_CHECK(config_.stage == 3, "zero::Engine implements stage 3 only, got stage ", config_.stage);
  autograd::NoGradGuard ng;
  std::vector<std::pair<std::string, Tensor>> trainable;
  for (auto& [name, p] : model_->named_parameters()) {
    p.set_name(name);
    if (is_replicated(p)) {
      broadcast_tensor(p, comm_, 0);
      replicas_.emplace_back(name, p);
      if (p.requires_grad()) trainable.emplace_back(name, p);
      continue;
    }
    if (!is_partitioned(p)) partition_param(p, comm_, 0);
    ZeroParam* z = zero_param(p);
    DType low = config_.precision.dtype();
    Tensor master;
    if (low != DType::f32 && z->dtype == DType::f32) {
      // Mixed precision: the fp32 shard becomes the master; the parameter is stored,
      // gathered and computed in the low-precision type.
      {
        MemTagScope tag(MemTag::kOptimState);
        master = z->shard.clone();
      }
      MemTagScope tag(MemTag::kParamShard);
      z->shard = master.to(low);
      z->dtype = low;
      p.impl()->dtype = low;
    }
    z->persistent = p.numel() <= config_.stage3_param_persistence_threshold;
    ManagedParam mp{name, p, z->shard, Tensor()};
    if (p.requires_grad()) {
      if (master.defined()) {
        mp.master = master;
        z->master = master;
      } else if (z->dtype != DType::f32) {
        MemTagScope tag(MemTag::kOptimState);
        mp.master = z->shard.to(DType::f32);
        z->master = mp.master;
      }
      MemTagScope tag(MemTag::kGradShard);
      mp.grad_shard = zeros({z->part.shard_numel}, DType::f32, z->device);
      trainable.emplace_back(name, mp.master);
    }
    param_index_[p.impl()] = params_.size();
    params_.push_back(mp);
  }
  for (auto& [name, b] : model_->named_buffers()) {
    broadcast_tensor(b, comm_, 0);
    buffers_.emplace_back(name, b);
  }
  if (config_.precision.fp16) {
    loss_scale_ = config_.precision.loss_scale > 0
                      ? config_.precision.loss_scale
                      : std::ldexp(1.0, config_.precision.initial_scale_power);
    hysteresis_left_ = config_.precision.hysteresis;
  }
  optimizer_ = make_optimizer(optimizer, trainable);
  reducer_ = std::make_unique<GradReducer>(comm_, config_.reduce_bucket_size, config_.overlap_comm);
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].grad_shard.defined()) continue;
    grad_hook_slot_.emplace_back(i, params_[i].param.impl()->post_accumulate_hooks.size());
    params_[i].param.register_post_accumulate_grad_hook(
        [this, i](const Tensor&) { on_grad_ready(i); });
  }
  install_hooks();
  if (config_.sync_batchnorm) enable_sync_batchnorm(*model_, comm_);
  for (auto& mp : params_)
    if (zero_param(mp.param)->persistent) {
      issue(mp.param, false);
      wait_gather(mp.param, comm_);
    }
  verify_replicas();
}

Engine::~Engine() {
  // The model may outlive the engine: take every hook that points back at it.
  for (Hooked& h : hooked_) {
    h.module->remove_hook(h.pre_id);
    h.module->remove_hook(h.post_id);
  }
  for (auto it = grad_hook_slot_.rbegin(); it != grad_hook_slot_.rend(); ++it) {
    auto& hooks = params_[it->first].param.impl()->post_accumulate_hooks;
    if (it->second < hooks.size()) hooks.erase(hooks.begin() + static_cast<int64_t>(it->second));
  }
}

void Engine::log(const std::string& e) {
  if (log_events_) events_.push_back(e);
}

void Engine::install_hooks() {
  for (auto& [path, m] : model_->named_modules()) {
    Hooked h;
    h.path = path.empty() ? "<root>" : path;
    h.module = m.get();
    for (auto& [n, p] : m->local_parameters()) {
      if (!is_partitioned(p)) continue;
      h.params.push_back(p);
      h.elems += zero_param(p)->part.padded_numel();
    }
    if (h.params.empty()) continue;
    int id = static_cast<int>(hooked_.size());
    h.pre_id = m->add_forward_pre_hook([this, id](nn::Module&, std::vector<Tensor>& inputs) {
      fetch(id, false);
      if (!autograd::grad_mode_enabled()) return;
      // Post-backward boundary: when the gradients of this module's inputs are ready,
      // its backward is over and its parameters can go.
      std::vector<size_t> idx;
      std::vector<Tensor> wrap;
      for (size_t i = 0; i < inputs.size(); ++i)
        if (inputs[i].defined() && inputs[i].requires_grad()) {
          idx.push_back(i);
          wrap.push_back(inputs[i]);
        }
      if (wrap.empty()) return;
      auto out = autograd::apply_function(
          "zero_post_backward", wrap, [](const std::vector<Tensor>& x) { return x; },
          [this, id](const std::vector<Tensor>& g) {
            release(id);
            return g;
          });
      for (size_t k = 0; k < idx.size(); ++k) inputs[idx[k]] = out[k];
    });
    h.post_id = m->add_forward_hook(
        [this, id](nn::Module&, const std::vector<Tensor>&, std::vector<Tensor>& outputs) {
          log("forward_end:" + hooked_[id].path);
          if (autograd::grad_mode_enabled()) {
            // Pre-backward boundary: gradients reaching this module's outputs mean its
            // backward is about to run, so gather its parameters again.
            std::vector<size_t> idx;
            std::vector<Tensor> wrap;
            for (size_t i = 0; i < outputs.size(); ++i)
              if (outputs[i].defined() && outputs[i].requires_grad()) {
                idx.push_back(i);
                wrap.push_back(outputs[i]);
              }
            if (!wrap.empty()) {
              auto out = autograd::apply_function(
                  "zero_pre_backward", wrap, [](const std::vector<Tensor>& x) { return x; },
                  [this, id](const std::vector<Tensor>& g) {
                    if (!end_of_backward_queued_) {
                      end_of_backward_queued_ = true;
                      autograd::queue_callback([this] {
                        end_of_backward_queued_ = false;
                        reducer_->flush();
                        release_all();
                      });
                    }
                    fetch(id, true);
                    return g;
                  });
              for (size_t k = 0; k < idx.size(); ++k) outputs[idx[k]] = out[k];
            }
          }
          release(id);
        });
    hooked_.push_back(std::move(h));
  }
}

void Engine::issue(const Tensor& p, bool prefetch) {
  ZeroParam* z = zero_param(p);
  if (z->status != ParamStatus::kNotAvailable) return;
  issue_gather(p, comm_);
  live_elems_ += z->part.padded_numel();
  ++stats_.gathers_issued;
  if (prefetch) ++stats_.prefetches_issued;
  log((prefetch ? "prefetch:" : "gather:") + p.name());
}

void Engine::fetch(int id, bool backward_phase) {
  Hooked& h = hooked_[id];
  bool training = backward_phase || autograd::grad_mode_enabled();
  log((backward_phase ? "fetch_backward:" : "fetch:") + h.path);
  if (training && !trace_.on_fetch(id, h.elems)) {
    ++stats_.trace_invalidations;
    if (stats_.trace_invalidations == 1)
      std::fprintf(stderr,
                   "zt: rank %d: module '%s' fetched out of the recorded order; prefetching "
                   "is off until the trace is recorded again\n",
                   comm_.rank(), h.path.c_str());
  }
  for (const Tensor& p : h.params) issue(p, false);
  if (training) prefetch_after(id);
  for (const Tensor& p : h.params) wait_gather(p, comm_);
}

void Engine::prefetch_after(int) {
  if (trace_.state() != Trace::State::kValid || config_.stage3_prefetch_bucket_size <= 0) return;
  int64_t budget = config_.stage3_prefetch_bucket_size;
  for (int next : trace_.upcoming(hooked_.size() * 2 + 8)) {
    for (const Tensor& p : hooked_[next].params) {
      ZeroParam* z = zero_param(p);
      int64_t n = z->part.padded_numel();
      if (z->status == ParamStatus::kNotAvailable) {
        if (budget < n || live_elems_ + n > config_.stage3_max_live_parameters) return;
        issue(p, true);
      }
      budget -= n;
      if (budget <= 0) return;
    }
  }
}

void Engine::release(int id) {
  Hooked& h = hooked_[id];
  bool training = autograd::grad_mode_enabled() || autograd::in_backward();
  if (training) {
    int64_t d = trace_.reuse_distance(id);
    if (d >= 0 && d < config_.stage3_max_reuse_distance) return;
  }
  log("release:" + h.path);
  for (const Tensor& p : h.params) {
    ZeroParam* z = zero_param(p);
    if (z->persistent || z->holds > 0 || z->status == ParamStatus::kNotAvailable) continue;
    release_param(p);
    live_elems_ -= z->part.padded_numel();
    ++stats_.releases;
  }
}

void Engine::release_all() {
  for (ManagedParam& mp : params_) {
    ZeroParam* z = zero_param(mp.param);
    if (z->persistent || z->holds > 0 || z->status == ParamStatus::kNotAvailable) continue;
    release_param(mp.param);
    live_elems_ -= z->part.padded_numel();
    ++stats_.releases;
  }
}

void Engine::on_grad_ready(size_t i) {
  reducer_->add(params_[i].param, params_[i].grad_shard);
  stats_.buckets_reduced = reducer_->buckets();
}

std::vector<Tensor> Engine::forward(const std::vector<Tensor>& inputs) {
  MemTagScope tag(MemTag::kActivation);
  return model_->call(inputs);
}

void Engine::backward(const Tensor& loss) {
  double scale = loss_scale_ / config_.gradient_accumulation_steps;
  Tensor l = scale != 1.0 ? mul(loss, scale) : loss;
  {
    MemTagScope tag(MemTag::kActivation);
    l.backward();
  }
  reducer_->flush();
}

void Engine::reduce_gradients() {
  reducer_->flush();
  reducer_->drain();
  stats_.buckets_reduced = reducer_->buckets();
}

bool Engine::step() {
  ++stats_.micro_steps;
  if (++micro_ < config_.gradient_accumulation_steps) return false;
  micro_ = 0;
  autograd::NoGradGuard ng;
  reduce_gradients();

  // Trainable replicas: every rank has the full gradient of its own batch; average them.
  std::vector<Tensor> replica_grads;
  for (auto& [name, p] : replicas_) {
    if (!p.requires_grad()) continue;
    Tensor g = p.grad();
    if (!g.defined()) {
      g = zeros_like(p);
      p.set_grad(g);
    }
    Tensor gc = g.contiguous();
    if (comm_.size() > 1) comm_.all_reduce(gc, comm::ReduceOp::kAvg);
    if (!gc.same(g)) g.copy_(gc);
    replica_grads.push_back(g);
  }

  // Global norm: shard norms summed across ranks, replicas counted once.
  std::vector<Tensor> shard_grads;
  for (ManagedParam& mp : params_)
    if (mp.grad_shard.defined()) shard_grads.push_back(mp.grad_shard);
  double shard_sq = optim::grad_norm_sq(shard_grads);
  if (comm_.size() > 1) {
    Tensor t = full({1}, shard_sq, DType::f64);
    comm_.all_reduce(t, comm::ReduceOp::kSum);
    shard_sq = t.item();
  }
  last_grad_norm_ = std::sqrt(shard_sq + optim::grad_norm_sq(replica_grads));
  if (loss_scale_ != 1.0) {
    // fp16: gradients carry the loss scale. A non-finite norm (the all-reduce spreads it
    // to every rank) means overflow: skip this update and lower the scale.
    if (!std::isfinite(last_grad_norm_)) {
      skip_overflowed_step();
      return false;
    }
    last_grad_norm_ /= loss_scale_;
    optim::scale_grads(shard_grads, 1.0 / loss_scale_);
    optim::scale_grads(replica_grads, 1.0 / loss_scale_);
    update_loss_scale(false);
  }
  if (config_.gradient_clipping > 0) {
    double coef = optim::clip_coefficient(last_grad_norm_, config_.gradient_clipping);
    if (coef < 1.0) {
      optim::scale_grads(shard_grads, coef);
      optim::scale_grads(replica_grads, coef);
    }
  }

  for (ManagedParam& mp : params_)
    if (mp.grad_shard.defined()) mp.master.set_grad(mp.grad_shard);
  {
    MemTagScope tag(MemTag::kOptimState);
    optimizer_->step();
  }
  for (ManagedParam& mp : params_) {
    if (!mp.grad_shard.defined()) continue;
    mp.master.set_grad(Tensor());
    mp.grad_shard.zero_();
    ZeroParam* z = zero_param(mp.param);
    if (!mp.master.same(z->shard)) z->shard.copy_(mp.master);
  }
  for (auto& [name, p] : replicas_) p.set_grad(Tensor());

  // Gathered copies are stale now: drop them, re-gather the persistent ones.
  refresh_from_master();
  sync_buffers();
  ++stats_.steps;
  if (trace_.end_step()) finish_trace_recording();
  stats_.trace_invalidations = trace_.invalidations();
  if (config_.buffers.verify_every > 0 && stats_.steps % config_.buffers.verify_every == 0)
    verify_replicas();
  return true;
}

void Engine::update_loss_scale(bool overflow) {
  if (config_.precision.loss_scale > 0) return;  // a fixed scale
  if (overflow) {
    good_steps_ = 0;
    if (--hysteresis_left_ <= 0) {
      loss_scale_ = std::max(loss_scale_ / 2, config_.precision.min_loss_scale);
      hysteresis_left_ = config_.precision.hysteresis;
    }
    return;
  }
  if (++good_steps_ >= config_.precision.loss_scale_window) {
    loss_scale_ *= 2;
    good_steps_ = 0;
  }
}

void Engine::skip_overflowed_step() {
  double before = loss_scale_;
  update_loss_scale(true);
  ++stats_.overflow_skips;
  if (comm_.rank() == 0)
    std::fprintf(stderr,
                 "zt: fp16 gradient overflow at step %ld: update skipped, loss scale %g -> %g\n",
                 static_cast<long>(stats_.steps), before, loss_scale_);
  for (ManagedParam& mp : params_)
    if (mp.grad_shard.defined()) mp.grad_shard.zero_();
  for (auto& [name, p] : replicas_) p.set_grad(Tensor());
  release_all();
  if (trace_.end_step()) finish_trace_recording();
}

void Engine::refresh_from_master() {
  autograd::NoGradGuard ng;
  for (ManagedParam& mp : params_) {
    ZeroParam* z = zero_param(mp.param);
    if (mp.master.defined() && !mp.master.same(z->shard)) z->shard.copy_(mp.master);
    if (z->status != ParamStatus::kNotAvailable) {
      release_param(mp.param);
      live_elems_ -= z->part.padded_numel();
    }
  }
  for (ManagedParam& mp : params_) {
    ZeroParam* z = zero_param(mp.param);
    if (z->persistent || z->holds > 0) {
      issue(mp.param, false);
      wait_gather(mp.param, comm_);
    }
  }
}

void Engine::finish_trace_recording() {
  std::string mine;
  for (int id : trace_.ids()) mine += hooked_[id].path + "\n";
  std::vector<std::string> all = comm_.all_gather_bytes(mine);
  bool same = true;
  for (const std::string& s : all) same = same && s == mine;
  if (same) return;
  // Name the first differing module on each rank.
  std::vector<std::vector<std::string>> lists;
  for (const std::string& s : all) {
    std::vector<std::string> l;
    std::istringstream is(s);
    for (std::string line; std::getline(is, line);) l.push_back(line);
    lists.push_back(l);
  }
  size_t i = 0;
  for (;; ++i) {
    bool differ = false;
    for (auto& l : lists)
      differ = differ || i >= l.size() || i >= lists[0].size() || l[i] != lists[0][i];
    if (differ) break;
  }
  std::ostringstream os;
  os << "ranks ran different modules during the traced step; first difference at fetch #" << i
     << ":";
  for (size_t r = 0; r < lists.size(); ++r)
    os << " rank " << r << " ran '" << (i < lists[r].size() ? lists[r][i] : "<nothing>") << "';";
  trace_.invalidate();
  ZT_FAIL(os.str(), " every rank must run the same modules in the same order under ZeRO-3");
}

void Engine::sync_buffers() {
  zero::sync_buffers(buffers_, config_.buffers, comm_);
}

void Engine::verify_replicas() {
  std::vector<std::pair<std::string, Tensor>> all = replicas_;
  all.insert(all.end(), buffers_.begin(), buffers_.end());
  zero::verify_replicas(all, comm_);
}

void Engine::set_lr(double lr) {
  optimizer_->set_lr(lr);
}
double Engine::lr() const {
  return optimizer_->lr();
}

MemoryReport Engine::memory_report() const {
  Device d = params_.empty() ? Device::cpu() : zero_param(params_[0].param)->device;
  MemoryCounters c = memory_stats(d);
  MemoryReport r;
  r.param_shard = c.cur(MemTag::kParamShard);
  r.grad_shard = c.cur(MemTag::kGradShard);
  r.optim_state = c.cur(MemTag::kOptimState);
  r.gathered_param = c.cur(MemTag::kGatheredParam);
  r.gathered_param_peak = c.pk(MemTag::kGatheredParam);
  r.activation = c.cur(MemTag::kActivation);
  r.activation_peak = c.pk(MemTag::kActivation);
  r.comm_buffer_peak = c.pk(MemTag::kCommBuffer);
  return r;
}

}  // namespace zt::zero

namespace zt::zero {

std::unique_ptr<optim::Optimizer> make_optimizer(
    const OptimizerConfig& cfg, std::vector<std::pair<std::string, Tensor>> params) {
  if (cfg.type == "adamw") {
    optim::AdamWOptions o(cfg.lr);
    o.betas(cfg.beta1, cfg.beta2).eps(cfg.eps).weight_decay(cfg.weight_decay);
    return std::make_unique<optim::AdamW>(std::move(params), o);
  }
  if (cfg.type == "adam") {
    return std::make_unique<optim::Adam>(std::move(params), optim::AdamOptions(cfg.lr)
                                                                .betas(cfg.beta1, cfg.beta2)
                                                                .eps(cfg.eps)
                                                                .weight_decay(cfg.weight_decay));
  }
  if (cfg.type == "sgd") {
    return std::make_unique<optim::SGD>(std::move(params), optim::SGDOptions(cfg.lr)
                                                               .momentum(cfg.momentum)
                                                               .nesterov(cfg.nesterov)
                                                               .weight_decay(cfg.weight_decay));
  }
  ZT_FAIL("unknown optimizer '", cfg.type, "': expected adamw, adam or sgd");
}

}  // namespace zt::zero
