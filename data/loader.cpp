// DataLoader. One producer thread walks (epoch, position) in order and pushes finished
// batches into a bounded queue; within a batch, `workers` threads split the samples,
// each writing its own rows of the preallocated batch tensor, so the result does not
// depend on scheduling. Loader threads charge the creating thread's memory ledger so
// per-rank memory accounting stays per rank, and run kernels on its share of threads (a
// thread rank's, not the process's): the producer on all of it, the workers of a batch
// on an equal part each.
//
// The producer shares only a Stream with the loader: the source of the batches (its own
// copies of the dataset pointer, the sampler and the options), the queue and the lock. A
// producer stopped while a get() does not return within the timeout (kStopWait without one)
// is detached with its Stream, which keeps alive all it touches until the get() returns and
// it ends.
#include "data/loader.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "core/allocator.h"
#include "core/error.h"
#include "core/ops/factory.h"
#include "core/parallel.h"
#include "core/plural.h"
#include "data/data_config.h"

namespace zt::data {

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

// Whether a batch follows s: every one but the last of epoch INT64_MAX, after which no
// epoch number is left to count (only a damaged checkpoint's position gets there). Neither
// the producer nor next() reads the batch at a state without one, so advance never
// overflows.
bool has_next(const LoaderState& s, int64_t batches_per_epoch) {
  return s.position + 1 < batches_per_epoch || s.epoch < std::numeric_limits<int64_t>::max();
}

void advance(LoaderState& s, int64_t batches_per_epoch) {
  if (++s.position == batches_per_epoch) s = {s.epoch + 1, 0};
}
}  // namespace

struct DataLoader::Stream {
  struct Item {
    Batch batch;
    std::exception_ptr error;
  };
  Stream(std::shared_ptr<const Dataset> d, DistributedSampler s, LoaderOptions o, int64_t batches,
         std::shared_ptr<MemoryLedger> l, int t)
      : dataset(std::move(d)),
        sampler(std::move(s)),
        options(o),
        batches_per_epoch(batches),
        ledger(std::move(l)),
        threads(t) {}
  // A new stream from the same source (for a loader whose thread was left in a get()).
  std::shared_ptr<Stream> renewed() const {
    return std::make_shared<Stream>(dataset, sampler, options, batches_per_epoch, ledger, threads);
  }

  // The batch at (epoch, position). With `cancel`, a read that finds it set starts no
  // other sample, and the batch is returned unfinished (the producer drops it as it stops).
  Batch make_batch(int64_t epoch, int64_t position, const std::atomic<bool>* cancel = nullptr);
  void produce();
  // The error of next() for a batch not ready within the timeout (`mu` held).
  Error timed_out(const LoaderState& at) const;
  // The first few samples of the batch being made whose get() has not returned (`mu` held).
  std::string unread_named() const;

  // The source, fixed at creation.
  const std::shared_ptr<const Dataset> dataset;
  const DistributedSampler sampler;
  const LoaderOptions options;
  const int64_t batches_per_epoch;
  const std::shared_ptr<MemoryLedger> ledger;  // the loader's creating thread's
  // The creating thread's kernel thread count (num_threads()): the producer's, split among
  // the workers of a batch.
  const int threads;

  // Indices of one epoch, cached (the thread that makes batches only).
  int64_t cached_epoch = -1;
  std::vector<int64_t> cached_indices;

