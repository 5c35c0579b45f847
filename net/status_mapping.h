#pragma once
// absl::StatusCode <-> grpc::StatusCode, 1:1 over all 17 codes (their numeric
// values coincide, but the mapping is a table so that it is explicit and
// tested, not a cast that silently accepts garbage).
#include <optional>

#include <grpcpp/support/status.h>

#include "core/runtime/status.h"

namespace twinps::net {

inline constexpr int kStatusCodeCount = 17;

grpc::StatusCode to_grpc_code(absl::StatusCode code);    // an unknown value -> UNKNOWN
absl::StatusCode from_grpc_code(grpc::StatusCode code);  // an unknown value -> kUnknown

// A code received as an integer (from the wire): nullopt if it names no code.
std::optional<absl::StatusCode> status_code_from_int(int code);

// Code and message only; payloads do not travel in a gRPC status (the
// transport carries handler errors, payloads included, in its own envelope).
grpc::Status to_grpc_status(const absl::Status& status);
absl::Status from_grpc_status(const grpc::Status& status);

}  // namespace twinps::net
