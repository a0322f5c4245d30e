// GatheredParameters.
#include "zero/gathered.h"

#include <cstdio>
#include <exception>
#include <unordered_set>
#include <utility>

#include "core/ops.h"
#include "zero/param.h"
#include "zero/replicas.h"

namespace zt::zero {

namespace {
// This thread's open scopes (a rank is one thread).
std::vector<GatheredParameters*>& open_scopes() {
  thread_local std::vector<GatheredParameters*> scopes;
  return scopes;
}

// The failure of an exit that a scope's destructor could not throw, kept for this thread's
// next scope, forward or step. A thread that ends before any of them prints it: an edit
// refused, or a broadcast lost, is never dropped without a word.
struct FailedExit {
  std::exception_ptr error;
  ~FailedExit() {
    if (!error) return;
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      std::fprintf(stderr,
                   "zt: a GatheredParameters scope closed by its destructor failed, and its "
                   "thread ended before anything raised it: %s\n",
                   e.what());
    } catch (...) {
    }
  }
};
FailedExit& failed_exit() {
  thread_local FailedExit failed;
  return failed;
}

// One scope fewer holds z. The last one lets go of a copy that a scope gathered, whichever
// scope that was (scopes over one parameter may close in any order); a copy that was there
// before any scope (an engine's) stays. A gather still in flight stays for its next wait.
void drop_hold(ZeroParam* z) {
  if (--z->holds > 0 || !z->scope_gathered) return;
  z->scope_gathered = false;
  if (z->status == ParamStatus::kAvailable && z->releasable()) z->release();
}
}  // namespace

GatheredParameters::GatheredParameters(std::vector<Tensor> params, comm::Communicator& comm,
                                       std::optional<int> modifier_rank,
                                       std::vector<Tensor> buffers)
    : params_(std::move(params)),
      buffers_(std::move(buffers)),
      comm_(comm),
      modifier_(modifier_rank),
      unwinding_at_open_(std::uncaught_exceptions()) {
  raise_failed_exit();
  comm::CollectiveLabel label("GatheredParameters");
  ZT_CHECK(!modifier_ || (*modifier_ >= 0 && *modifier_ < comm.size()),
           "GatheredParameters: modifier_rank ", modifier_.value_or(-1), " out of range for ",
           comm.size(), " ranks");
  // Each tensor once, where it is first named: named twice, it would be gathered (sent and
  // copied) and broadcast twice, and a second mention that found the first one's copy there
  // would take it as gathered by someone else and keep it past the exit.
  std::unordered_set<const TensorImpl*> seen;
  for (std::vector<Tensor>* ts : {&params_, &buffers_})
    std::erase_if(*ts,
                  [&](const Tensor& t) { return t.defined() && !seen.insert(t.impl()).second; });
  // Parameters are gathered in batches of one all-gather each (consecutive parameters of
  // one dtype and device, up to kBatchElems elements): one collective for a small module,
  // while a scope over a whole model never holds more than a batch in flight.
  std::vector<ZeroParam*> batch;
  int64_t batch_elems = 0;
  auto flush = [&] {
    if (batch.empty()) return;
    gather_group(batch, comm_, /*blocking=*/true);
    for (ZeroParam* z : batch) z->wait();
    batch.clear();
    batch_elems = 0;
  };
  try {
    for (const Tensor& p : params_) {
      ZeroParam* z = zero_param(p);
      ZT_CHECK(!z || z->kind != ParamKind::kPartitioned ||
                   (z->part.world == comm.size() && z->rank == comm.rank()),
               "GatheredParameters: '", p.name(), "' is partitioned over ", z->part.world,
               " ranks, as rank ", z->rank, "; this communicator has ", comm.size(),
               " (this is its rank ", comm.rank(),
               "): pass the communicator it was partitioned on (its zero::Init's, its "
               "engine's)");
      bool here =
          z && z->kind == ParamKind::kPartitioned && z->status == ParamStatus::kNotAvailable;
      gathered_here_.push_back(here);
      if (z && z->kind == ParamKind::kPartitioned) {
        ++z->holds;
        if (!here) continue;
        z->scope_gathered = true;
        if (!batch.empty() &&
            (batch_elems + z->part.padded_numel() > kBatchElems ||
             batch.front()->dtype != z->dtype || batch.front()->device != z->device))
          flush();
        batch.push_back(z);
        batch_elems += z->part.padded_numel();
      }
    }
    flush();
    for (const Tensor& p : params_)
      if (ZeroParam* z = zero_param(p); z && z->kind == ParamKind::kPartitioned) z->wait();
    if (!modifier_) hash_contents();  // its copies may pass a memory limit
  } catch (...) {
    // No scope was opened (no destructor will run): the holds counted so far go, and what
    // was gathered here is released (a gather still in flight stays for its next wait).
    for (size_t i = 0; i < gathered_here_.size(); ++i)
      if (ZeroParam* z = zero_param(params_[i]); z && z->kind == ParamKind::kPartitioned)
        drop_hold(z);
    throw;
  }
  open_scopes().push_back(this);
}

