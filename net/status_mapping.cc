#include "net/status_mapping.h"

#include <array>
#include <string>
#include <utility>

namespace twinps::net {
namespace {

constexpr std::array<std::pair<absl::StatusCode, grpc::StatusCode>, kStatusCodeCount> kTable = {{
    {absl::StatusCode::kOk, grpc::StatusCode::OK},
    {absl::StatusCode::kCancelled, grpc::StatusCode::CANCELLED},
    {absl::StatusCode::kUnknown, grpc::StatusCode::UNKNOWN},
    {absl::StatusCode::kInvalidArgument, grpc::StatusCode::INVALID_ARGUMENT},
    {absl::StatusCode::kDeadlineExceeded, grpc::StatusCode::DEADLINE_EXCEEDED},
    {absl::StatusCode::kNotFound, grpc::StatusCode::NOT_FOUND},
    {absl::StatusCode::kAlreadyExists, grpc::StatusCode::ALREADY_EXISTS},
    {absl::StatusCode::kPermissionDenied, grpc::StatusCode::PERMISSION_DENIED},
    {absl::StatusCode::kResourceExhausted, grpc::StatusCode::RESOURCE_EXHAUSTED},
    {absl::StatusCode::kFailedPrecondition, grpc::StatusCode::FAILED_PRECONDITION},
    {absl::StatusCode::kAborted, grpc::StatusCode::ABORTED},
    {absl::StatusCode::kOutOfRange, grpc::StatusCode::OUT_OF_RANGE},
    {absl::StatusCode::kUnimplemented, grpc::StatusCode::UNIMPLEMENTED},
    {absl::StatusCode::kInternal, grpc::StatusCode::INTERNAL},
    {absl::StatusCode::kUnavailable, grpc::StatusCode::UNAVAILABLE},
    {absl::StatusCode::kDataLoss, grpc::StatusCode::DATA_LOSS},
    {absl::StatusCode::kUnauthenticated, grpc::StatusCode::UNAUTHENTICATED},
}};

}  // namespace

grpc::StatusCode to_grpc_code(absl::StatusCode code) {
  for (const auto& [a, g] : kTable)
    if (a == code) return g;
  return grpc::StatusCode::UNKNOWN;
}

absl::StatusCode from_grpc_code(grpc::StatusCode code) {
  for (const auto& [a, g] : kTable)
    if (g == code) return a;
  return absl::StatusCode::kUnknown;
}

std::optional<absl::StatusCode> status_code_from_int(int code) {
  for (const auto& [a, g] : kTable)
    if (static_cast<int>(a) == code) return a;
  return std::nullopt;
}

grpc::Status to_grpc_status(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(to_grpc_code(status.code()), std::string(status.message()));
}

absl::Status from_grpc_status(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(from_grpc_code(status.error_code()), status.error_message());
}

}  // namespace twinps::net
