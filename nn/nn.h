// Umbrella header: the whole nn library (modules, layers, init, losses, state dicts,
// safetensors).
#pragma once

#include "nn/activation.h"
#include "nn/attention.h"
#include "nn/container.h"
#include "nn/conv.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/init.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "nn/module.h"
#include "nn/norm.h"
#include "nn/safetensors.h"
#include "nn/state_dict.h"
