// The ZeRO-3 engine: the parameters' records, backward, and the optimizer step.
#include "zero/engine.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <unordered_map>

#include "core/ops.h"
#include "nn/state_dict.h"
#include "zero/gathered.h"
#include "zero/hooks.h"
#include "zero/replicas.h"
#include "zero/sync_batchnorm.h"
#include "zero/window_check.h"

namespace zt::zero {

namespace {
// Every live engine's claims, process-wide: the model or parameter and its engine's rank.
std::mutex claims_mutex;
std::unordered_map<const void*, int>& claims() {
  static std::unordered_map<const void*, int> held;
  return held;
}
}  // namespace

void Engine::Claim::take(const void* what, const std::string& name, int rank) {
  std::lock_guard<std::mutex> lock(claims_mutex);
  auto [it, fresh] = claims().emplace(what, rank);
  if (fresh) {
    held_.push_back(what);
    return;
  }
  ZT_CHECK(it->second == rank, "zero::Engine (rank ", rank, "): ", name, " is trained by rank ",
           it->second,
           "'s engine too: the ranks share one model object. Under thread ranks each rank "
           "builds its own model inside the function comm::launch runs (as "
           "apps/examples/embed/main.cpp does)");
  ZT_FAIL("zero::Engine: ", name,
          " is trained by another zero::Engine that is still alive; one engine per model "
          "(destroy the first before building another)");
}

Engine::Claim::~Claim() {
  std::lock_guard<std::mutex> lock(claims_mutex);
  for (const void* p : held_) claims().erase(p);
}

Engine::Engine(std::shared_ptr<nn::Module> model, comm::Communicator& comm, Config config,
               OptimizerConfig optimizer)
    : model_(std::move(model)),
      comm_(comm),
      config_(std::move(config)),
      scaler_(config_.precision) {
  ZT_CHECK(model_ != nullptr, "zero::Engine: model is null");
  // Before anything reads the model: another rank's engine may be changing it.
  claim_.take(model_.get(), "the model (" + model_->type_name() + ")", comm.rank());
  check_config(config_);
  autograd::NoGradGuard ng;
  // Edits made so far in an open modifier scope reach every rank's shards first: the engine
  // re-gathers the copies a scope holds from the shards (regather_persistent, below) and
  // broadcasts the replicas, which would replace a read-only scope's edit without its exit's
  // error: that one is refused.
  GatheredParameters::check_unedited(
      "when this engine is built, which gathers the partitioned parameters again and "
      "broadcasts rank 0's replicas");
  GatheredParameters::commit_edits();
  std::vector<std::pair<std::string, Tensor>> trainable;    // what the optimizer updates
  std::vector<int64_t> trainable_dims;                      // their full shapes' dimensions
  std::vector<std::vector<std::string>> trainable_aliases;  // their tied tensors' other names
  std::vector<Tensor> reduced;                              // what the reducer reduces
  std::vector<ZeroParam*> with_grads;                       // gradient shards to allocate
  const DType low = config_.precision.dtype();
  // A tensor registered in two modules (tied weights) is listed once, under its first
  // name: one shard, one master, one gradient shard. The coordinator gathers it for either
  // module; autograd sums both uses' gradients (where a use is recomputed by a checkpointed
  // module, the reducer adds its gradient in). The optimizer's name patterns see every name.
  auto names_of = nn::names_by_tensor(*model_);
  auto aliases = [&](const std::string& name, const Tensor& p) {
    std::vector<std::string> v = names_of[p.impl()];
    v.erase(std::remove(v.begin(), v.end(), name), v.end());
    return v;
  };
  auto named = model_->named_parameters();
  for (auto& [name, p] : named)
    if (!is_replicated(p)) claim_.take(p.impl(), "parameter '" + name + "'", comm_.rank());
  check_rank_count(named);
  // The engine's window starts empty: a gradient already there would join its first step.
  for (auto& [name, p] : named)
    ZT_CHECK(!p.requires_grad() || !p.grad().defined(), "zero::Engine: parameter '", name,
             "' already holds a gradient (from a plain loss.backward(), or from a backward "
             "through an earlier engine that did not train it or was destroyed before its "
             "step), which the first step would add to its own: call model->zero_grad() "
             "before building the engine, or discard_gradients() on the earlier engine");
  // Offload moves the partitioned parameters' optimizer state: their device decides (a host
  // replica named first, a frozen tokenizer say, does not make a GPU model's stay).
  Device trains_on = named.empty() ? Device::cpu() : named.front().second.device();
  for (auto& [name, p] : named)
    if (is_partitioned(p)) {
      trains_on = zero_param(p)->device;
      break;
    }
  offload_ = std::make_unique<OptimizerOffload>(config_.offload_optimizer, trains_on);
  for (auto& [name, p] : named) {
    p.set_name(name);
    if (is_replicated(p)) {
      // A replica is updated in its own dtype, with no fp32 master beside it: in 16 bits
      // every update under half an ulp of the weight would be lost.
      ZT_CHECK(!(p.requires_grad() && is_16bit_float(p.dtype())), "zero::Engine: parameter '", name,
               "' is a trainable replica in ", dtype_name(p.dtype()),
               "; replicas are updated in their own dtype (no fp32 master), so small updates "
               "would round away: build it in f32 (mixed precision applies to partitioned "
               "parameters), partition it, or freeze it");
      broadcast_tensor(p, comm_, 0);
      replicas_.emplace_back(name, p);
      replica_trains_.push_back(p.requires_grad());
      if (p.requires_grad()) {
        trainable.emplace_back(name, p);
        trainable_dims.push_back(p.dim());
        trainable_aliases.push_back(aliases(name, p));
      }
      continue;
    }
    // Master shards, gradient shards and buckets are fp32: a wider parameter would be
    // trained at fp32 precision without a word.
    ZT_CHECK(!(p.requires_grad() && p.dtype() == DType::f64), "zero::Engine: parameter '", name,
             "' is f64 and requires grad; the engine trains it through fp32 master and "
             "gradient shards, so it would learn at fp32 precision: build it in f32 (or call "
             "model.to(DType::f32) before zero::Init partitions it; bf16/f16 through the "
             "precision config), or freeze it");
    // Mixed precision: fp32 parameters are stored, gathered and computed in the low
    // precision type; their fp32 values become the master shard the optimizer updates.
    // An earlier engine's precision does not carry over: the parameter's own dtype decides.
    const DType storage = engine_storage_dtype(p, low);
    if (!is_partitioned(p)) partition_param(p, comm_, 0, storage);
    ZeroParam* z = zero_param(p);
    z->set_storage_dtype(storage, p.requires_grad());
    z->persistent = p.numel() <= config_.stage3_param_persistence_threshold;
    if (p.requires_grad()) {
      if (offload_->moves()) {
        offload_->place(*z);  // the fp32 master (and with it the optimizer state) on the host
      } else if (z->dtype == DType::f32) {
        // An f32 shard is its own master. One an earlier engine left (mixed precision, or
        // offload on the host) holds the values: the shard takes them, the master goes.
        if (z->master.defined()) z->shard.copy_(z->master);
        z->master = Tensor();
      } else if (!z->master.defined() || z->master.device() != z->device) {
        MemTagScope tag(MemTag::kOptimState);  // (a master an offloading engine left on the host)
        z->master = z->master.defined() ? z->master.to(z->device) : z->shard.to(DType::f32);
      }
      with_grads.push_back(z);
      trainable.emplace_back(name, z->fp32_shard());
      trainable_dims.push_back(static_cast<int64_t>(z->shape.size()));
      trainable_aliases.push_back(aliases(name, p));
      reduced.push_back(p);
    }
    if (!p.requires_grad() && z->dtype == DType::f32)
      z->master = Tensor();  // frozen in f32: the shard holds the values (kept in 16 bits)
    params_.push_back({name, p});
  }
  allocate_grad_shards(with_grads);
  for (auto& [name, b] : model_->named_buffers()) {
    broadcast_tensor(b, comm_, 0);
    buffers_.emplace_back(name, b);
  }
  check_buffer_policies();
  {
    // Averaged ones only: under broadcast rank 0's write is the one kept, as the policy says;
    // under none each rank keeps its own.
    std::vector<Tensor> averaged;
    for (const auto& [name, b] : buffers_)
      averaged.push_back(config_.buffers.sync_for(name) == BufferSync::average ? b : Tensor());
    buffer_writes_ = std::make_unique<BufferWrites>(*model_, std::move(averaged));
  }
  optimizer_ = optim::make_optimizer(optimizer, trainable, trainable_dims, trainable_aliases);
  reducer_ = std::make_unique<GradReducer>(comm_, config_.reduce_bucket_size, config_.overlap_comm);
  coordinator_ = std::make_unique<Coordinator>(*model_, comm_, config_, stats_);
  // A failed forward may be retried (lesson 25) where every rank failed alike; its next
  // collective finds out whether they did.
  std::vector<Tensor> trained_replicas;
  for (size_t i = 0; i < replicas_.size(); ++i)
    if (replica_trains_[i]) trained_replicas.push_back(replicas_[i].second);
  hooks_ = std::make_unique<Hooks>(
      *model_, *coordinator_, *reducer_, reduced, trained_replicas,
      [this](const std::exception& e) {
        if (!dynamic_cast<const comm::AgreedError*>(&e) &&
            !dynamic_cast<const comm::AbortedError*>(&e))
          comm_.agree_before_next_collective("the agreement after a failed forward");
      });
  coordinator_->regather_persistent();
  verify_replicas();
  // Last: a constructor that threw leaves no layer reducing through this engine's
  // communicator (~Engine takes them back too).
  if (config_.sync_batchnorm) synced_batchnorms_ = enable_sync_batchnorm(*model_, comm_);
  registrations_ = nn::registration_count();
  if (config_.offload_optimizer.enabled() && comm_.rank() == 0 && !config_.quiet)
    std::fprintf(stderr, "zt: %s\n", offload_->describe().c_str());
}

// Every gradient shard on a device is a view of one flat fp32 buffer (each in its slot:
// grad_shard_slot), so the step's global norm and clipping are one kernel per device
// instead of one per parameter. The gaps stay zero.
void Engine::allocate_grad_shards(const std::vector<ZeroParam*>& with_grads) {
  MemTagScope tag(MemTag::kGradShard);
  std::vector<bool> done(with_grads.size(), false);
  for (size_t first = 0; first < with_grads.size(); ++first) {
    if (done[first]) continue;
    const Device dev = with_grads[first]->device;
    int64_t total = 0;
    for (size_t i = first; i < with_grads.size(); ++i)
      if (with_grads[i]->device == dev) total += grad_shard_slot(with_grads[i]->part.shard_numel);
    Tensor flat = zeros({total}, DType::f32, dev);
    int64_t offset = 0;
    for (size_t i = first; i < with_grads.size(); ++i) {
      ZeroParam* z = with_grads[i];
      if (z->device != dev) continue;
      z->grad_shard = flat.narrow(0, offset, z->part.shard_numel);
      offset += grad_shard_slot(z->part.shard_numel);
      done[i] = true;
    }
    grad_flats_.push_back(flat);
  }
}

Device Engine::device() const {
  if (!params_.empty()) return zero_param(params_[0].param)->device;
  return replicas_.empty() ? Device::cpu() : replicas_[0].second.device();
}

Engine::~Engine() {
  // A run that ended before the traced steps without write_timeline(): no collective is
  // safe here, so each rank writes its own file.
  if (timeline_ && !timeline_written_ && timeline_->size() > 0) {
    std::string path = timeline_path_ + ".rank" + std::to_string(comm_.rank()) + ".json";
    try {
      Timeline::write(path, {timeline_->events_json(timeline_->first_ns())});
      if (!config_.quiet)
        std::fprintf(stderr, "zt: rank %d: timeline of %ld step(s) written to %s\n", comm_.rank(),
                     static_cast<long>(timeline_->steps_recorded()), path.c_str());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "zt: rank %d: %s\n", comm_.rank(), e.what());
    }
  }
  coordinator_->set_timeline(nullptr);
  reducer_->set_timeline(nullptr);
  // A later engine over the model decides for itself (and this communicator may go).
  for (const auto& bn : synced_batchnorms_) bn->stats_reducer = nullptr;
  // The model may outlive the engine: hooks go with hooks_, gradient shards here, and a
  // gather a failed forward left in flight (Coordinator::abandon) is dropped, since its
  // work must not outlive the communicator.
  for (NamedParam& np : params_) {
    ZeroParam* z = zero_param(np.param);
    z->grad_shard = Tensor();
    if (z->status == ParamStatus::kInflight && z->flight)
      std::shared_ptr<GroupGather>(z->flight)->drop();
  }
}

