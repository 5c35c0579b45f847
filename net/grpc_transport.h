#pragma once
// Transport (core/runtime/transport.h) over gRPC, for one task, with Pull and
// Push on the TCP data plane (net/data_plane.h) unless options say otherwise:
// gRPC carries the control plane (Health, SetupWorker, RunClosure,
// CreateShards, ExportShards, Fence, CreateResource) and tells callers where
// a task's data plane listens (LocateDataPlane), so a cluster still
// configures one address per task. A peer that serves no data plane gets its
// Pull and Push over gRPC. Both planes keep the contract below.
//
// One unary RPC, twinps.wire.Twinps/Call, carries every request. Messages are
// RpcRequest / RpcResponse protobufs whose tensor bytes go out of band
// (net/frame.h): sending copies no tensor in user space, receiving copies each
// tensor once. Encoding runs on the sender's executor; decoding runs on gRPC's
// threads, so a node's executor only sees finished C++ structs.
//
// Contract, as InMemoryNetwork keeps it:
//   * `done` runs exactly once on the caller's executor, never inside call();
//   * errors of the transport itself — peer unreachable or down, deadline,
//     cancellation, a message too large or malformed — carry the callee as
//     failed task; an error the callee's handler returned arrives unchanged
//     with its code, message and every payload (it travels inside the reply,
//     not as the gRPC status);
//   * CallOptions::deadline (on the caller's clock) becomes the gRPC
//     deadline; the callee sees it on its own clock in IncomingCall::deadline;
//   * cancelling CallOptions::cancel completes the call with CANCELLED at once
//     and cancels the RPC; the callee's IncomingCall::cancelled fires (also
//     when the caller's deadline passes or its connection drops);
//   * calls fail fast: a peer that is down gives UNAVAILABLE at once rather
//     than waiting for it to come back, and a peer restarted on the same
//     address is reachable again within about max_reconnect_backoff;
//   * calls in flight to a task that stops serving fail with UNAVAILABLE, and
//     so does a call the peer or the connection cancelled (a gRPC CANCELLED
//     the caller did not ask for); a task with no address is INVALID_ARGUMENT;
//     a message over max_message_bytes is RESOURCE_EXHAUSTED (refused by the
//     sender before sending, or by the receiver, which keeps serving); a
//     malformed request is INVALID_ARGUMENT naming the bad field.
//
// Threading: handlers run on this task's executor. call() and serve() are
// called on the executor's thread (or while it is not running). Destroy the
// transport on the executor's thread or while the executor is not running;
// destroying it stops serving and drops this task's own calls in flight (their
// `done` is destroyed unrun, as InMemoryNetwork does for a task that goes down).
// The executor must outlive the transport.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "core/runtime/transport.h"
#include "net/asio_executor.h"
#include "net/convert.h"
#include "net/security.h"

namespace twinps::net {

// The gRPC method every twinps call uses.
inline constexpr char kCallMethod[] = "/twinps.wire.Twinps/Call";
// Where a task's data plane listens (DataPlaneQuery -> DataPlaneInfo).
inline constexpr char kLocateDataPlaneMethod[] = "/twinps.wire.Twinps/LocateDataPlane";

enum class DataPlaneMode {
  kGrpc,  // every call over gRPC
  kTcp,   // Pull and Push over the data plane (net/data_plane.h)
};

struct GrpcTransportOptions {
  // "host:port" to serve on; port 0 picks a free port (see GrpcTransport::port()).
  // Empty: this task only calls out.
  std::string listen_address;
  // "host:port" of a peer, or "" if the task is unknown.
  std::function<std::string(const TaskId&)> resolve;
  // Largest message sent or accepted, either direction. The default holds a
  // 64 MB tensor with two optimizer slots (ExportShards of an Adam shard).
  std::size_t max_message_bytes = std::size_t{256} << 20;
  // Reconnection to a peer that went down: first retry after `initial`,
  // growing to at most `max` (gRPC's defaults are 1 s and 120 s).
  Duration initial_reconnect_backoff = 100 * kMillisecond;
  Duration max_reconnect_backoff = 500 * kMillisecond;
  // TCP connections (gRPC channels) to each peer; calls take them in turn.
  // (Measured on loopback: more than one gained nothing, even with several
  // large transfers in flight.)
  int channels_per_peer = 1;
  // Tensors of at least this many bytes travel out of band (zero-copy send).
  std::size_t attachment_threshold = AttachmentWriter::kDefaultThreshold;
  // Extra integer gRPC arguments (grpc/impl/codegen/grpc_types.h), applied to
  // the server and to every channel, after the transport's own: for tuning.
  std::map<std::string, int> grpc_int_args;