  std::mutex mu;
  std::condition_variable cv;
  std::deque<Item> queue;
  LoaderState producer;               // next batch to make
  std::optional<LoaderState> end;     // the loader's end_, for the producer
  std::atomic<bool> stopping{false};  // set under mu; read by the workers without it
  bool finished = false;              // the producer has returned (under mu)
  // The batch being made and the samples of it whose get() has not returned (under mu).
  std::optional<LoaderState> making;
  std::vector<int64_t> unread;
  // The batch next() last found not ready within the timeout (under mu).
  std::optional<LoaderState> overdue;
};

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DistributedSampler sampler,
                       LoaderOptions options) {
  ZT_CHECK(dataset != nullptr, "DataLoader: no dataset");
  ZT_CHECK(sampler.dataset_size() == dataset->size(), "DataLoader: the sampler covers ",
           sampler.dataset_size(), " samples but ", dataset->describe(), " has ", dataset->size());
  ZT_CHECK(options.batch_size >= 1, "DataLoader: batch_size must be >= 1, got ",
           options.batch_size);
  ZT_CHECK(options.prefetch >= 0, "DataLoader: prefetch must be >= 0");
  ZT_CHECK(options.workers >= 1, "DataLoader: workers must be >= 1, got ", options.workers,
           " (the threads that read one batch's samples at once); to read every sample on the "
           "thread that calls next(), set workers = 1 and prefetch = 0");
  ZT_CHECK(std::isfinite(options.timeout) && options.timeout >= 0,
           "DataLoader: timeout must be a number of seconds >= 0 (0: no limit), got ",
           options.timeout);
  // A longer wait overflows the clock's nanosecond count: the wait would end at once.
  ZT_CHECK(options.timeout <= kMaxTimeout, "DataLoader: a timeout of ", options.timeout,
           " s is longer than a wait can be timed (at most ", kMaxTimeout,
           " s, about 31 years); set 0 to wait without limit");
  ZT_CHECK(options.timeout == 0 || options.prefetch >= 1, "DataLoader: a timeout of ",
           options.timeout,
           " s needs prefetch >= 1: with prefetch 0 the thread that calls next() reads the "
           "samples itself and cannot stop waiting; set prefetch to 1 or more, or no timeout");
  const int64_t n = sampler.num_samples();
  const int64_t batches = options.drop_last ? n / options.batch_size
                                            : (n + options.batch_size - 1) / options.batch_size;
  ZT_CHECK(batches >= 1, "DataLoader: rank ", sampler.rank(), " gets ", n,
           " samples per epoch, fewer than one batch of ", options.batch_size,
           "; use a smaller batch, more samples or fewer ranks");
  ZT_CHECK(sampler.epoch() >= 0, "DataLoader: the sampler's epoch is ", sampler.epoch(),
           "; the stream starts at an epoch >= 0 (set_epoch)");
  consumer_ = {sampler.epoch(), 0};
  stream_ = std::make_shared<Stream>(std::move(dataset), std::move(sampler), options, batches,
                                     current_ledger(), num_threads());
}

int64_t DataLoader::batches_per_epoch() const {
  return stream_->batches_per_epoch;
}

const Dataset& DataLoader::dataset() const {
  return *stream_->dataset;
}

const DistributedSampler& DataLoader::sampler() const {
  return stream_->sampler;
}

const LoaderOptions& DataLoader::options() const {
  return stream_->options;
}

LoaderState DataLoader::stamped(LoaderState s) const {
  s.batch_size = stream_->options.batch_size;
  s.world = stream_->sampler.world();
  s.dataset_size = stream_->sampler.dataset_size();
  return s;
}

DataLoader::~DataLoader() {
  stop();
}