void GatheredParameters::hash_contents() {
  hashes_.resize(params_.size() + buffers_.size());
  saved_.resize(hashes_.size());
  size_t k = 0;
  for (const std::vector<Tensor>* ts : {&params_, &buffers_})
    for (const Tensor& t : *ts) remember(k++, t);
}

// An edit of a tensor whose values this scope did not gather itself would stay in the model
// after the exit that calls it lost: a parameter gathered at one rank (its shard itself) or
// already gathered when the scope opened (kept by an engine), a replicated parameter, a
// buffer. Those are copied, and the exit puts an edit back. The copies of what this scope
// gathers at more ranks are its own, released at exit: they need none.
void GatheredParameters::remember(size_t k, const Tensor& t) {
  hashes_[k] = content_hash(t);
  if (k < params_.size() && gathered_here_[k] && comm_.size() > 1) return;
  autograd::NoGradGuard ng;
  MemTagScope tag(MemTag::kGatheredParam);
  if (saved_[k].defined())
    saved_[k].copy_(t);
  else
    saved_[k] = t.detach().clone();
}

void GatheredParameters::undo_edits() {
  size_t k = 0;
  for (const std::vector<Tensor>* ts : {&params_, &buffers_})
    for (const Tensor& t : *ts) {
      const Tensor& saved = saved_[k];
      if (saved.defined() && content_hash(t) != hashes_[k]) t.copy_(saved);
      ++k;
    }
}

std::string GatheredParameters::first_edit(bool params_only) const {
  size_t k = 0;
  for (const std::vector<Tensor>* ts : {&params_, &buffers_})
    for (const Tensor& t : *ts) {
      const uint64_t hash = hashes_[k++];
      if (params_only && ts == &buffers_) continue;
      if (content_hash(t) != hash)
        return !t.name().empty() ? t.name()
               : ts == &params_  ? "<an unnamed parameter>"
                                 : "<an unnamed buffer>";
    }
  return "";
}

// The error of an edit found in a read-only scope.
static void refuse_edit(const std::string& name, const char* when) {
  ZT_CHECK(name.empty(), "GatheredParameters: '", name,
           "' was modified inside a scope without modifier_rank; the change would be lost ", when,
           ". Pass modifier_rank (e.g. 0) to broadcast and re-partition edits");
}

void GatheredParameters::note_step() {
  for (GatheredParameters* g : open_scopes())
    if (!g->modifier_) g->hash_contents();
}

void GatheredParameters::note_loaded(const std::vector<Tensor>& tensors) {
  std::unordered_set<const TensorImpl*> loaded;
  for (const Tensor& t : tensors) loaded.insert(t.impl());
  for (GatheredParameters* g : open_scopes()) {
    if (g->modifier_) continue;
    size_t k = 0;
    for (const std::vector<Tensor>* ts : {&g->params_, &g->buffers_})
      for (const Tensor& t : *ts) {
        if (loaded.count(t.impl())) g->remember(k, t);
        ++k;
      }
  }
}