  // Where Pull and Push travel. With kTcp a serving task also listens for
  // the data plane, on the host of listen_address (a wildcard host: every
  // interface) and data_listen_port.
  DataPlaneMode data_plane = DataPlaneMode::kTcp;
  // The data plane's port; 0 lets the OS pick one (callers learn it over
  // gRPC either way). A fixed port suits firewalls and Kubernetes
  // NetworkPolicies, which allow named ports only.
  int data_listen_port = 0;
  // Data-plane connections to each peer; calls take them in turn.
  int data_connections_per_peer = 1;
  // SO_SNDBUF/SO_RCVBUF of data-plane sockets; 0 keeps the kernel's autotuning.
  int data_socket_buffer_bytes = 0;
  // Tasks on one host reach each other's data plane over a Unix socket
  // (DataPlaneOptions::same_host_socket); false: TCP between every pair.
  bool data_same_host_socket = true;
  // Over that socket, tensors through shared memory rings of this many
  // bytes (DataPlaneOptions::same_host_ring_bytes); 0: through the socket.
  std::size_t data_same_host_ring_bytes = std::size_t{64} << 20;
  // Every request over the data plane, not only Pull and Push: for tests
  // (the whole contract suite on the data plane) and experiments.
  bool data_plane_for_every_request = false;

  // The cluster token and TLS, on both planes (net/security.h). A call
  // without the token is refused with UNAUTHENTICATED before anything in it
  // is decoded.
  SecurityOptions security;
};

struct GrpcTransportStats {
  std::uint64_t grpc_calls = 0;        // Call RPCs started
  std::uint64_t data_plane_calls = 0;  // calls started on the data plane
  std::uint64_t data_plane_fallbacks = 0;  // data-plane calls sent over gRPC instead
  std::uint64_t discoveries = 0;       // LocateDataPlane RPCs
  std::uint64_t data_connections_opened = 0;
  std::uint64_t data_connections_accepted = 0;
  std::uint64_t data_same_host_connections_opened = 0;    // of those, over the Unix socket
  std::uint64_t data_same_host_connections_accepted = 0;
  std::uint64_t data_ring_frames_sent = 0;  // frames whose tensors went through shared memory
  std::uint64_t data_ring_bytes_sent = 0;
  std::uint64_t data_frames_rejected = 0;
  std::uint64_t unauthenticated_refused = 0;  // gRPC calls and data-plane connections without the token
  std::uint64_t data_bytes_received = 0;      // on data-plane connections (both roles)
  std::uint64_t data_bytes_sent = 0;
};

// A resolver over a fixed map.
std::function<std::string(const TaskId&)> address_map(std::map<TaskId, std::string> addresses);

class GrpcTransport final : public Transport {
 public:
  // Starts serving if options.listen_address is set; fails if it cannot bind.
  static StatusOr<std::unique_ptr<GrpcTransport>> create(const TaskId& self, AsioExecutor& executor,
                                                         GrpcTransportOptions options);
  ~GrpcTransport() override;
  GrpcTransport(const GrpcTransport&) = delete;
  GrpcTransport& operator=(const GrpcTransport&) = delete;

  void call(const TaskId& to, Request request, CallOptions options, ResponseCallback done) override;
  void serve(CallHandler handler) override;
  // Requests on the data plane arrive piece by piece; gRPC's arrive whole.
  void observe_arrivals(ArrivalHook hook) override;

  const TaskId& self() const;
  int port() const;  // the bound port, 0 if not serving
  int data_port() const;  // the data plane's port, 0 if none

  // Stops serving: calls in flight to this task fail with UNAVAILABLE at
  // their callers, later ones cannot connect. Idempotent; the destructor does it.
  void stop_serving();

  // Calls started and not yet completed (for tests and stats; executor thread).
  std::size_t calls_in_flight() const;
  GrpcTransportStats stats() const;  // executor thread

  struct Impl;

 private:
  explicit GrpcTransport(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace twinps::net
