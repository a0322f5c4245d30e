// Trace bookkeeping.
#include "zero/trace.h"

#include <algorithm>

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
    starts_.assign(ids_.size() + 1, 0);
    fetches_of_.clear();
    for (size_t i = 0; i < ids_.size(); ++i) {
      starts_[i + 1] = starts_[i] + elems_[i];
      if (static_cast<size_t>(ids_[i]) >= fetches_of_.size()) fetches_of_.resize(ids_[i] + 1);
      fetches_of_[ids_[i]].push_back(i);
    }
    return true;
  }
  if (state_ == State::kInvalid) {
    ids_.clear();
    elems_.clear();
    starts_.clear();
    fetches_of_.clear();
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
  for (size_t i = pos_; i < ids_.size() && elems_between(pos_, i + 1) <= max_elems; ++i)
    out.push_back(ids_[i]);
  return out;
}

size_t Trace::next_fetch(int id, size_t i) const {
  if (state_ != State::kValid || id < 0 || static_cast<size_t>(id) >= fetches_of_.size())
    return kNone;
  const std::vector<size_t>& at = fetches_of_[id];
  auto it = std::lower_bound(at.begin(), at.end(), i);
  return it == at.end() ? kNone : *it;
}

int64_t Trace::reuse_distance(int id) const {
  const size_t j = next_fetch(id, pos_);
  return j == kNone ? -1 : elems_between(pos_, j);
}

}  // namespace zt::zero