std::vector<Tensor> Engine::forward(const std::vector<Tensor>& inputs) {
  GatheredParameters::raise_failed_exit();
  MemTagScope tag(MemTag::kActivation);
  return model_->call(inputs);
}

void Engine::backward(const Tensor& loss, bool retain_graph) {
  check_no_stray_gradient();
  double scale = scaler_.scale() / config_.gradient_accumulation_steps;
  Tensor l = scale != 1.0 ? mul(loss, scale) : loss;
  {
    MemTagScope tag(MemTag::kActivation);
    struct InBackward {  // also when the backward throws
      Hooks& hooks;
      explicit InBackward(Hooks& h) : hooks(h) { hooks.set_in_engine_backward(true); }
      ~InBackward() { hooks.set_in_engine_backward(false); }
    } in_backward(*hooks_);
    discarding_on_error("backward", [&] {
      l.backward(Tensor(), retain_graph);
      reducer_->flush();
    });
  }
  keep_replica_grads();
  ++backwards_;
}

void Engine::keep_replica_grads() {
  replica_window_grads_.resize(replicas_.size());
  for (size_t i = 0; i < replicas_.size(); ++i) {
    const Tensor& p = replicas_[i].second;
    Tensor& sum = replica_window_grads_[i];
    const Tensor g = p.grad();
    if (!sum.defined() || sum.same(g)) {
      sum = g;  // the backward accumulated into it (or it is the window's first)
      continue;
    }
    autograd::NoGradGuard ng;
    if (g.defined()) add_(sum, g);
    p.set_grad(sum);
  }
}

