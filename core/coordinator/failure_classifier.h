#pragma once
// How the coordinator reacts to a closure that did not succeed (spec C16–C19),
// decided from typed facts — the status code, the task the error is
// attributed to, its error kind, and what the coordinator itself did (cancel a
// generation, give up on a worker that missed heartbeats) — never from
// message text as TensorFlow does.
#include <optional>

#include "core/cluster/task_id.h"
#include "core/runtime/status.h"

namespace twinps {

enum class ClosureFailure {
  kWorkerFailure,         // the worker died, restarted or stopped answering: put back, recover it
  kParameterServerFailure,  // a ps was unreachable or aborted: transient up to a threshold (C17)
  kTransientTimeout,      // a deadline passed inside the closure: transient up to a threshold (C18)
  kDerivedCancellation,   // cancelled as a side effect of another failure: put back, never reported
  kCancelled,             // its generation was cancelled by the coordinator (E2): keeps its own error
  kApplicationError,      // anything else: the first one is raised to the user (C22)
};

const char* closure_failure_name(ClosureFailure f);

struct FailureFacts {
  TaskId worker;                      // where the closure ran
  bool worker_lost = false;           // the coordinator gave up on the worker (heartbeats, closure timeout)
  bool generation_cancelled = false;  // the closure's generation was cancelled before it ended
};

struct Classification {
  ClosureFailure kind;
  std::optional<TaskId> task;  // the failed worker or ps, where there is one
};

Classification classify_closure_failure(const Status& status, const FailureFacts& facts);

}  // namespace twinps
