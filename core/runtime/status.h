#pragma once
// Errors are absl::Status values whose codes are gRPC's. Failure handling is
// typed, not textual: an error that came from a peer carries that peer's
// TaskId as a payload, set by the transport that failed to reach it or by the
// node that relayed it. The coordinator classifies closures' errors by code
// and failed task (worker failure, parameter-server failure, user error), never
// by matching message text.
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/cluster/task_id.h"

namespace twinps {

using absl::Status;
using absl::StatusCode;
using absl::StatusOr;

inline constexpr char kFailedTaskPayload[] = "type.twinps/failed_task";
inline constexpr char kErrorKindPayload[] = "type.twinps/error_kind";

// Marks `status` as caused by `task` (the peer that failed), unless it is
// already attributed to some task: the first attribution is the root cause.
Status with_failed_task(Status status, const TaskId& task);
std::optional<TaskId> failed_task(const Status& status);

// Kinds that change how an error is handled, beyond its code.
enum class ErrorKind {
  kNone,
  kClosureInput,     // a closure's per-worker input resource failed (spec E11)
  kFenced,           // a parameter server refused an update from a cancelled generation
  kStaleIncarnation  // a request addressed a previous incarnation of a task
};
Status with_error_kind(Status status, ErrorKind kind);
ErrorKind error_kind(const Status& status);

// "UNAVAILABLE: ps:1 is down [failed task ps:1]" — for logs and user messages.
std::string describe(const Status& status);

// Propagates an error out of a coroutine or function returning Status/StatusOr.
#define TWINPS_RETURN_IF_ERROR(expr)          \
  do {                                        \
    ::absl::Status twinps_status_ = (expr);   \
    if (!twinps_status_.ok()) return twinps_status_; \
  } while (0)
#define TWINPS_CO_RETURN_IF_ERROR(expr)       \
  do {                                        \
    ::absl::Status twinps_status_ = (expr);   \
    if (!twinps_status_.ok()) co_return twinps_status_; \
  } while (0)

}  // namespace twinps
