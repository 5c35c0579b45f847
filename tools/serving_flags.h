#pragma once
// Flags the tasks of a real cluster share. Where a task listens: on every
// interface at its TF_CONFIG port unless --bind names one address (in a pod
// the TF_CONFIG host is a Service name whose address the pod does not own,
// so binding to it would fail). And who may talk to it.
#include <string>
#include <vector>

#include "core/runtime/status.h"
#include "net/grpc_transport.h"
#include "net/security.h"
#include "tools/cli.h"

namespace twinps::cli {

struct ServingFlags {
  std::string bind;   // --bind: "" = every interface
  int data_port = 0;  // --data-port: 0 = the OS picks
  int port = -1;      // --port: -1 = the TF_CONFIG port; 0 = the OS picks (the readiness line reports it)

  void add_to(po::options_description& options);
  // The "host:port" to listen on for a task whose TF_CONFIG address is
  // `configured`: its port (or --port), on --bind (or every interface).
  // INVALID_ARGUMENT naming the flag when --bind or --data-port is malformed.
  StatusOr<std::string> listen_address(const std::string& configured) const;
  // Applies --data-port to the transport; checked by listen_address().
  void apply(net::GrpcTransportOptions* transport) const { transport->data_listen_port = data_port; }
};

// Who may talk to the task (net/security.h): the cluster token and TLS. Each
// flag falls back to an environment variable, so a Kubernetes pod gets them
// from a Secret either way.
struct SecurityFlags {
  std::string token_file;  // --token-file, TWINPS_TOKEN_FILE (or the token itself in TWINPS_TOKEN)
  std::string tls_cert, tls_key, tls_ca;  // --tls-cert/-key/-ca, TWINPS_TLS_CERT/_KEY/_CA
  bool tls_mutual = false;                // --tls-mutual, TWINPS_TLS_MUTUAL=1
  std::string data_plane_tls = "on";      // --data-plane-tls on|off

  void add_to(po::options_description& options);
  // The token and TLS material the flags and environment name, read and
  // checked; INVALID_ARGUMENT naming the flag or file otherwise.
  StatusOr<net::SecurityOptions> security() const;
  // The flags as given, to start another task with the same.
  std::vector<std::string> to_args() const;
};

}  // namespace twinps::cli
