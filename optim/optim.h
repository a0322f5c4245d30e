// Umbrella header: optimizers, LR schedules and gradient clipping.
#pragma once

#include "optim/adam.h"
#include "optim/clip.h"
#include "optim/factory.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "optim/sgd.h"
