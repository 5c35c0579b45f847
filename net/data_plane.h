#pragma once
// The data plane: Pull and Push (the parameter servers' traffic) over framed
// TCP connections (net/data_frame.h) that live on the task's own AsioExecutor;
// between two tasks of one host, over a Unix socket instead (same frames,
// same handshake; DataPlaneOptions::same_host_socket), the tensors through
// shared memory (net/shared_ring.h).
// Reads complete on the executor's thread, handlers run there inline, replies
// are written from there: no thread hand-off anywhere on the path, unlike
// gRPC, whose completions arrive on its own threads. Tensors are written
// straight from their memory (scatter-gather) and read straight into the
// destination Matrix storage (the one copy TCP makes).
//
// GrpcTransport owns one and routes calls to it; gRPC stays the control
// plane, and tells callers where a task's data plane listens (DiscoverFn), so
// a cluster configures one address per task. This class keeps the Transport
// contract (core/runtime/transport.h) for the calls it carries:
//   * `done` runs exactly once, on the executor, never inside call();
//   * deadlines give DEADLINE_EXCEEDED, cancellation CANCELLED at once; both
//     send a cancel frame, which fires the callee's IncomingCall::cancelled
//     (as does the caller's connection dropping);
//   * a peer that cannot be reached (refused, or not connected within 10 s),
//     or whose connection drops, gives UNAVAILABLE for the calls it had; the
//     next call asks gRPC again where the peer listens (a restarted peer has
//     a new port). A peer that answers it has no data plane gets its calls
//     over gRPC from then on;
//   * errors of the transport carry the callee as failed task; a handler's
//     own error arrives unchanged with its payloads;
//   * a request or reply over max_message_bytes is RESOURCE_EXHAUSTED, a
//     malformed one INVALID_ARGUMENT naming the field; the callee answers,
//     skips the frame and keeps the connection. A byte stream that is not
//     this protocol ends that connection only.
//   * every connection opens with a handshake in which the caller proves it
//     holds the cluster token and the callee proves it back (net/security.h);
//     a caller without it gets UNAUTHENTICATED and is served nothing. With
//     TLS the connection runs over OpenSSL (Asio's ssl::stream), the callee's
//     certificate checked against the CA and the host dialled.
// Calls on one connection are served in order; with several connections per
// peer they may overtake each other (as gRPC calls may).
//
// Threading: everything on the executor's thread, or while it is not running.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/runtime/transport.h"
#include "net/asio_executor.h"
#include "net/security.h"

