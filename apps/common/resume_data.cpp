// resume_data: where a resumed run's data stream goes on, at the checkpoint's layout or
// another one, and the note that says what changed.
#include "apps/common/resume_data.h"

#include <cstdio>

#include "apps/common/rng_state.h"
#include "core/plural.h"
#include "data/sampler.h"

namespace zt::app {

// resume_data's work: the loader restored, and a note where the layout changed.
static std::string resume_position(data::DataLoader& loader, const zero::CheckpointExtra& extra) {
  const data::LoaderState saved{extra.loader_epoch, extra.loader_position};
  if (extra.loader_batch == 0) {  // saved before checkpoints recorded the batch size
    loader.restore(saved);
    return "";
  }
  int64_t samples = 0;
  ZT_CHECK(!__builtin_mul_overflow(saved.position, extra.loader_batch, &samples) &&
               !__builtin_mul_overflow(samples, int64_t{extra.saved_world_size}, &samples),
           "'", extra.dir, "/meta.json': the loader position ", saved.position, " x batch ",
           extra.loader_batch, " x ", extra.saved_world_size,
           " ranks is past any data set (a damaged meta.json?)");
  const data::LoaderState now = loader.state_at_sample(saved.epoch, samples);
  loader.restore(now);
  const int64_t batch = loader.options().batch_size, world = loader.sampler().world();
  if (extra.loader_batch == batch && extra.saved_world_size == world) return "";
  std::string note =
      detail::cat("the checkpoint's data stream was at sample ", samples, " of epoch ", saved.epoch,
                  " (", counted(extra.saved_world_size, "rank"), " x batch ", extra.loader_batch,
                  "); this run reads ", world * batch, " samples a batch (", counted(world, "rank"),
                  " x batch ", batch, ") and goes on ");
  if (now.epoch > saved.epoch) {
    // What the checkpoint's layout would still have read of that epoch: its ranks'
    // batches cover a longer epoch than this run's do. Its share of a rank, as the sampler
    // deals the data set of then (when recorded) to the ranks of then.
    const data::DistributedSampler& s = loader.sampler();
    const int64_t n = extra.loader_dataset_size > 0 ? extra.loader_dataset_size : s.dataset_size();
    const int64_t w = extra.saved_world_size;
    const int64_t b = extra.loader_batch, per_rank = s.drop_last() ? n / w : (n + w - 1) / w;
    const int64_t old_batches = loader.options().drop_last ? per_rank / b : (per_rank + b - 1) / b;
    const int64_t left = old_batches * b * extra.saved_world_size - samples;
    return note + detail::cat("with epoch ", now.epoch,
                              left > 0 ? detail::cat(", leaving the last ", left,
                                                     " samples of epoch ", saved.epoch, " unread")
                                       : std::string());
  }
  const int64_t reread = samples - now.position * batch * world;
  note += detail::cat("at sample ", samples - reread, " of epoch ", now.epoch);
  if (reread > 0) note += detail::cat(", reading ", reread, " samples again");
  return note;
}

std::string resume_data(data::DataLoader& loader, const zero::CheckpointExtra& extra) {
  std::string note = resume_position(loader, extra);
  const int64_t now = loader.sampler().dataset_size(), then = extra.loader_dataset_size;
  if (then == 0 || then == now) return note;
  return detail::cat("the data set holds ", now, " items, not the ", then,
                     " it held when the checkpoint was saved: the rest of epoch ",
                     extra.loader_epoch,
                     " follows another shuffle, so some of its items may be read again and "
                     "others not at all",
                     note.empty() ? "" : "; ", note);
}

Tensor checkpoint_state(const std::vector<std::pair<std::string, Tensor>>& state,
                        const std::string& name) {
  for (const auto& [n, t] : state)
    if (n == name) return t;
  return {};
}

Tensor checkpoint_counts(const zero::CheckpointExtra& extra, const std::string& name, int64_t n,
                         const char* per) {
  const Tensor t = checkpoint_state(extra.state, name);
  ZT_CHECK(!t.defined() || (t.dim() == 1 && t.numel() == n && t.dtype() == DType::i64), "'",
           extra.dir, "': ", name, " is ", t.str(), ", expected i64[", n, "], one count per ", per);
  return t;
}

zero::CheckpointExtra resume_training(zero::Engine& engine, data::DataLoader& loader,
                                      const std::string& dir, const comm::Communicator& comm,
                                      bool say, const char* what, double dropout) {
  zero::CheckpointExtra extra = zero::load_checkpoint(engine, dir);
  const std::string note = resume_data(loader, extra);
  if (say && !note.empty()) std::fprintf(stderr, "%s: note: %s\n", what, note.c_str());
  const std::string rng =
      restore_rng_state(checkpoint_state(extra.state, "rng_state"), comm, extra.step);
  if (say && dropout > 0 && !rng.empty()) std::fprintf(stderr, "%s: note: %s\n", what, rng.c_str());
  if (say) {
    std::printf("resumed from %s at step %lld (saved on %s; data epoch %lld, batch %lld)\n",
                extra.dir.c_str(), static_cast<long long>(extra.step),
                counted(extra.saved_world_size, "rank").c_str(),
                static_cast<long long>(loader.state().epoch),
                static_cast<long long>(loader.state().position));
    std::fflush(stdout);
  }
  return extra;
}

}  // namespace zt::app
