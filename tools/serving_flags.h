#pragma once
// Flags every serving task shares (serve, train): where it listens. A task
// listens on every interface at its TF_CONFIG port unless --bind names one
// address: in a pod the TF_CONFIG host is a Service name whose address the
// pod does not own, so binding to it would fail.
#include <string>

#include "core/runtime/status.h"
#include "net/grpc_transport.h"
#include "tools/cli.h"

namespace twinps::cli {

struct ServingFlags {
  std::string bind;   // --bind: "" = every interface
  int data_port = 0;  // --data-port: 0 = the OS picks

  void add_to(po::options_description& options);
  // The "host:port" to listen on for a task whose TF_CONFIG address is
  // `configured`: its port, on --bind (or every interface).
  // INVALID_ARGUMENT naming the flag when --bind or --data-port is malformed.
  StatusOr<std::string> listen_address(const std::string& configured) const;
  // Applies --data-port to the transport; checked by listen_address().
  void apply(net::GrpcTransportOptions* transport) const { transport->data_listen_port = data_port; }
};

}  // namespace twinps::cli
