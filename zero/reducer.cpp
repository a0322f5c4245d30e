// Gradient buckets: layout, reduce-scatter, accumulation into shards.
#include "zero/reducer.h"

#include <algorithm>

#include "core/ops.h"

namespace zt::zero {

GradReducer::GradReducer(comm::Communicator& comm, int64_t bucket_elems, bool async)
    : comm_(comm), bucket_elems_(bucket_elems), async_(async) {}

// Each shard's first gradient of a window is copied in (its old values are stale: the
// engine does not clear the shards between windows), later ones are added; a copy call
// and an add call, converting as they go.
static void write_into_shards(const std::vector<ZeroParam*>& zs, const std::vector<Tensor>& grads) {
  std::vector<Tensor> copy_to, copy_from, add_to, add_from;
  for (size_t i = 0; i < zs.size(); ++i) {
    (zs[i]->grad_written ? add_to : copy_to).push_back(zs[i]->grad_shard);
    (zs[i]->grad_written ? add_from : copy_from).push_back(grads[i]);
  }
  if (!copy_to.empty()) multi_copy_(copy_to, copy_from);
  if (!add_to.empty()) multi_add_(add_to, add_from);
  for (ZeroParam* z : zs) z->grad_written = true;  // only once written: a retry copies again
}

void GradReducer::add(const Tensor& p) {
  ZeroParam* z = zero_param(p);
  ZT_CHECK(z && z->kind == ParamKind::kPartitioned, "GradReducer::add: '", p.name(),
           "' is not partitioned");
  ZT_CHECK(z->grad_shard.defined(), "GradReducer::add: '", p.name(),
           "' has no gradient shard (set ZeroParam::grad_shard to an fp32 [shard_numel] tensor)");
  Tensor g = p.grad();
  ZT_CHECK(g.defined(), "GradReducer::add: '", p.name(), "' has no gradient");
  p.set_grad(Tensor());  // the bucket owns the full gradient until it is laid out
  // A second gradient of a parameter still queued (a checkpointed module called twice
  // recomputes, and so accumulates, once per call) joins the first: one bucket must not
  // write one shard twice.
  // (Looked up by its index, not by a walk of the queue: at one rank, or with a large
  // bucket, every parameter of the model is queued, and each add would walk them all.)
  if (const auto queued = queued_at_.find(z); queued != queued_at_.end()) {
    autograd::NoGradGuard ng;
    Tensor& sum = queued_[queued->second].grad;
    sum = zt::add(sum, g.reshape({-1}));
    return;
  }
  int64_t n = z->part.padded_numel();
  if (!queued_.empty() && queued_elems_ + n > bucket_elems_) flush();
  queued_at_.emplace(z, queued_.size());
  queued_.push_back({z, g.reshape({-1})});
  queued_elems_ += n;
  if (comm_.size() > 1) layout_.append(p.name()).append(1, '\n');
}

void GradReducer::clear_queue() {
  queued_.clear();
  queued_at_.clear();
  queued_elems_ = 0;
}

void GradReducer::flush() {
  if (queued_.empty()) return;
  autograd::NoGradGuard ng;
  int world = comm_.size();
  if (world > 1) layout_ += "|\n";
  if (world == 1) {  // one rank: its shard is the whole gradient; written in, no bucket
    std::vector<ZeroParam*> zs;
    std::vector<Tensor> grads;
    for (const Entry& e : queued_) {
      zs.push_back(e.z);
      grads.push_back(e.grad);
    }
    write_into_shards(zs, grads);
    clear_queue();
    ++buckets_;
    return;
  }
  int64_t S = 0;
  for (const Entry& e : queued_) S += e.z->part.shard_numel;
  Pending p;
  Device dev = queued_.front().grad.device();
  {
    MemTagScope tag(MemTag::kCommBuffer);
    p.input = Tensor::empty({S * world}, DType::f32, dev);
    p.output = Tensor::empty({S}, DType::f32, dev);
  }
  // Each rank's slice of each gradient (all in one copy call), and zeros in the padding
  // past a parameter's end (the only part no gradient covers: the bucket is not cleared
  // first).
  std::vector<Tensor> slots, slices;
  int64_t off = 0;
  for (const Entry& e : queued_) {
    const Partition& part = e.z->part;
    for (int r = 0; r < world; ++r) {
      const int64_t valid = std::max<int64_t>(part.shard_valid(r), 0);
      if (valid > 0) {
        slots.push_back(p.input.narrow(0, r * S + off, valid));
        slices.push_back(e.grad.narrow(0, part.shard_offset(r), valid));
      }
      if (valid < part.shard_numel)
        p.input.narrow(0, r * S + off + valid, part.shard_numel - valid).zero_();
    }
    off += part.shard_numel;
  }
  multi_copy_(slots, slices);
  p.entries = std::move(queued_);
  for (Entry& e : p.entries) e.grad = Tensor();  // free full gradients now
  clear_queue();
  ++buckets_;
  p.number = buckets_;
  if (timeline_ && timeline_->active()) p.issued_ns = Timeline::now_ns();
  p.work = comm_.reduce_scatter(p.output, p.input, comm::ReduceOp::kAvg, async_);
  pending_.push_back(std::move(p));
  if (!async_) {
    drain();
    return;
  }
  // Retire buckets that are done, and keep at most kMaxInFlight in flight: a bucket holds
  // world x its shard elements until it is retired, so an unbounded queue would hold a
  // whole model's gradients again by the end of backward.
  while (!pending_.empty() && (pending_.size() > kMaxInFlight || !pending_.front().work ||
                               pending_.front().work->test())) {
    finish(pending_.front());
    pending_.pop_front();
  }
}

void GradReducer::finish(Pending& p) {
  if (p.work) p.work->wait();
  std::vector<ZeroParam*> zs;
  std::vector<Tensor> reduced;
  int64_t off = 0;
  for (const Entry& e : p.entries) {
    const int64_t s = e.z->part.shard_numel;
    zs.push_back(e.z);
    reduced.push_back(p.output.narrow(0, off, s));
    off += s;
  }
  write_into_shards(zs, reduced);
  if (timeline_ && p.issued_ns >= 0)
    timeline_->span(Track::kReduceScatter, "bucket " + std::to_string(p.number), p.issued_ns,
                    "\"elements\":" + std::to_string(p.output.numel() * comm_.size()) +
                        ",\"params\":" + std::to_string(p.entries.size()));
}

void GradReducer::discard() {
  clear_queue();
  layout_.clear();
  for (Pending& p : pending_) {
    try {
      if (p.work) p.work->wait();
    } catch (...) {  // an aborted communicator: nothing left to wait for
    }
  }
  pending_.clear();
}

void GradReducer::drain() {
  while (!pending_.empty()) {
    finish(pending_.front());
    pending_.pop_front();
  }
}

}  // namespace zt::zero
