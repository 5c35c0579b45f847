#include "net/status_mapping.h"

#include <set>

#include <gtest/gtest.h>

namespace twinps::net {
namespace {

// Every code of each side, listed by hand (not derived from the table under test).
const absl::StatusCode kAbslCodes[] = {
    absl::StatusCode::kOk,           absl::StatusCode::kCancelled,         absl::StatusCode::kUnknown,
    absl::StatusCode::kInvalidArgument, absl::StatusCode::kDeadlineExceeded, absl::StatusCode::kNotFound,
    absl::StatusCode::kAlreadyExists, absl::StatusCode::kPermissionDenied, absl::StatusCode::kResourceExhausted,
    absl::StatusCode::kFailedPrecondition, absl::StatusCode::kAborted,      absl::StatusCode::kOutOfRange,
    absl::StatusCode::kUnimplemented, absl::StatusCode::kInternal,          absl::StatusCode::kUnavailable,
    absl::StatusCode::kDataLoss,     absl::StatusCode::kUnauthenticated,
};
const grpc::StatusCode kGrpcCodes[] = {
    grpc::StatusCode::OK,           grpc::StatusCode::CANCELLED,         grpc::StatusCode::UNKNOWN,
    grpc::StatusCode::INVALID_ARGUMENT, grpc::StatusCode::DEADLINE_EXCEEDED, grpc::StatusCode::NOT_FOUND,
    grpc::StatusCode::ALREADY_EXISTS, grpc::StatusCode::PERMISSION_DENIED, grpc::StatusCode::RESOURCE_EXHAUSTED,
    grpc::StatusCode::FAILED_PRECONDITION, grpc::StatusCode::ABORTED,     grpc::StatusCode::OUT_OF_RANGE,
    grpc::StatusCode::UNIMPLEMENTED, grpc::StatusCode::INTERNAL,          grpc::StatusCode::UNAVAILABLE,
    grpc::StatusCode::DATA_LOSS,    grpc::StatusCode::UNAUTHENTICATED,
};
static_assert(std::size(kAbslCodes) == kStatusCodeCount);
static_assert(std::size(kGrpcCodes) == kStatusCodeCount);

TEST(StatusMappingTest, EveryCodeMapsToItsNamesakeAndBack) {
  for (int i = 0; i < kStatusCodeCount; ++i) {
    SCOPED_TRACE(absl::StatusCodeToString(kAbslCodes[i]));
    EXPECT_EQ(to_grpc_code(kAbslCodes[i]), kGrpcCodes[i]);
    EXPECT_EQ(from_grpc_code(kGrpcCodes[i]), kAbslCodes[i]);
    EXPECT_EQ(from_grpc_code(to_grpc_code(kAbslCodes[i])), kAbslCodes[i]);
    // Same numbers on both sides (both follow google.rpc.Code).
    EXPECT_EQ(static_cast<int>(kAbslCodes[i]), static_cast<int>(kGrpcCodes[i]));
    EXPECT_EQ(status_code_from_int(static_cast<int>(kAbslCodes[i])), kAbslCodes[i]);
  }
}

TEST(StatusMappingTest, TheMappingIsABijection) {
  std::set<int> grpc_seen, absl_seen;
  for (auto c : kAbslCodes) grpc_seen.insert(static_cast<int>(to_grpc_code(c)));
  for (auto c : kGrpcCodes) absl_seen.insert(static_cast<int>(from_grpc_code(c)));
  EXPECT_EQ(grpc_seen.size(), static_cast<std::size_t>(kStatusCodeCount));
  EXPECT_EQ(absl_seen.size(), static_cast<std::size_t>(kStatusCodeCount));
}

TEST(StatusMappingTest, UnknownValuesBecomeUnknown) {
  EXPECT_EQ(to_grpc_code(static_cast<absl::StatusCode>(17)), grpc::StatusCode::UNKNOWN);
  EXPECT_EQ(to_grpc_code(static_cast<absl::StatusCode>(-1)), grpc::StatusCode::UNKNOWN);
  EXPECT_EQ(from_grpc_code(static_cast<grpc::StatusCode>(42)), absl::StatusCode::kUnknown);
  EXPECT_EQ(status_code_from_int(17), std::nullopt);
  EXPECT_EQ(status_code_from_int(-3), std::nullopt);
}

TEST(StatusMappingTest, StatusesKeepCodeAndMessage) {
  for (int i = 0; i < kStatusCodeCount; ++i) {
    if (kAbslCodes[i] == absl::StatusCode::kOk) continue;
    absl::Status s(kAbslCodes[i], "boom " + std::to_string(i));
    grpc::Status g = to_grpc_status(s);
    EXPECT_EQ(g.error_code(), kGrpcCodes[i]);
    EXPECT_EQ(g.error_message(), "boom " + std::to_string(i));
    EXPECT_EQ(from_grpc_status(g), s);
  }
  EXPECT_TRUE(to_grpc_status(absl::OkStatus()).ok());
  EXPECT_TRUE(from_grpc_status(grpc::Status::OK).ok());
}

}  // namespace
}  // namespace twinps::net
