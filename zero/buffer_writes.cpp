// BufferWrites: storage versions read at each call of the model, before and after.
#include "zero/buffer_writes.h"

#include <algorithm>

namespace zt::zero {

BufferWrites::BufferWrites(nn::Module& model, std::vector<Tensor> buffers)
    : model_(model), buffers_(std::move(buffers)), outside_(buffers_.size(), 0) {
  snapshot();
  hooks_.push_back(
      model_.add_forward_pre_hook([this](nn::Module&, std::vector<Tensor>&) { note_writes(); },
                                  /*outer=*/true));
  hooks_.push_back(model_.add_forward_hook(
      [this](nn::Module&, const std::vector<Tensor>&, std::vector<Tensor>&) { snapshot(); },
      /*outer=*/true));
  // A forward that failed part way wrote what it wrote as a forward.
  hooks_.push_back(
      model_.add_forward_error_hook([this](nn::Module&) { snapshot(); }, /*outer=*/true));
}

BufferWrites::~BufferWrites() {
  for (int id : hooks_) model_.remove_hook(id);
}

std::vector<uint8_t> BufferWrites::outside_forwards() {
  note_writes();
  return outside_;
}

void BufferWrites::synced() {
  std::fill(outside_.begin(), outside_.end(), 0);
  snapshot();
}

void BufferWrites::note_writes() {
  for (size_t i = 0; i < buffers_.size(); ++i)
    if (buffers_[i].defined() && buffers_[i].has_storage() &&
        buffers_[i].storage()->version() != versions_[i])
      outside_[i] = 1;
}

void BufferWrites::snapshot() {
  versions_.assign(buffers_.size(), 0);
  for (size_t i = 0; i < buffers_.size(); ++i)
    if (buffers_[i].defined() && buffers_[i].has_storage())
      versions_[i] = buffers_[i].storage()->version();
}

}  // namespace zt::zero