// The shards are not cleared: each is marked stale, and the window's first gradient is
// copied over it (GradReducer); reduce_gradients() clears those no gradient reached. The
// gaps between slots stay zero from allocation (every later write to them is a scaling).
void Engine::zero_window_gradients() {
  for (NamedParam& np : params_) {
    ZeroParam* z = zero_param(np.param);
    z->grad_written = false;
    // Frozen when the engine was built and unfrozen since (a step refuses that): a
    // backward leaves its whole gradient in .grad(), which the engine never takes. It goes
    // with the window, or the engine built for the new phase would add it to its first step.
    if (!z->grad_shard.defined()) np.param.set_grad(Tensor());
  }
  for (auto& [name, p] : replicas_) p.set_grad(Tensor());
  replica_window_grads_.clear();
}

void Engine::close_step() {
  sync_buffers();
  GatheredParameters::note_step();
  coordinator_->end_step();
  end_timeline_step();
}

void Engine::discard_gradients() {
  reducer_->discard();
  zero_window_gradients();
  micro_ = 0;
  backwards_ = 0;
  hooks_->abandon_backward();
}

void Engine::abort_after(const char* phase, const std::exception& e) {
  if (comm_.size() == 1 || dynamic_cast<const comm::AgreedError*>(&e) ||
      dynamic_cast<const comm::AbortedError*>(&e))
    return;
  comm_.abort(detail::cat("rank ", comm_.rank(), ": the engine's ", phase, " failed: ", e.what()));
}