Batch DataLoader::Stream::make_batch(int64_t epoch, int64_t position,
                                     const std::atomic<bool>* cancel) {
  if (epoch != cached_epoch) {
    DistributedSampler s = sampler;
    s.set_epoch(epoch);
    cached_indices = s.indices();
    cached_epoch = epoch;
  }
  const int64_t first = position * options.batch_size;
  const int64_t b =
      std::min<int64_t>(options.batch_size, static_cast<int64_t>(cached_indices.size()) - first);
  ZT_CHECK(b >= 1, "DataLoader: batch ", position, " is past the end of epoch ", epoch);
  const int64_t* idx = cached_indices.data() + first;
  if (cancel) {  // the producer's batch: what a timeout names
    std::lock_guard<std::mutex> lock(mu);
    making = {epoch, position};
    unread.assign(idx, idx + b);
  }

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
  const int64_t nthreads = std::min<int64_t>(options.workers, b);
  auto work = [&] {
    LedgerScope scope(ledger);
    if (nthreads > 1) set_num_threads(std::max(1, threads / static_cast<int>(nthreads)));
    for (int64_t i = next++; i < b && !(cancel && *cancel); i = next++) {
      try {
        samples[static_cast<size_t>(i)] = dataset->get(idx[i]);
      } catch (...) {
        errors[static_cast<size_t>(i)] = std::current_exception();
      }
      if (cancel) {
        std::lock_guard<std::mutex> lock(mu);
        if (auto it = std::find(unread.begin(), unread.end(), idx[i]); it != unread.end())
          unread.erase(it);
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
  auto what = [&](int64_t i) { return dataset->describe() + " sample " + std::to_string(idx[i]); };
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
    ZT_CHECK(s.clip.sizes() == shape, "DataLoader: ", dataset->describe(), " sample ", idx[i],
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

void DataLoader::Stream::produce() {
  LedgerScope scope(ledger);
  set_num_threads(threads);
  auto finish = [&] {  // under mu
    finished = true;
    cv.notify_all();
  };
  for (;;) {
    LoaderState at;
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] {
        return stopping || (static_cast<int64_t>(queue.size()) < options.prefetch &&
                            !(end && producer == *end) && has_next(producer, batches_per_epoch));
      });
      if (stopping) return finish();
      at = producer;
    }
    Item item;
    try {
      item.batch = make_batch(at.epoch, at.position, &stopping);
    } catch (...) {
      item.error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      if (stopping) return finish();
      queue.push_back(std::move(item));
      advance(producer, batches_per_epoch);
    }
    cv.notify_all();
  }
}

std::string DataLoader::Stream::unread_named() const {
  constexpr size_t kNamed = 8;  // the first few; a batch may hold thousands
  std::string left;
  for (size_t i = 0; i < std::min(unread.size(), kNamed); ++i)
    left += (i ? ", " : "") + std::to_string(unread[i]);
  if (unread.size() > kNamed) left += detail::cat(" and ", unread.size() - kNamed, " more");
  return left;
}

Error DataLoader::Stream::timed_out(const LoaderState& at) const {
  const bool started = making && *making == at;
  const std::string left = started ? unread_named() : "";
  return Error(detail::cat(
      "DataLoader::next: batch ", at.position, " of epoch ", at.epoch, " of ", dataset->describe(),
      " was not ready within the timeout of ", options.timeout, " s: ",
      !started       ? std::string("its reading had not started")
      : left.empty() ? std::string("its samples were read, the batch not yet made")
                     : detail::cat("get() has not returned for sample(s) ", left),
      "; a get() that never returns (a file on a hung mount, a dataset waiting on "
      "something) hangs the loader: find what it waits on, or raise the timeout "
      "(LoaderOptions::timeout; data.timeout in the apps' YAML) if reading is just slow"));
}

void DataLoader::start() {
  Stream& s = *stream_;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.stopping = false;
    s.finished = false;
    s.producer = consumer_;
    s.end = end_;
    s.overdue.reset();
  }
  if (stream_->options.prefetch > 0) thread_ = std::thread([hold = stream_] { hold->produce(); });
}

void DataLoader::stop() {
  Stream& s = *stream_;
  std::unique_lock<std::mutex> lock(s.mu);
  s.stopping = true;
  s.cv.notify_all();
  // The samples being read get the timeout to return (kStopWait without one: a get() that never
  // returns must not hang the end of a run), unless next() has already waited that long for
  // them: a get() reported stuck is not waited for a second time (the error of next() would
  // reach the user only after twice the timeout, the loader destroyed as it unwinds).
  const bool reported = s.overdue && s.making == s.overdue && !s.unread.empty();
  const double wait = reported                       ? 0.0
                      : stream_->options.timeout > 0 ? stream_->options.timeout
                                                     : kStopWait;
  if (thread_.joinable() &&
      !s.cv.wait_for(lock, std::chrono::duration<double>(wait), [&] { return s.finished; })) {
    // A get() that does not return: the thread keeps its Stream (the dataset with it) and
    // ends when the get() does; the loader reads from a new one.
    if (!reported) {
      try {  // stop() runs in the destructor: a describe() that throws says nothing
        std::fprintf(stderr,
                     "zt: DataLoader: %s: get() has not returned for sample(s) %s (batch %lld "
                     "of epoch %lld) %g s after the loader stopped; its thread is left to end "
                     "when get() returns\n",
                     s.dataset->describe().c_str(), s.unread_named().c_str(),
                     static_cast<long long>(s.making ? s.making->position : 0),
                     static_cast<long long>(s.making ? s.making->epoch : 0), wait);
      } catch (...) {
      }
    }
    lock.unlock();
    thread_.detach();
    stream_ = s.renewed();
    return;
  }
  lock.unlock();
  if (thread_.joinable()) thread_.join();
  s.queue.clear();
}

Batch DataLoader::next() {
  ZT_CHECK(!at_end(consumer_), "DataLoader::next: the batches restore() allowed, up to batch ",
           consumer_.position, " of epoch ", consumer_.epoch, ", were all read");
  ZT_CHECK(has_next(consumer_, stream_->batches_per_epoch), "DataLoader::next: batch ",
           consumer_.position, " of epoch ", consumer_.epoch,
           " is the last an epoch count reaches (restored from a damaged "
           "position?)");
  if (stream_->options.prefetch > 0 && !thread_.joinable()) start();
  Stream& s = *stream_;
  Stream::Item item;
  if (stream_->options.prefetch == 0) {
    try {
      item.batch = s.make_batch(consumer_.epoch, consumer_.position);
    } catch (...) {
      item.error = std::current_exception();
    }
  } else {
    std::unique_lock<std::mutex> lock(s.mu);
    auto ready = [&] { return !s.queue.empty(); };
    if (stream_->options.timeout > 0) {
      if (!s.cv.wait_for(lock, std::chrono::duration<double>(stream_->options.timeout), ready)) {
        s.overdue = consumer_;
        throw s.timed_out(consumer_);
      }
    } else {
      s.cv.wait(lock, ready);
    }
    item = std::move(s.queue.front());
    s.queue.pop_front();
  }
  advance(consumer_, stream_->batches_per_epoch);
  s.cv.notify_all();  // a producer waiting for room in the queue goes on
  if (item.error) std::rethrow_exception(item.error);
  return std::move(item.batch);
}

LoaderState DataLoader::state() const {
  return stamped(consumer_);
}

LoaderState DataLoader::state_at_sample(int64_t epoch, int64_t samples) const {
  ZT_CHECK(epoch >= 0 && samples >= 0, "DataLoader::state_at_sample: epoch ", epoch, " and sample ",
           samples, " must be >= 0");
  const int64_t position = samples / (stream_->options.batch_size * stream_->sampler.world());
  if (position >= stream_->batches_per_epoch) {
    ZT_CHECK(epoch < std::numeric_limits<int64_t>::max(), "DataLoader::state_at_sample: sample ",
             samples, " is past the end of epoch ", epoch, ", the last an epoch count reaches");
    return stamped({epoch + 1, 0});
  }
  return stamped({epoch, position});
}

int64_t DataLoader::unpadded(const Batch& b) const {
  // Rank r's i-th sample of an epoch sits at r + i x world in the padded global order;
  // positions past the dataset's size are padding, so they end a batch.
  const int64_t world = stream_->sampler.world(), first = b.position * stream_->options.batch_size;
  int64_t k = 0;
  while (k < b.clips.size(0) &&
         stream_->sampler.rank() + (first + k) * world < stream_->sampler.dataset_size())
    ++k;
  return k;
}

void DataLoader::restore(const LoaderState& state, int64_t batches) {
  // A position counts batches of the layout it was taken under: first refuse another one.
  const int64_t batch = stream_->options.batch_size, world = stream_->sampler.world();
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
  const int64_t size = stream_->sampler.dataset_size();
  ZT_CHECK(state.dataset_size == 0 || state.dataset_size == size,
           "DataLoader::restore: the state (batch ", state.position, " of epoch ", state.epoch,
           ") was taken over a data set of ", counted(state.dataset_size, "sample"), ", not the ",
           size, " of ", stream_->dataset->describe(),
           " this loader reads, so its position is in another shuffle; restore it into a loader "
           "over the data it was taken over, or, to go on over this data anyway (the rest of "
           "epoch ",
           state.epoch,
           " in this data set's shuffle: some samples read again, others not at all), restore "
           "state_at_sample(",
           state.epoch, ", ", state.position, " x ", batch, " x ", world, ")");
  ZT_CHECK(state.epoch >= 0 && state.position >= 0 && state.position < stream_->batches_per_epoch,
           "DataLoader::restore: position ", state.position, " of epoch ", state.epoch,
           " is outside the ", stream_->batches_per_epoch,
           " batches per epoch (was the checkpoint made with another batch size or world?)");
  ZT_CHECK(batches >= 0, "DataLoader::restore: batches must be >= 0, got ", batches);
  std::optional<LoaderState> end;
  if (batches > 0) {
    int64_t through = 0, end_epoch = 0;  // batches from the start of state.epoch
    ZT_CHECK(
        !__builtin_add_overflow(state.position, batches, &through) &&
            !__builtin_add_overflow(state.epoch, through / stream_->batches_per_epoch, &end_epoch),
        "DataLoader::restore: ", batches, " batches from batch ", state.position, " of epoch ",
        state.epoch, " go past the last epoch an epoch count reaches");
    end = LoaderState{end_epoch, through % stream_->batches_per_epoch};
  }
  // Already there with the prepared batches that position reads (a resume at the start):
  // keep them, unless a new end falls among them.
  const bool keep = state == consumer_ && thread_.joinable() && !end;
  if (!keep) {
    stop();
    consumer_ = {state.epoch, state.position};
  }
  end_ = end;
  {
    std::lock_guard<std::mutex> lock(stream_->mu);
    stream_->end = end;
  }
  stream_->cv.notify_all();  // a kept producer waiting at the old end goes on
  if (!keep && stream_->options.prefetch > 0) start();
}

}  // namespace zt::data
