#pragma once
// --data-plane: where Pull and Push travel in real mode (net/grpc_transport.h).
#include <cstdio>
#include <string>

#include "net/grpc_transport.h"

namespace twinps::cli {

inline constexpr char kDataPlaneHelp[] =
    "where Pull and Push travel: tcp (the data plane: framed TCP on each task's own event loop) or grpc "
    "(everything over gRPC, for comparison)";

// False (after printing why) if `value` names no plane.
inline bool parse_data_plane(const char* command, const std::string& value, net::DataPlaneMode* out) {
  if (value == "tcp") {
    *out = net::DataPlaneMode::kTcp;
    return true;
  }
  if (value == "grpc") {
    *out = net::DataPlaneMode::kGrpc;
    return true;
  }
  std::fprintf(stderr, "twinps %s: --data-plane must be tcp or grpc, not '%s'\n", command, value.c_str());
  return false;
}

}  // namespace twinps::cli