void Engine::discarding_on_error(const char* phase, const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    abort_after(phase, e);
    try {
      discard_gradients();
    } catch (...) {  // the first error is the one to report
    }
    throw;
  }
}

void Engine::reduce_gradients() {
  reducer_->flush();
  reducer_->drain();
  for (NamedParam& np : params_)
    if (ZeroParam* z = zero_param(np.param); z->grad_shard.defined() && !z->grad_written) {
      z->grad_shard.zero_();  // a branch this window did not use
      z->grad_written = true;
    }
}

EngineStats Engine::stats() const {
  EngineStats s = stats_;
  s.buckets_reduced = reducer_->buckets();
  return s;
}

bool Engine::step() {
  comm::CollectiveLabel label("Engine::step");
  if (graph_capturing()) check_capturable();
  check_no_stray_gradient();
  ZT_CHECK(backwards_ > 0,
           "zero::Engine::step: no backward() since the last step(); call "
           "engine.backward(loss) first (a step without gradients would still move the "
           "parameters: AdamW's momentum and weight decay)");
  ZT_CHECK(backwards_ == 1 || config_.gradient_accumulation_steps == 1,
           "zero::Engine::step: ", backwards_,
           " backward() calls since the last step() with gradient_accumulation_steps = ",
           config_.gradient_accumulation_steps,
           ": the engine counts micro-batches by step() calls, as DeepSpeed does. Call "
           "engine.step() after every micro-batch's backward; the parameters change once every ",
           config_.gradient_accumulation_steps,
           " calls (engine.discard_gradients() drops the gradients gathered so far)");
  check_trainable_unchanged();
  check_model_unchanged();
  GatheredParameters::raise_failed_exit();
  if (micro_ + 1 >= config_.gradient_accumulation_steps)
    GatheredParameters::check_unedited(
        "at this step, which gathers the partitioned parameters again and updates the "
        "replicas");
  backwards_ = 0;  // past the refusals: a refused step can be called again
  ++stats_.micro_steps;
  if (++micro_ < config_.gradient_accumulation_steps) return false;
  micro_ = 0;
  bool applied = false;
  discarding_on_error("step", [&] { applied = update(); });
  return applied;
}

