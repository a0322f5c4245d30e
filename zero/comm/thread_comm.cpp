// ThreadComm collectives on shared memory. Each rank writes only its own outputs and
// reads the other ranks' posted buffers between arrive() and leave(); all_reduce reduces
// one chunk per rank (in rank order, into a comm buffer), syncs, then copies every chunk.
// Small all-gathers, reduce-scatters and broadcasts post a copy of their input instead
// (eager): one rendezvous instead of two, which is most of a small message's latency.
#include "zero/comm/thread_comm.h"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>

#include "core/cpu/blas.h"
#include "core/parallel.h"
#include "zero/comm/reduce.h"

namespace zt::comm {

ThreadComm::ThreadComm(std::shared_ptr<ThreadGroup> group, int rank)
    : Communicator(rank, group->size()), group_(std::move(group)) {
  exec_ = std::make_unique<Executor>();
}

ThreadComm::~ThreadComm() {
  if (const std::exception_ptr lost = exec_->finish()) {
    try {
      std::rethrow_exception(lost);
    } catch (const std::exception& e) {
      group_->note_unseen(detail::cat("rank ", rank(), ": ", e.what()));
    } catch (...) {
      group_->note_unseen(detail::cat("rank ", rank(), ": an unknown error"));
    }
  }
  exec_.reset();
  group_->mark_exited(rank());
}

void ThreadComm::abort(const std::string& reason) {
  group_->abort(reason);
}

std::string ThreadComm::abort_reason() const {
  return group_->abort_reason();
}

std::shared_ptr<Work> ThreadComm::submit(Request req) {
  // A blocking call with nothing queued ahead of it runs on the caller's thread: handing
  // it to the communication thread and back costs two wake-ups, which dominate small
  // messages. Issue order is kept: the queue is empty and only this thread submits.
  if (req.blocking && exec_->idle()) {
    MemTagScope tag(MemTag::kCommBuffer);
    execute(req);
    return CpuWork::done();
  }
  return exec_->submit([this, req = std::move(req)] { execute(req); });
}

namespace {
void copy_bytes(void* dst, const void* src, size_t n) {
  if (dst != src && n > 0) std::memcpy(dst, src, n);
}
// Inputs up to this size are posted as private copies (Post::eager).
constexpr size_t kEagerBytes = 64 << 10;
// Makes `p` own a copy of its n input bytes when the message is small; returns whether.
bool post_eager(Post& p, size_t n) {
  if (n > kEagerBytes || p.in == nullptr) return false;
  auto copy = std::make_shared<std::vector<char>>(n);
  copy_bytes(copy->data(), p.in, n);
  p.in = copy->data();
  p.eager = std::move(copy);
  return true;
}
}  // namespace

void ThreadComm::execute(const Request& req) {
  check_healthy(req);
  const std::string what = describe(req);
  const std::chrono::milliseconds wait = timeout();
  const WaitLimit limit{deadline_after(wait), wait};
  const int n = size(), r = rank();
  const size_t e = req.out.defined() ? dtype_size(req.out.dtype()) : 1;
  Post p;
  p.signature = signature(req);
  if (req.in.defined()) p.in = req.in.data_ptr();
  if (req.out.defined()) p.out = req.out.data_ptr();
  Held held;  // what peers read of this rank's memory, held by the group (an eager post: none)
  if (req.in.defined()) held.tensors.push_back(req.in);
  held.bytes = req.bytes_in;
  bool eager = false;
  auto arrive = [&] {
    return group_->arrive(r, req.seq, p, eager ? Held{} : std::move(held), limit, what);
  };
  switch (req.kind) {
    case Collective::kAllGather: {
      const size_t s = static_cast<size_t>(req.in.numel()) * e;
      eager = post_eager(p, s);
      std::vector<Post> posts = arrive();
      for (int j = 0; j < n; ++j) copy_bytes(bytes_of(req.out) + j * s, posts[j].in, s);
      break;
    }
    case Collective::kReduceScatter: {
      const int64_t s = req.out.numel();
      eager = post_eager(p, static_cast<size_t>(s * n) * e);
      std::vector<Post> posts = arrive();
      std::vector<const void*> ins(n);
      for (int j = 0; j < n; ++j) ins[j] = static_cast<const char*>(posts[j].in) + r * s * e;
      reduce_buffers(req.out.dtype(), req.op, req.out.data_ptr(), ins.data(), n, s);
      break;
    }
    case Collective::kAllReduce: {
      const Tensor& t = req.out;
      p.in = t.data_ptr();
      held.tensors = {t};
      int64_t lo, hi;
      even_chunk(t.numel(), n, r, &lo, &hi);
      Tensor chunk = Tensor::empty({hi - lo}, t.dtype());  // charged as kCommBuffer
      p.scratch = chunk.data_ptr();
      held.tensors.push_back(chunk);
      std::vector<Post> posts = arrive();
      std::vector<const void*> ins(n);
      for (int j = 0; j < n; ++j) ins[j] = static_cast<const char*>(posts[j].in) + lo * e;
      reduce_buffers(t.dtype(), req.op, chunk.data_ptr(), ins.data(), n, hi - lo);
      group_->sync(r, req.seq, 0, limit, what);  // all inputs read: t may be written
      for (int j = 0; j < n; ++j) {
        int64_t jlo, jhi;
        even_chunk(t.numel(), n, j, &jlo, &jhi);
        copy_bytes(bytes_of(t) + jlo * e, posts[j].scratch, (jhi - jlo) * e);
      }
      group_->leave(r, req.seq, limit, what);  // on success nobody reads chunk after this
      return;
    }
    case Collective::kBroadcast: {
      p.in = req.out.data_ptr();
      held.tensors = {req.out};
      eager = post_eager(p, static_cast<size_t>(req.out.numel()) * e);
      std::vector<Post> posts = arrive();
      if (r != req.root) copy_bytes(p.out, posts[req.root].in, req.out.numel() * e);
      break;
    }
    case Collective::kScatter: {
      const size_t s = static_cast<size_t>(req.out.numel()) * e;
      std::vector<Post> posts = arrive();
      copy_bytes(p.out, static_cast<const char*>(posts[req.root].in) + r * s, s);
      break;
    }
    case Collective::kBarrier:
      arrive();
      break;
    case Collective::kAllGatherBytes: {
      p.bytes = req.bytes_in.get();
      std::vector<Post> posts = arrive();
      for (int j = 0; j < n; ++j) req.bytes_out->push_back(*posts[j].bytes);
      break;
    }
  }
  if (eager)
    group_->depart(req.seq);
  else
    group_->leave(r, req.seq, limit, what);
}

// How long run_threads waits at least for the ranks after one failed (its timeout if longer).
constexpr std::chrono::milliseconds kStuckGrace{10'000};

void run_threads(int n, const std::function<void(Communicator&)>& fn) {
  ZT_CHECK(n >= 1, "run_threads: need at least one rank, got ", n);
  // Before the ranks' threads start, as comm::launch does: the choice may set
  // OPENBLAS_CORETYPE (setenv), which no other thread may read meanwhile (a rank's first
  // product would otherwise make it while another reads ZT_COMM_TIMEOUT_MS).
  cpu::use_cpu_blas_kernels();
  auto group = std::make_shared<ThreadGroup>(n);
  std::mutex mu;
  std::condition_variable returned_cv;
  std::vector<bool> returned(n, false);     // the rank's thread is done with everything
  std::exception_ptr first, first_aborted;  // the root cause wins over its echoes
  int first_rank = -1;                      // the first rank that failed, with its timeout
  std::chrono::milliseconds first_timeout{0};
  std::chrono::steady_clock::time_point failed_at;
  auto fail = [&](int r, std::exception_ptr err, std::chrono::milliseconds timeout) {
    std::string msg = "unknown exception";
    bool echo = false;
    try {
      std::rethrow_exception(err);
    } catch (const AbortedError& ex) {
      msg = ex.what();
      echo = true;
    } catch (const std::exception& ex) {
      msg = ex.what();
    } catch (...) {
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      std::exception_ptr& slot = echo ? first_aborted : first;
      if (!slot) slot = err;
      if (first_rank < 0) {
        first_rank = r;
        first_timeout = timeout;
        failed_at = std::chrono::steady_clock::now();
      }
    }
    returned_cv.notify_all();
    group->abort(detail::cat("rank ", r, " failed: ", msg));
  };
  const int threads_per_rank = std::max(1, num_threads() / n);  // the caller's share
  std::vector<std::thread> ranks;
  ranks.reserve(n);
  auto start = [&](int r) {
    ranks.emplace_back([&, r] {
      try {  // the ledger reads $ZT_MEMORY_LIMIT, which may not parse
        LedgerScope ledger(std::make_shared<MemoryLedger>(detail::cat("rank ", r)));
        set_num_threads(threads_per_rank);
        ThreadComm comm(group, r);
        try {
          fn(comm);
        } catch (...) {  // abort before ~ThreadComm drains its queue
          fail(r, std::current_exception(), comm.timeout());
        }
      } catch (...) {
        fail(r, std::current_exception(), std::chrono::minutes(10));
      }
      {
        std::lock_guard<std::mutex> lock(mu);
        returned[r] = true;
      }
      returned_cv.notify_all();
    });
  };
  std::string not_started;  // why a rank's thread could not be created
  for (int r = 0; r < n && not_started.empty(); ++r) {
    try {
      start(r);
    } catch (const std::system_error& e) {
      not_started = detail::cat("cannot start thread rank ", r, " of ", n, ": ", e.what());
      group->abort(not_started);  // the ranks already running stop at their next collective
    }
  }
  {
    // A rank stuck outside any collective (its own code, I/O, a lock) never meets the abort,
    // and this function cannot return while its thread runs (the thread uses fn and this
    // frame): once the failing rank's timeout has passed, end the process, as MPI_Abort ends
    // an MPI job's ranks stuck in their own code, rather than hang without end. At least
    // kStuckGrace: a rank finishing a step under a small (test) timeout is not stuck.
    std::unique_lock<std::mutex> lock(mu);
    const size_t started = ranks.size();
    auto all_returned = [&] {
      return static_cast<size_t>(std::count(returned.begin(), returned.end(), true)) == started;
    };
    returned_cv.wait(lock, [&] { return all_returned() || first_rank >= 0; });
    const auto grace =
        std::clamp<std::chrono::milliseconds>(first_timeout, kStuckGrace, std::chrono::hours(24));
    if (!returned_cv.wait_until(lock, failed_at + grace, all_returned)) {
      std::string stuck;
      for (size_t r = 0; r < started; ++r)
        if (!returned[r]) stuck += detail::cat(stuck.empty() ? "" : ", ", r);
      std::fprintf(stderr,
                   "zt.comm: rank(s) %s have not returned %lld ms after rank %d failed (its "
                   "timeout, at least 10 s), stuck outside any collective (in their own code, I/O "
                   "or a lock?); ending the process. The failure: %s\n",
                   stuck.c_str(), static_cast<long long>(grace.count()), first_rank,
                   group->abort_reason().c_str());
      std::fflush(stderr);
      // No exit(): static destructors would run under the stuck threads. stdout is not
      // flushed either: a thread stuck writing to it holds its lock.
      std::_Exit(EXIT_FAILURE);
    }
  }
  for (auto& t : ranks) t.join();
  ZT_CHECK(not_started.empty(), not_started,
           " (the machine's limit on threads or memory); run fewer ranks (--ranks), or more "
           "processes under mpirun");
  if (first) std::rethrow_exception(first);
  // A dropped collective's own error before an echo of some failure ("aborted because"):
  // the echo's cause may be that very error.
  const std::string unseen = group->unseen();
  ZT_CHECK(unseen.empty(), unseen, kUnwaitedWorkHint);
  if (first_aborted) std::rethrow_exception(first_aborted);
}

}  // namespace zt::comm
