#pragma once
// Everything a node needs from the world, passed in: never reached through
// globals, so one process can hold many simulated clusters and core never asks
// whether it is simulated.
#include "core/cluster/task_id.h"
#include "core/messages/messages.h"
#include "core/runtime/cost_model.h"
#include "core/runtime/executor.h"
#include "core/runtime/random.h"
#include "core/runtime/trace.h"
#include "core/runtime/transport.h"

namespace twinps {

struct Runtime {
  TaskId self;
  Incarnation incarnation = 0;  // distinct for every start of this task
  Executor& executor;
  Transport& transport;
  TraceSink& trace;
  RandomStream random;  // this node's stream; fork it per purpose
  CostModel* cost = nullptr;  // modelled compute time (simulator); nullptr: real time passes by itself
};

}  // namespace twinps