bool Engine::update() {
  autograd::NoGradGuard ng;
  // Edits made so far in an open modifier scope reach every rank's shards and replicas
  // first: the step updates them, and its re-gather keeps them.
  GatheredParameters::commit_edits();
  reduce_gradients();
  // The ranks agree that their backwards reduced the same gradients, they fetched the
  // same modules and their replicas are the same (when one was written from outside),
  // before anything is updated.
  const std::vector<uint8_t> written = buffer_writes_->outside_forwards();
  const WindowFlags any = agree_on_window(reducer_->layout(), coordinator_->fetches_hash(),
                                          replica_versions() != replica_versions_, written, comm_);
  // Where both differ, the modules each rank ran say more than the gradients.
  if (!any.fetches_agree) coordinator_->check_ranks_agree();
  if (!any.layouts_agree) fail_layouts_differ(reducer_->layout(), model_->type_name(), comm_);
  if (!any.buffer_writes_agree) {
    std::vector<std::string> names;
    for (const auto& nb : buffers_) names.push_back(nb.first);
    fail_buffer_writes_differ(names, written, model_->type_name(), comm_);
  }
  reducer_->clear_layout();
  if (any.replicas_written) zero::verify_replicas(replicas_, comm_);
  replica_versions_ = replica_versions();
  std::vector<Tensor> replica_grads = average_replica_grads();

  // Global norm: shard norms summed across ranks, replicas counted once. It stays on the
  // parameters' device (fp16 alone reads it, to decide whether to skip), so a GPU step
  // clips without waiting for the GPU.
  const Device dev = device();
  Tensor shard_sq = optim::grad_norm_sq_on(grad_flats_, dev);
  if (comm_.size() > 1) comm_.all_reduce(shard_sq, comm::ReduceOp::kSum);
  last_grad_norm_ = sqrt(
      replica_grads.empty() ? shard_sq : add(shard_sq, optim::grad_norm_sq_on(replica_grads, dev)));
  if (!unscale_or_skip(replica_grads)) return false;
  if (config_.gradient_clipping > 0) {
    Tensor coef = optim::clip_coefficient(last_grad_norm_, config_.gradient_clipping);
    optim::scale_grads(grad_flats_, coef);
    optim::scale_grads(replica_grads, coef);
  }

  // The optimizer updates the fp32 shards; low-precision shards are rounded from them.
  if (offload_->moves()) {  // the host masters' gradients
    TimelineSpan span(timeline(), Track::kOptimizer, "offload: gradients to host");
    offload_->grads_to_host();
  }
  // The optimizer writes a storage shard beside its master (its low-precision copy) in
  // the update's own pass, rounding as shard_from_master() does.
  auto copies_in_step = [](const ZeroParam& z) {
    return z.master.defined() && z.master.device() == z.shard.device() && z.shard.is_contiguous();
  };
  for (NamedParam& np : params_)
    if (ZeroParam* z = zero_param(np.param); z->grad_shard.defined() && !offload_->moves()) {
      z->fp32_shard().set_grad(z->grad_shard);
      if (copies_in_step(*z)) optimizer_->set_low_precision_copy(np.name, z->shard);
    }
  {
    MemTagScope tag(MemTag::kOptimState);
    TimelineSpan span(timeline(), Track::kOptimizer, "optimizer step");
    optimizer_->step();
  }
  if (scaler_.active()) scaler_.on_good_step();
  for (NamedParam& np : params_) {
    ZeroParam* z = zero_param(np.param);
    if (!z->grad_shard.defined()) continue;
    z->fp32_shard().set_grad(Tensor());
    if (!offload_->moves() && !copies_in_step(*z)) z->shard_from_master();
  }
  if (offload_->moves()) {  // the shards are written from the host masters
    TimelineSpan span(timeline(), Track::kOptimizer, "offload: parameters to device");
    offload_->params_to_device();
  }
  zero_window_gradients();
  ++stats_.steps;  // applied: counted, whatever fails below
  capture_counted_ = graph_capturing();

  // Gathered copies are stale now: drop them, re-gather the persistent ones.
  coordinator_->regather_persistent();
  note_stale_copies();
  close_step();
  if (config_.buffers.verify_every > 0 && stats_.steps % config_.buffers.verify_every == 0)
    verify_replicas();
  replica_versions_ = replica_versions();  // the optimizer's writes to trainable replicas
  return true;
}

