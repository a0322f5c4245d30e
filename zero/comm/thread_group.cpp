// ThreadGroup: one mutex and condition variable for the whole group (N is small, waits
// are short), a slot per in-flight sequence number, erased when the last rank leaves.
// A waiter first spins (without the lock) on an epoch counter that every state change
// bumps, and sleeps on the condition variable only when nothing changed for a while.
#include "zero/comm/thread_group.h"

#include <sstream>

#include "core/error.h"
#include "zero/comm/communicator.h"
#include "zero/comm/spin.h"

namespace zt::comm {

ThreadGroup::ThreadGroup(int size) : size_(size), exited_(size, false), last_seq_(size, -1) {
  ZT_CHECK(size >= 1, "ThreadGroup: size must be >= 1, got ", size);
}

ThreadGroup::Slot& ThreadGroup::slot(int64_t seq) {
  auto [it, fresh] = slots_.try_emplace(seq);
  if (fresh) {
    it->second.posts.resize(size_);
    it->second.held.resize(size_);
    it->second.arrived.assign(size_, false);
    for (auto& s : it->second.phase_seen) s.assign(size_, false);
  }
  return it->second;
}

void ThreadGroup::throw_aborted(const std::string& what) const {
  throw AbortedError(detail::cat("zt.comm: ", what, " aborted because ", abort_reason_));
}

static std::string rank_list(const std::vector<int>& ranks) {
  std::ostringstream os;
  for (size_t i = 0; i < ranks.size(); ++i) os << (i ? ", " : "") << ranks[i];
  return os.str();
}

template <typename Ready, typename Missing>
void ThreadGroup::wait_for(std::unique_lock<std::mutex>& lock, int64_t seq, Ready ready,
                           Missing missing, WaitLimit limit, const std::string& what,
                           const char* doing) {
  while (!ready()) {
    if (!abort_reason_.empty()) throw_aborted(what);
    std::vector<int> gone, ahead;
    for (int r : missing()) {
      if (exited_[r]) gone.push_back(r);
      if (last_seq_[r] > seq) ahead.push_back(r);
    }
    if (!ahead.empty()) {
      std::ostringstream os;
      os << "zt.comm: " << what << ": rank(s) " << rank_list(ahead) << " went on without "
         << (std::string(doing) == "arrive" ? "calling" : "finishing") << " it";
      for (int r : ahead) {
        auto later = slots_.find(last_seq_[r]);
        os << "; rank " << r << " called "
           << (later != slots_.end() ? later->second.posts[r].signature : "a collective") << " as #"
           << last_seq_[r];
      }
      os << " (an error of its own during this collective, caught and gone past?)";
      abort_locked(os.str());
      ZT_FAIL(os.str());
    }
    if (!gone.empty()) {
      std::string msg =
          detail::cat("zt.comm: ", what, ": rank(s) ", rank_list(gone), " returned without ",
                      std::string(doing) == "arrive" ? "calling" : "finishing", " it");
      abort_locked(msg);
      ZT_FAIL(msg);
    }
    const uint64_t seen = epoch_.load(std::memory_order_relaxed);
    lock.unlock();
    spin_until([&] { return epoch_.load(std::memory_order_acquire) != seen; });
    lock.lock();
    // A change while the lock was free may have notified nobody: look again first. With
    // the lock held and no change, any later change notifies this wait.
    if (epoch_.load(std::memory_order_relaxed) != seen) continue;
    if (cv_.wait_until(lock, limit.at) == std::cv_status::timeout && !ready()) {
      std::vector<int> late = missing();
      std::ostringstream os;
      os << "zt.comm: " << what << " timed out after " << limit.timeout.count()
         << " ms (see Communicator::set_timeout); rank(s) that did not " << doing << ": ["
         << rank_list(late) << "]";
      for (int r : late) {
        os << "; rank " << r;
        if (last_seq_[r] < 0)
          os << " has not arrived at any collective yet";
        else
          os << " last arrived at #" << last_seq_[r];
      }
      abort_locked(os.str());
      ZT_FAIL(os.str());
    }
  }
}

std::vector<Post> ThreadGroup::arrive(int rank, int64_t seq, const Post& post, Held held,
                                      WaitLimit limit, const std::string& what) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!abort_reason_.empty()) throw_aborted(what);
  Slot& s = slot(seq);
  for (int j = 0; j < size_; ++j) {
    if (s.arrived[j] && s.posts[j].signature != post.signature) {
      std::string msg =
          mismatch_message(seq, detail::cat("rank ", j, " called ", s.posts[j].signature, ", rank ",
                                            rank, " called ", post.signature));
      abort_locked(msg);
      ZT_FAIL(msg);
    }
  }
  s.posts[rank] = post;
  s.held[rank] = std::move(held);
  s.arrived[rank] = true;
  s.n_arrived += 1;
  last_seq_[rank] = seq;
  bool skipped = false;  // an earlier collective waits for this rank: its waiters must know
  for (const auto& [earlier, e] : slots_) {
    if (earlier >= seq) break;
    skipped = skipped || !e.arrived[rank];
    for (int ph = 0; ph <= kLeavePhase; ++ph)
      skipped = skipped || (e.phase_count[ph] > 0 && !e.phase_seen[ph][rank]);
  }
  if (s.n_arrived == size_ || skipped) notify_locked();
  wait_for(
      lock, seq, [&] { return s.n_arrived == size_; },
      [&] {
        std::vector<int> m;
        for (int j = 0; j < size_; ++j)
          if (!s.arrived[j]) m.push_back(j);
        return m;
      },
      limit, what, "arrive");
  return s.posts;
}

