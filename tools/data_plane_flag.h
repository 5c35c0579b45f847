#pragma once
// --data-plane: where calls travel in real mode (net/grpc_transport.h).
#include <cstdio>
#include <string>

#include "net/grpc_transport.h"
#include "sim/scenario_loader.h"  // kDataPlaneNames, known_data_plane
#include "tools/cli.h"

namespace twinps::cli {

inline constexpr char kDataPlaneHelp[] =
    "where calls travel: tcp (Pull and Push on the data plane, framed TCP on each task's own event loop, or a Unix "
    "socket between tasks on one host with the tensors in shared memory; the rest over gRPC), tcp-unix (the same, "
    "the tensors on the Unix socket too), tcp-only (the same, but TCP between tasks on one host too), grpc (everything over gRPC, for comparison), or tcp-all (every call on the data plane, gRPC only "
    "locating it: an experiment)";

// The notifier of every command's --data-plane: one of the planes above.
inline std::function<void(const std::string&)> one_of_data_planes() {
  return one_of({"tcp", "tcp-unix", "tcp-only", "grpc", "tcp-all"});
}

// Sets the transport's plane; false (after printing why) if `value` names none.
inline bool apply_data_plane(const char* command, const std::string& value, net::GrpcTransportOptions* out) {
  if (value == "tcp" || value == "tcp-unix" || value == "tcp-only" || value == "tcp-all") {
    out->data_plane = net::DataPlaneMode::kTcp;
    out->data_plane_for_every_request = value == "tcp-all";
    out->data_same_host_socket = value != "tcp-only";
    if (value == "tcp-unix") out->data_same_host_ring_bytes = 0;
    return true;
  }
  if (value == "grpc") {
    out->data_plane = net::DataPlaneMode::kGrpc;
    out->data_plane_for_every_request = false;
    return true;
  }
  std::fprintf(stderr, "twinps %s: --data-plane must be %s, not '%s'\n", command, sim::kDataPlaneNames, value.c_str());
  return false;
}

}  // namespace twinps::cli
