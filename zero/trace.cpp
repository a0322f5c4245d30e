// Trace bookkeeping.
#include "zero/trace.h"

namespace zt::zero {

bool Trace::on_fetch(int id, int64_t elems) {
  switch (state_) {
    case State::kRecording:
      ids_.push_back(id);
      elems_.push_back(elems);
      return true;
    case State::kValid:
      if (pos_ < ids_.size() && ids_[pos_] == id) {
        ++pos_;
        return true;
      }
      invalidate();
      return false;
    case State::kInvalid:
      return true;
  }
  return true;
}

bool Trace::end_step() {
  pos_ = 0;
  if (state_ == State::kRecording && !ids_.empty()) {
    state_ = State::kValid;
    return true;
  }
  if (state_ == State::kInvalid) {
    ids_.clear();
    elems_.clear();
    state_ = State::kRecording;
  }
  return false;
}

void Trace::invalidate() {
  if (state_ != State::kInvalid) ++invalidations_;
  state_ = State::kInvalid;
}

std::vector<int> Trace::upcoming(int64_t max_elems) const {
  std::vector<int> out;
  if (state_ != State::kValid) return out;
  int64_t total = 0;
  for (size_t i = pos_; i < ids_.size(); ++i) {
    total += elems_[i];
    if (total > max_elems) break;
    out.push_back(ids_[i]);
  }
  return out;
}

int64_t Trace::reuse_distance(int id) const {
  if (state_ != State::kValid) return -1;
  int64_t d = 0;
  for (size_t i = pos_; i < ids_.size(); ++i) {
    if (ids_[i] == id) return d;
    d += elems_[i];
  }
  return -1;
}

}  // namespace zt::zero
