#pragma once
// What the coordinator queues: closures (a registered step function plus its
// arguments) and per-worker resource closures (building a dataset or iterator
// on one worker).
#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "core/coordinator/remote_value.h"
#include "core/messages/messages.h"

namespace twinps {

// A schedule() argument: a plain value, the same on every worker, or a
// PerWorkerValues replaced by the executing worker's element. A RemoteValue is
// not an Arg, so passing one (refused at run time by TensorFlow, C2) does not compile.
using Arg = std::variant<Value, PerWorkerValues>;

struct Closure {
  ClosureId id = 0;
  std::string fn;
  std::vector<Arg> args;
  RemoteValue output;
  // The cancellation generation current when the closure was created (C4): a
  // cancellation reaches closures created before it, never after.
  std::uint64_t generation = 0;
  int attempts = 0;  // dispatches so far; > 1 means it was retried
};

struct ResourceClosure {
  int worker = 0;
  CreateResourceRequest request;
  RemoteValue output;  // READY with ResourceRef{request.id} once built on the worker
};

}  // namespace twinps