// Trainable replicas: every rank has the full gradient of its own batch; average them.
std::vector<Tensor> Engine::average_replica_grads() {
  std::vector<Tensor> grads;
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
    grads.push_back(g);
  }
  return grads;
}

// fp16: gradients carry the loss scale. A non-finite norm (the all-reduce spreads it to
// every rank) means overflow: skip this update and lower the scale (returns false).
bool Engine::unscale_or_skip(std::vector<Tensor>& replica_grads) {
  if (!scaler_.active()) return true;
  if (!std::isfinite(last_grad_norm_.item())) {
    skip_overflowed_step();
    return false;
  }
  last_grad_norm_ = mul(last_grad_norm_, 1.0 / scaler_.scale());
  optim::scale_grads(grad_flats_, 1.0 / scaler_.scale());
  optim::scale_grads(replica_grads, 1.0 / scaler_.scale());
  return true;  // the scaler counts the step once the optimizer has applied it
}

void Engine::skip_overflowed_step() {
  double before = scaler_.scale();
  try {
    scaler_.on_overflow();
  } catch (const Error& e) {  // every rank saw the same (all-reduced) norm
    // Clipping acts after this check, and the learning rate has not acted yet: the
    // gradients overflowed at every scale tried.
    throw comm::AgreedError(
        stats_.steps > 0
            ? std::string(e.what())
            : detail::cat(e.what(),
                          ". No update was applied since the engine was made: the gradients "
                          "overflowed at every scale from the first down to the minimum, so "
                          "an operation overflows fp16 (or the loss is not finite), which the "
                          "same run in bf16 or f32 shows, unless the minimum is above the "
                          "scale the gradients need (lower min_loss_scale)"),
        comm_.rank());
  }
  ++stats_.overflow_skips;
  // Step calls so far, this one included (applied and skipped), as the apps count steps.
  const long call = static_cast<long>(stats_.steps + stats_.overflow_skips);
  if (comm_.rank() == 0 && !config_.quiet) {
    const std::string scale =
        scaler_.scale() != before ? detail::cat("loss scale ", before, " -> ", scaler_.scale())
        : config_.precision.loss_scale > 0 ? detail::cat("loss scale fixed at ", before)
        : before == config_.precision.min_loss_scale
            ? detail::cat("loss scale at its minimum ", before)
        : scaler_.overflows_tolerated() == 0
            ? detail::cat("loss scale kept at ", before,
                          " (precision.hysteresis, DeepSpeed's fp16.hysteresis: the next "
                          "overflow halves it)")
            : detail::cat("loss scale kept at ", before,
                          " (precision.hysteresis, DeepSpeed's fp16.hysteresis: ",
                          scaler_.overflows_tolerated(), " more overflows before it halves)");
    std::fprintf(stderr, "zt: fp16 gradient overflow at step %ld: update skipped, %s\n", call,
                 scale.c_str());
  }
  zero_window_gradients();
  coordinator_->release_all();  // the weights did not change: persistent copies stay
  close_step();  // buffers sync all the same: the forwards updated them (BatchNorm statistics)
}

void Engine::refresh_from_master() {
  autograd::NoGradGuard ng;
  for (NamedParam& np : params_) zero_param(np.param)->shard_from_master();
  coordinator_->regather_persistent();
}

void Engine::sync_buffers() {
  zero::sync_buffers(buffers_, config_.buffers, comm_);
  buffer_writes_->synced();
}

void Engine::verify_replicas() {
  std::vector<std::pair<std::string, Tensor>> all = replicas_;
  for (const auto& nb : buffers_)  // buffers.sync none: each rank keeps its own
    if (config_.buffers.sync_for(nb.first) != BufferSync::none) all.push_back(nb);
  zero::verify_replicas(all, comm_);
  ++stats_.replica_verifications;  // passed: a mismatch threw above
  replica_versions_ = replica_versions();
}

uint64_t Engine::replica_versions() const {
  uint64_t sum = 0;
  for (const auto& [name, p] : replicas_)
    if (p.has_storage()) sum += p.storage()->version();
  return sum;
}

void Engine::set_lr(double lr) {
  optimizer_->set_lr(lr);
}
double Engine::lr() const {
  return optimizer_->lr();
}

MemoryReport Engine::memory_report() const {
  return zero::memory_report(device(), config_.offload_optimizer.enabled());
}

}  // namespace zt::zero
