#include "core/coordinator/failure_classifier.h"

namespace twinps {

const char* closure_failure_name(ClosureFailure f) {
  switch (f) {
    case ClosureFailure::kWorkerFailure: return "worker failure";
    case ClosureFailure::kParameterServerFailure: return "ps failure";
    case ClosureFailure::kTransientTimeout: return "timeout";
    case ClosureFailure::kDerivedCancellation: return "derived cancellation";
    case ClosureFailure::kCancelled: return "cancelled";
    case ClosureFailure::kApplicationError: return "application error";
  }
  return "?";
}

Classification classify_closure_failure(const Status& status, const FailureFacts& facts) {
  const auto task = failed_task(status);
  const auto kind = error_kind(status);
  const auto code = status.code();

  if (facts.worker_lost) return {ClosureFailure::kWorkerFailure, facts.worker};
  if (facts.generation_cancelled && (code == StatusCode::kCancelled || kind == ErrorKind::kFenced))
    return {ClosureFailure::kCancelled, std::nullopt};
  if (kind == ErrorKind::kStaleIncarnation) return {ClosureFailure::kWorkerFailure, facts.worker};

  if (task && *task == facts.worker) {
    // The call to the worker itself failed: it is down, restarting, or gone silent.
    switch (code) {
      case StatusCode::kUnavailable:
      case StatusCode::kAborted:
      case StatusCode::kDeadlineExceeded:
      case StatusCode::kCancelled:
        return {ClosureFailure::kWorkerFailure, facts.worker};
      default:
        break;
    }
  }
  if (task && task->job == Job::kPs && kind != ErrorKind::kFenced &&
      (code == StatusCode::kUnavailable || code == StatusCode::kAborted)) {
    return {ClosureFailure::kParameterServerFailure, task};
  }
  if (code == StatusCode::kDeadlineExceeded) return {ClosureFailure::kTransientTimeout, task};
  if (code == StatusCode::kCancelled && task) return {ClosureFailure::kDerivedCancellation, task};
  return {ClosureFailure::kApplicationError, task};
}

}  // namespace twinps