void ThreadGroup::sync(int rank, int64_t seq, int phase, WaitLimit limit, const std::string& what) {
  std::unique_lock<std::mutex> lock(mu_);
  Slot& s = slots_.at(seq);
  s.phase_seen[phase][rank] = true;
  if (++s.phase_count[phase] == size_) notify_locked();
  wait_for(
      lock, seq, [&] { return s.phase_count[phase] == size_; },
      [&] {
        std::vector<int> m;
        for (int j = 0; j < size_; ++j)
          if (!s.phase_seen[phase][j]) m.push_back(j);
        return m;
      },
      limit, what, "finish");
}

void ThreadGroup::leave(int rank, int64_t seq, WaitLimit limit, const std::string& what) {
  sync(rank, seq, kLeavePhase, limit, what);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = slots_.find(seq);
  if (it == slots_.end()) return;
  // Every rank is done reading this rank's memory. A rank that leaves by throwing (abort,
  // timeout) never gets here, so its memory stays held while a peer may still copy it.
  it->second.held[rank] = Held{};
  if (++it->second.released == size_) slots_.erase(it);
}

void ThreadGroup::depart(int64_t seq) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = slots_.find(seq);
  if (it != slots_.end() && ++it->second.released == size_) slots_.erase(it);
}

void ThreadGroup::abort_locked(const std::string& reason) {
  if (abort_reason_.empty()) abort_reason_ = reason.empty() ? "abort()" : reason;
  notify_locked();
}

void ThreadGroup::notify_locked() {
  epoch_.fetch_add(1, std::memory_order_release);
  cv_.notify_all();
}

void ThreadGroup::abort(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  abort_locked(reason);
}

std::string ThreadGroup::abort_reason() const {
  std::lock_guard<std::mutex> lock(mu_);
  return abort_reason_;
}

void ThreadGroup::note_unseen(const std::string& error) {
  std::lock_guard<std::mutex> lock(mu_);
  if (unseen_.empty()) unseen_ = error;
}

std::string ThreadGroup::unseen() const {
  std::lock_guard<std::mutex> lock(mu_);
  return unseen_;
}

void ThreadGroup::mark_exited(int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  exited_[rank] = true;
  notify_locked();
}

}  // namespace zt::comm