void GatheredParameters::check_unedited(const char* when) {
  for (const GatheredParameters* g : open_scopes())
    if (!g->modifier_) refuse_edit(g->first_edit(/*params_only=*/true), when);
}

void GatheredParameters::commit_edits() {
  for (GatheredParameters* g : open_scopes())
    if (g->modifier_) g->broadcast_edits();
}

void GatheredParameters::broadcast_edits() {
  autograd::NoGradGuard ng;
  for (const Tensor& p : params_) {
    broadcast_tensor(p, comm_, *modifier_);
    if (is_partitioned(p)) zero_param(p)->write_edit(p);
  }
  for (const Tensor& b : buffers_) broadcast_tensor(b, comm_, *modifier_);
}

// A module's tensors, named after their dotted paths (for error messages).
static std::vector<Tensor> params_of(nn::Module& m) {
  std::vector<Tensor> out;
  for (auto& [name, p] : m.named_parameters()) {
    if (p.name().empty()) p.set_name(name);
    out.push_back(p);
  }
  return out;
}
static std::vector<Tensor> buffers_of(nn::Module& m) {
  std::vector<Tensor> out;
  for (auto& [name, b] : m.named_buffers()) {
    if (b.name().empty()) b.set_name(name);
    out.push_back(b);
  }
  return out;
}

GatheredParameters::GatheredParameters(nn::Module& m, comm::Communicator& comm,
                                       std::optional<int> modifier_rank)
    : GatheredParameters(params_of(m), comm, modifier_rank, buffers_of(m)) {}

GatheredParameters::~GatheredParameters() {
  try {
    exit();
  } catch (...) {
    // An exception thrown inside the scope is unwinding it: that one is the error to report.
    if (std::uncaught_exceptions() > unwinding_at_open_) return;
    if (!failed_exit().error) failed_exit().error = std::current_exception();
  }
}

void GatheredParameters::raise_failed_exit() {
  if (std::exception_ptr e = std::exchange(failed_exit().error, nullptr)) std::rethrow_exception(e);
}

void GatheredParameters::exit() {
  if (!open_) return;
  open_ = false;
  std::erase(open_scopes(), this);
  autograd::NoGradGuard ng;
  comm::CollectiveLabel label("GatheredParameters");
  auto let_go = [&] {
    for (const Tensor& p : params_)
      if (ZeroParam* z = zero_param(p); z && z->kind == ParamKind::kPartitioned) drop_hold(z);
  };
  std::string changed;
  try {
    if (modifier_) {
      broadcast_edits();
      // On every rank's shard now: no edit that a read-only scope open around this one loses.
      std::vector<Tensor> written = params_;
      written.insert(written.end(), buffers_.begin(), buffers_.end());
      note_loaded(written);
    } else if (changed = first_edit(); !changed.empty())
      undo_edits();
  } catch (...) {
    // The scope is closed all the same (a broadcast on a broken communicator): what it held
    // goes, or its parameters would stay gathered, and held, for the rest of the run.
    let_go();
    throw;
  }
  let_go();
  refuse_edit(changed, "on exit");
}

void apply_gathered(nn::Module& root, comm::Communicator& comm,
                    const std::function<void(const std::string& name, nn::Module& m)>& init) {
  for (const auto& [name, m] : root.named_modules()) {
    std::vector<Tensor> params, buffers;
    for (const auto& [local, p] : m->local_parameters()) params.push_back(p);
    for (const auto& [local, b] : m->local_buffers()) buffers.push_back(b);
    GatheredParameters whole(std::move(params), comm, /*modifier_rank=*/0, std::move(buffers));
    init(name, *m);
    whole.exit();  // a failure comes out of here (the destructor leaves it to a later call)
  }
}

}  // namespace zt::zero
