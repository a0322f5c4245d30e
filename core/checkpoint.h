// Activation checkpointing (core/checkpoint.cpp): a function run without a graph whose
// outputs' gradients recompute it with one. core/autograd.h includes this header.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace zt::autograd {

/// Activation checkpointing: runs `fn(inputs)` without a graph, keeping only the inputs,
/// and recomputes it with a graph when its outputs' gradients arrive, backpropagating
/// through the recomputation (a backward inside the backward) into the inputs and into
/// every leaf `fn` used (its parameters), whether or not an input requires grad. The
/// recomputation draws the same random numbers (dropout masks) as the first run, and
/// leaves the generator where it was. Other side effects of `fn` run twice, except what
/// asks in_recompute() (BatchNorm updates its running statistics once). `fn` must not
/// write to its inputs in place (the recomputation would start from the written value):
/// the first run checks and throws. Integer outputs come back without a graph; outside
/// grad mode this is just fn(inputs).
std::vector<Tensor> checkpoint(
    const std::string& name, const std::vector<Tensor>& inputs,
    const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn);
/// True inside a checkpoint's first run (no graph: it will be recomputed in backward).
bool in_checkpoint_forward();
/// True while a checkpoint recomputes its function during backward.
bool in_recompute();

}  // namespace zt::autograd
