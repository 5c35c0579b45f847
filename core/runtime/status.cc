#include "core/runtime/status.h"

#include "absl/strings/cord.h"

namespace twinps {

Status with_failed_task(Status status, const TaskId& task) {
  if (status.ok() || status.GetPayload(kFailedTaskPayload).has_value()) return status;
  status.SetPayload(kFailedTaskPayload, absl::Cord(task.short_name()));
  return status;
}

std::optional<TaskId> failed_task(const Status& status) {
  auto payload = status.GetPayload(kFailedTaskPayload);
  if (!payload) return std::nullopt;
  std::string s(*payload);
  auto colon = s.find(':');
  if (colon == std::string::npos) return std::nullopt;
  auto job = parse_job(std::string_view(s).substr(0, colon));
  if (!job) return std::nullopt;
  return TaskId{*job, std::stoi(s.substr(colon + 1))};
}

Status with_error_kind(Status status, ErrorKind kind) {
  if (status.ok() || kind == ErrorKind::kNone) return status;
  status.SetPayload(kErrorKindPayload, absl::Cord(std::to_string(static_cast<int>(kind))));
  return status;
}

ErrorKind error_kind(const Status& status) {
  auto payload = status.GetPayload(kErrorKindPayload);
  if (!payload) return ErrorKind::kNone;
  return static_cast<ErrorKind>(std::stoi(std::string(*payload)));
}

std::string describe(const Status& status) {
  std::string out = absl::StatusCodeToString(status.code());
  if (!status.message().empty()) out += ": " + std::string(status.message());
  if (auto t = failed_task(status)) out += " [failed task " + t->short_name() + "]";
  return out;
}

}  // namespace twinps
