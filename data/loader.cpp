// DataLoader. One producer thread walks (epoch, position) in order and pushes finished
// batches into a bounded queue; within a batch, `workers` threads split the samples,
// each writing its own rows of the preallocated batch tensor, so the result does not
// depend on scheduling. Loader threads charge the creating thread's memory ledger so
// per-rank memory accounting stays per rank, and run kernels on its share of threads (a
// thread rank's, not the process's): the producer on all of it, the workers of a batch
// on an equal part each.
#include "data/loader.h"

#include <atomic>
#include <cstring>
#include <limits>
#include <vector>

#include "core/allocator.h"
#include "core/error.h"
#include "core/ops/factory.h"
#include "core/parallel.h"
#include "core/plural.h"

namespace zt::data {

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DistributedSampler sampler,
                       LoaderOptions options)
    : dataset_(std::move(dataset)), sampler_(std::move(sampler)), options_(options) {
  ZT_CHECK(dataset_ != nullptr, "DataLoader: no dataset");
  ZT_CHECK(sampler_.dataset_size() == dataset_->size(), "DataLoader: the sampler covers ",
           sampler_.dataset_size(), " samples but ", dataset_->describe(), " has ",
           dataset_->size());
  ZT_CHECK(options_.batch_size >= 1, "DataLoader: batch_size must be >= 1, got ",
           options_.batch_size);
  ZT_CHECK(options_.prefetch >= 0, "DataLoader: prefetch must be >= 0");
  ZT_CHECK(options_.workers >= 1, "DataLoader: workers must be >= 1, got ", options_.workers,
           " (the threads that read one batch's samples at once); to read every sample on the "
           "thread that calls next(), set workers = 1 and prefetch = 0");
  const int64_t n = sampler_.num_samples();
  batches_per_epoch_ = options_.drop_last ? n / options_.batch_size
                                          : (n + options_.batch_size - 1) / options_.batch_size;
  ZT_CHECK(batches_per_epoch_ >= 1, "DataLoader: rank ", sampler_.rank(), " gets ", n,
           " samples per epoch, fewer than one batch of ", options_.batch_size,
           "; use a smaller batch, more samples or fewer ranks");
  ledger_ = current_ledger();
  threads_ = num_threads();
  ZT_CHECK(sampler_.epoch() >= 0, "DataLoader: the sampler's epoch is ", sampler_.epoch(),
           "; the stream starts at an epoch >= 0 (set_epoch)");
  consumer_ = {sampler_.epoch(), 0};
}

DataLoader::~DataLoader() {
  stop();
}

namespace {
// Rethrows `e`, the error of a dataset's get(), as a zt::Error that says where it happened
// (`where`) before what it says, with `e` nested in it (std::rethrow_if_nested) for a
// caller that handles the dataset's own exception type.
[[noreturn]] void rethrow_sample_error(const std::exception_ptr& e, const std::string& where) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    std::throw_with_nested(Error(where + x.what()));
  } catch (...) {
    std::throw_with_nested(
        Error(where + "get() threw an exception that is not a std::exception; throw zt::Error "
                      "or another std::exception that says what went wrong"));
  }
}
}  // namespace

