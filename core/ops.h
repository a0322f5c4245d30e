// Umbrella header: every op zt has. One header per op family under core/ops/.
#pragma once

#include "core/autograd.h"
#include "core/ops/activation.h"
#include "core/ops/attention.h"
#include "core/ops/conv.h"
#include "core/ops/elementwise.h"
#include "core/ops/factory.h"
#include "core/ops/index.h"
#include "core/ops/linalg.h"
#include "core/ops/loss.h"
#include "core/ops/norm.h"
#include "core/ops/optim.h"
#include "core/ops/reduce.h"
#include "core/ops/shape.h"
#include "core/parallel.h"
#include "core/tensor.h"