namespace twinps::net {

struct DataEndpoint {
  std::string host;  // as in the peer's configured address (an IP literal or a name)
  int port = 0;      // 0: the peer serves no data plane
  // The peer's Unix socket for callers on its host (an abstract-namespace
  // name that carries its kernel's boot id); empty: none.
  std::string same_host_socket = {};
};

// Finds where `to` serves its data plane; `done` runs on the executor, never
// inside the call. An error (peer down, unknown) fails the calls waiting on it.
using DiscoverFn =
    std::function<void(const TaskId& to, Time deadline, UniqueFunction<void(StatusOr<DataEndpoint>)> done)>;
// Carries a call the data plane will not (the peer has none): gRPC.
using FallbackFn = std::function<void(const TaskId& to, Request request, CallOptions options, ResponseCallback done)>;

struct DataPlaneOptions {
  std::size_t max_message_bytes = std::size_t{256} << 20;
  std::size_t attachment_threshold = 2048;  // tensors of at least this many bytes go out of band
  int connections_per_peer = 1;
  int socket_buffer_bytes = 0;  // SO_SNDBUF and SO_RCVBUF; 0 leaves the kernel's autotuning
  // Serve, and use, a Unix socket between tasks of one host (one kernel and
  // network namespace) besides TCP: the same frames and handshake, without
  // the TCP stack. Not with TLS (the connection stays TLS over TCP). A caller
  // that cannot reach it (another namespace) uses TCP.
  bool same_host_socket = true;
  // Over that Unix socket, each end's tensors of at least 64 KiB go through
  // a shared-memory ring of this many bytes (net/shared_ring.h) instead of
  // the socket, while it has room; 0: none. A ring's pages are backed as
  // they are first used: at most this much per connection and direction.
  std::size_t same_host_ring_bytes = std::size_t{64} << 20;
  // Per incoming connection, the bytes of requests received or being
  // received and not yet answered (0: max_message_bytes). A request that
  // would pass it waits — the connection stops reading and TCP pushes back
  // on the sender — until answers free room; one request is always admitted.
  // With the per-message cap (max_message_bytes), a read buffer that grows
  // only as bytes arrive and tensor memory reserved unzeroed (its pages are
  // touched as bytes land in them), what a header claims costs nothing: a
  // task's memory follows what its peers actually send.
  std::size_t max_connection_inbound_bytes = 0;
  // The cluster token every connection's handshake proves (both ways), and
  // TLS (net/security.h). A peer without the token gets UNAUTHENTICATED.
  SecurityOptions security;
  DiscoverFn discover;
  FallbackFn fallback;
};

struct DataPlaneStats {
  std::uint64_t calls = 0;                  // started through the data plane
  std::uint64_t fallbacks = 0;              // handed to gRPC: the peer serves no data plane
  std::uint64_t discoveries = 0;            // asked where a peer listens
  std::uint64_t connections_opened = 0;     // as caller
  std::uint64_t connections_accepted = 0;   // as callee
  std::uint64_t same_host_connections_opened = 0;    // of those opened, over the Unix socket
  std::uint64_t same_host_connections_accepted = 0;  // of those accepted, over the Unix socket
  std::uint64_t rings_mapped = 0;           // peers' shared rings this task reads (both roles)
  std::uint64_t ring_frames_sent = 0;       // frames whose tensors went through this task's rings
  std::uint64_t ring_bytes_sent = 0;        // their tensors' bytes
  std::uint64_t ring_full = 0;              // frames sent over the socket for want of room in the ring
  std::uint64_t requests_served = 0;        // reached the handler
  std::uint64_t frames_rejected = 0;        // answered with a transport error, or ended a connection
  std::uint64_t requests_held = 0;          // waited under max_connection_inbound_bytes
  std::uint64_t handshakes_refused = 0;     // callers without the cluster token
  std::uint64_t bytes_received = 0;         // on every connection, both roles
  std::uint64_t bytes_sent = 0;
};

class DataPlane {
 public:
  DataPlane(const TaskId& self, AsioExecutor& executor, DataPlaneOptions options);
  // Stops serving and drops this task's calls in flight (their `done` is
  // destroyed unrun), as GrpcTransport does.
  ~DataPlane();
  DataPlane(const DataPlane&) = delete;
  DataPlane& operator=(const DataPlane&) = delete;

  // Listens on `host` (an IP literal or a name) at `port` (0: the OS picks).
  // A wildcard host ("0.0.0.0", "::" or "") listens on every interface, IPv6
  // and IPv4 where the host has both.
  Status listen(const std::string& host, int port = 0);
  int port() const;  // 0 when not listening
  // The Unix socket's name callers on this host use (DataEndpoint); empty: none.
  const std::string& same_host_socket() const;
  void set_handler(std::shared_ptr<const CallHandler> handler);
  // Shown each request's tensor bytes as they land (Transport::observe_arrivals).
  void set_arrival_hook(std::shared_ptr<const ArrivalHook> hook);
  // Closes the listener and every incoming connection: their callers' calls
  // fail with UNAVAILABLE; handlers still holding a Responder answer no one.
  void stop_serving();

  void call(const TaskId& to, Request request, CallOptions options, ResponseCallback done);

  std::size_t calls_in_flight() const;
  const DataPlaneStats& stats() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

// "host:port" -> {host, port}; the host without IPv6 brackets. False if malformed.
bool split_host_port(const std::string& address, std::string* host, int* port);
// True for the hosts that mean "every interface": "", "0.0.0.0", "::".
bool is_wildcard_host(const std::string& host);
// This kernel's boot id (/proc/sys/kernel/random/boot_id); empty if unreadable.
const std::string& this_boot_id();
// The same-host socket name a data plane listening on `port` in this
// process takes; empty without a boot id.
std::string same_host_socket_name(int port);
// Whether a peer's same-host socket name was made on this host (same boot id).
bool on_this_host(const std::string& socket_name);

}  // namespace twinps::net