Batch DataLoader::make_batch(int64_t epoch, int64_t position, const std::atomic<bool>* cancel) {
  if (epoch != cached_epoch_) {
    DistributedSampler s = sampler_;
    s.set_epoch(epoch);
    cached_indices_ = s.indices();
    cached_epoch_ = epoch;
  }
  const int64_t first = position * options_.batch_size;
  const int64_t b =
      std::min<int64_t>(options_.batch_size, static_cast<int64_t>(cached_indices_.size()) - first);
  ZT_CHECK(b >= 1, "DataLoader: batch ", position, " is past the end of epoch ", epoch);
  const int64_t* idx = cached_indices_.data() + first;

  Batch out;
  out.epoch = epoch;
  out.position = position;
  out.labels = empty({b}, DType::i64);
  out.indices = empty({b}, DType::i64);

  // The samples, read by up to `workers` threads at once (each takes the next index),
  // then checked and copied in batch order: sample 0 fixes the clip shape.
  std::vector<Sample> samples(static_cast<size_t>(b));
  std::vector<std::exception_ptr> errors(static_cast<size_t>(b));
  std::atomic<int64_t> next{0};
  const int64_t nthreads = std::min<int64_t>(options_.workers, b);
  auto work = [&] {
    LedgerScope ledger(ledger_);
    if (nthreads > 1) set_num_threads(std::max(1, threads_ / static_cast<int>(nthreads)));
    for (int64_t i = next++; i < b && !(cancel && *cancel); i = next++) {
      try {
        samples[static_cast<size_t>(i)] = dataset_->get(idx[i]);
      } catch (...) {
        errors[static_cast<size_t>(i)] = std::current_exception();
      }
    }
  };
  if (nthreads <= 1) {
    work();
  } else {
    std::vector<std::thread> pool;
    try {
      for (int64_t t = 0; t < nthreads; ++t) pool.emplace_back(work);
    } catch (...) {  // no thread to be had: the started ones finish first
      next = b;
      for (auto& t : pool) t.join();
      throw;
    }
    for (auto& t : pool) t.join();
  }
  // Stopped (the loader is destroyed or restored elsewhere): the samples being read were
  // finished, no other was started, and the caller drops the batch.
  if (cancel && *cancel) return out;
  auto what = [&](int64_t i) { return dataset_->describe() + " sample " + std::to_string(idx[i]); };
  // The first failing sample in batch order, whichever thread saw it first.
  for (int64_t i = 0; i < b; ++i)
    if (errors[static_cast<size_t>(i)])
      rethrow_sample_error(errors[static_cast<size_t>(i)],
                           detail::cat("DataLoader: ", what(i), " (batch ", position, " of epoch ",
                                       epoch, ") failed to load: "));

  check_clip(samples[0].clip, what(0));
  const Shape shape = samples[0].clip.sizes();
  Shape bshape = shape;
  bshape.insert(bshape.begin(), b);
  out.clips = empty(bshape, DType::f32);
  const int64_t per = samples[0].clip.numel();
  float* dst = out.clips.data<float>();
  for (int64_t i = 0; i < b; ++i) {
    const Sample& s = samples[static_cast<size_t>(i)];
    check_clip(s.clip, what(i));
    ZT_CHECK(s.clip.sizes() == shape, "DataLoader: ", dataset_->describe(), " sample ", idx[i],
             " has shape ", shape_str(s.clip.sizes()), " but sample ", idx[0], " has ",
             shape_str(shape),
             "; clips in a batch must share a shape: make get() return one shape, or read with "
             "batch_size 1 (for image data: set data.height/width)");
    const Tensor c = s.clip.contiguous();
    std::memcpy(dst + i * per, c.data<float>(), static_cast<size_t>(per) * sizeof(float));
    out.labels.data<int64_t>()[i] = s.label;
    out.indices.data<int64_t>()[i] = idx[i];
  }
  return out;
}

void DataLoader::start() {
  stopping_ = false;
  producer_ = consumer_;
  if (options_.prefetch > 0) thread_ = std::thread([this] { produce(); });
}

void DataLoader::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  queue_.clear();
}

void DataLoader::produce() {
  LedgerScope ledger(ledger_);
  set_num_threads(threads_);
  for (;;) {
    LoaderState at;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] {
        return stopping_ || (static_cast<int64_t>(queue_.size()) < options_.prefetch &&
                             !at_end(producer_) && has_next(producer_));
      });
      if (stopping_) return;
      at = producer_;
    }
    Item item;
    try {
      item.batch = make_batch(at.epoch, at.position, &stopping_);
    } catch (...) {
      item.error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      queue_.push_back(std::move(item));
      advance(producer_);
    }
    cv_.notify_all();
  }
}

Batch DataLoader::next() {
  ZT_CHECK(!at_end(consumer_), "DataLoader::next: the batches restore() allowed, up to batch ",
           consumer_.position, " of epoch ", consumer_.epoch, ", were all read");
  ZT_CHECK(has_next(consumer_), "DataLoader::next: batch ", consumer_.position, " of epoch ",
           consumer_.epoch,
           " is the last an epoch count reaches (restored from a damaged "
           "position?)");
  if (options_.prefetch > 0 && !thread_.joinable()) start();
  Item item;
  if (options_.prefetch == 0) {
    try {
      item.batch = make_batch(consumer_.epoch, consumer_.position);
    } catch (...) {
      item.error = std::current_exception();
    }
  } else {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !queue_.empty(); });
    item = std::move(queue_.front());
    queue_.pop_front();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    advance(consumer_);
  }
  cv_.notify_all();
  if (item.error) std::rethrow_exception(item.error);
  return std::move(item.batch);
}

