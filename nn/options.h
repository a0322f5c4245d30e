// ZT_ARG: one option of a layer's options struct, with a chainable setter and a getter,
// as libtorch's TORCH_ARG: LinearOptions(4, 8).bias(false).
#pragma once

/// Declares `name(value)` (sets, returns *this) and `name()` (gets) backed by `name_`.
#define ZT_ARG(T, name)                             \
 public:                                            \
  auto name(const T& new_##name)->decltype(*this) { \
    this->name##_ = new_##name;                     \
    return *this;                                   \
  }                                                 \
  const T& name() const {                           \
    return this->name##_;                           \
  }                                                 \
                                                    \
 private:                                           \
  T name##_
