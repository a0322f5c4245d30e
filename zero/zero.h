// Umbrella header for the ZeRO-3 engine and its communicators.
#pragma once

#include "zero/comm/communicator.h"
#include "zero/comm/launch.h"
#include "zero/comm/thread_comm.h"
#include "zero/config.h"
#include "zero/engine.h"
#include "zero/gathered.h"
#include "zero/load.h"
#include "zero/memory_report.h"
#include "zero/offload.h"
#include "zero/param.h"
#include "zero/partition.h"
#include "zero/replicas.h"
#include "zero/scope.h"
#include "zero/sync_batchnorm.h"