LoaderState DataLoader::state() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stamped(consumer_);
}

LoaderState DataLoader::state_at_sample(int64_t epoch, int64_t samples) const {
  ZT_CHECK(epoch >= 0 && samples >= 0, "DataLoader::state_at_sample: epoch ", epoch, " and sample ",
           samples, " must be >= 0");
  const int64_t position = samples / (options_.batch_size * sampler_.world());
  if (position >= batches_per_epoch_) {
    ZT_CHECK(epoch < std::numeric_limits<int64_t>::max(), "DataLoader::state_at_sample: sample ",
             samples, " is past the end of epoch ", epoch, ", the last an epoch count reaches");
    return stamped({epoch + 1, 0});
  }
  return stamped({epoch, position});
}

int64_t DataLoader::unpadded(const Batch& b) const {
  // Rank r's i-th sample of an epoch sits at r + i x world in the padded global order;
  // positions past the dataset's size are padding, so they end a batch.
  const int64_t world = sampler_.world(), first = b.position * options_.batch_size;
  int64_t k = 0;
  while (k < b.clips.size(0) && sampler_.rank() + (first + k) * world < sampler_.dataset_size())
    ++k;
  return k;
}

void DataLoader::restore(const LoaderState& state, int64_t batches) {
  // A position counts batches of the layout it was taken under: first refuse another one.
  const int64_t batch = options_.batch_size, world = sampler_.world();
  ZT_CHECK((state.batch_size == 0 || state.batch_size == batch) &&
               (state.world == 0 || state.world == world),
           "DataLoader::restore: the state (batch ", state.position, " of epoch ", state.epoch,
           ") was taken by a loader of ", counted(state.world, "rank"), " x batch ",
           state.batch_size, ", not ", counted(world, "rank"), " x batch ", batch,
           " as this one, so its position counts other batches; to go on after the samples it "
           "read, restore state_at_sample(",
           state.epoch, ", ", state.position, " x ", state.batch_size, " x ", state.world, ")");
  // A position in the shuffle of a data set of another size: the same epoch deals other
  // samples in another order, so going on would read some of them twice and others never.
  // (The layout is this loader's by now, so the samples read are position x batch x world.)
  const int64_t size = sampler_.dataset_size();
  ZT_CHECK(state.dataset_size == 0 || state.dataset_size == size,
           "DataLoader::restore: the state (batch ", state.position, " of epoch ", state.epoch,
           ") was taken over a data set of ", counted(state.dataset_size, "sample"), ", not the ",
           size, " of ", dataset_->describe(),
           " this loader reads, so its position is in another shuffle; restore it into a loader "
           "over the data it was taken over, or, to go on over this data anyway (the rest of "
           "epoch ",
           state.epoch,
           " in this data set's shuffle: some samples read again, others not at all), restore "
           "state_at_sample(",
           state.epoch, ", ", state.position, " x ", batch, " x ", world, ")");
  ZT_CHECK(state.epoch >= 0 && state.position >= 0 && state.position < batches_per_epoch_,
           "DataLoader::restore: position ", state.position, " of epoch ", state.epoch,
           " is outside the ", batches_per_epoch_,
           " batches per epoch (was the checkpoint made with another batch size or world?)");
  ZT_CHECK(batches >= 0, "DataLoader::restore: batches must be >= 0, got ", batches);
  std::optional<LoaderState> end;
  if (batches > 0) {
    int64_t through = 0, end_epoch = 0;  // batches from the start of state.epoch
    ZT_CHECK(!__builtin_add_overflow(state.position, batches, &through) &&
                 !__builtin_add_overflow(state.epoch, through / batches_per_epoch_, &end_epoch),
             "DataLoader::restore: ", batches, " batches from batch ", state.position, " of epoch ",
             state.epoch, " go past the last epoch an epoch count reaches");
    end = LoaderState{end_epoch, through % batches_per_epoch_};
  }
  // Already there with the prepared batches that position reads (a resume at the start):
  // keep them, unless a new end falls among them.
  const bool keep = state == consumer_ && thread_.joinable() && !end;
  if (!keep) {
    stop();
    consumer_ = {state.epoch, state.position};
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    end_ = end;
  }
  cv_.notify_all();  // a kept producer waiting at the old end goes on
  if (!keep && options_.prefetch > 0) start();
}

}  // namespace zt::data
