#include "net/data_plane.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>

#include "net/convert.h"
#include "net/data_frame.h"
#include "net/proto/twinps.pb.h"
#include "net/security.h"
#include "net/shared_ring.h"

namespace twinps::net {

bool split_host_port(const std::string& address, std::string* host, int* port) {
  std::string h, p;
  if (!address.empty() && address.front() == '[') {
    const auto close = address.find(']');
    if (close == std::string::npos || close + 1 >= address.size() || address[close + 1] != ':') return false;
    h = address.substr(1, close - 1);
    p = address.substr(close + 2);
  } else {
    const auto colon = address.rfind(':');
    if (colon == std::string::npos) return false;
    h = address.substr(0, colon);
    p = address.substr(colon + 1);
  }
  if (h.empty() || p.empty() || p.size() > 5 || !std::all_of(p.begin(), p.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  const int v = std::stoi(p);
  if (v > 65535) return false;
  *host = h;
  *port = v;
  return true;
}

bool is_wildcard_host(const std::string& host) { return host.empty() || host == "0.0.0.0" || host == "::"; }

const std::string& this_boot_id() {
  static const std::string id = [] {
    std::ifstream f("/proc/sys/kernel/random/boot_id");
    std::string line;
    std::getline(f, line);
    return line;
  }();
  return id;
}

namespace {
constexpr char kLocalNamePrefix[] = "twinps-data-";
}  // namespace

std::string same_host_socket_name(int port) {
  if (this_boot_id().empty()) return "";
  return kLocalNamePrefix + this_boot_id() + "-" + std::to_string(::getpid()) + "-" + std::to_string(port);
}

bool on_this_host(const std::string& socket_name) {
  const std::string prefix = kLocalNamePrefix + this_boot_id() + "-";
  return !this_boot_id().empty() && socket_name.size() > prefix.size() && socket_name.compare(0, prefix.size(), prefix) == 0;
}

// Not an anonymous namespace: DataPlane::State, which has linkage, holds these types.
namespace dp {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using local = asio::local::stream_protocol;
// A connection's socket: TCP, or a Unix socket to a task on this host.
using Socket = asio::generic::stream_protocol::socket;
namespace df = dataframe;

// The abstract-namespace address of a same-host socket name (no file to
// clean up: it goes with the process, and is seen only in its network namespace).
local::endpoint abstract_endpoint(const std::string& name) { return local::endpoint(std::string(1, '\0') + name); }

constexpr std::size_t kReadBufferBytes = 64 << 10;
// Attachment bytes still on the socket are read straight into the tensors
// when at least this many remain; a smaller rest goes through the read buffer
// (one more small copy, but it shares a read with whatever follows).
constexpr std::uint64_t kDirectReadMin = 16 << 10;
// A read shown to an ArrivalObserver brings at most this much: a quarter of
// a typical core's L2, so the observer reads it from cache.
constexpr std::size_t kObservedReadBytes = 256 << 10;
constexpr std::uint32_t kMaxHelloBytes = 1024;
// A frame's tensors go through the shared ring from this many bytes: below,
// the socket's copies cost about what the ring's do.
constexpr std::size_t kRingMinBytes = 64 << 10;
constexpr Duration kDiscoveryTimeout = 10 * kSecond;
// A connection still not open and authenticated after this fails its calls (a
// black-holed peer would otherwise hold them until their deadlines, and every
// later call too); an incoming one is closed (it holds a socket and, with
// TLS, a session).
constexpr Duration kConnectTimeout = 10 * kSecond;

std::string call_name(const char* name, const TaskId& to) { return std::string(name) + " to " + to.short_name(); }

// Where one out-of-band tensor's bytes go.
struct Target {
  std::uint64_t offset;
  std::size_t len;
  char* dst;
};

// Decoding against this reader records where each tensor's bytes belong
// instead of copying them: they are still on the socket. convert.cc writes a
// tensor's bytes into its final storage (the Matrix is moved afterwards,
// never copied), so the recorded addresses stay valid.
class TargetRecorder final : public AttachmentReader {
 public:
  explicit TargetRecorder(std::uint64_t size) : size_(size) {}
  std::uint64_t size() const override { return size_; }
  void copy(std::uint64_t offset, std::size_t len, void* dst) const override {
    if (len) targets_.push_back(Target{offset, len, static_cast<char*>(dst)});
  }
  std::vector<Target>& targets() const { return targets_; }

 private:
  std::uint64_t size_;
  mutable std::vector<Target> targets_;
};

// One frame to write: header + envelope in `head`, then the attachment spans,
// whose memory `owner` keeps alive until the write completes.
struct OutFrame {
  std::string head;
  std::vector<AttachmentWriter::Span> spans;
  std::shared_ptr<const void> owner;
};

OutFrame make_frame(df::Kind kind, std::uint8_t flags, std::uint64_t call_id,
                    const google::protobuf::MessageLite* envelope, std::size_t envelope_bytes,
                    const AttachmentWriter* attachments, std::shared_ptr<const void> owner) {
  OutFrame f;
  f.head.resize(df::kHeaderBytes + envelope_bytes);
  auto* p = reinterpret_cast<std::uint8_t*>(f.head.data());
  df::Header h;
  h.kind = kind;
  h.flags = flags;
  h.call_id = call_id;
  h.envelope_bytes = static_cast<std::uint32_t>(envelope_bytes);
  h.attachment_bytes = attachments ? attachments->total() : 0;
  df::encode_header(h, p);
  if (envelope) envelope->SerializeWithCachedSizesToArray(p + df::kHeaderBytes);
  if (attachments) f.spans = attachments->spans();
  f.owner = std::move(owner);
  return f;
}

class Connection;

// ================================================================== calls

struct OutCall {
  TaskId to;
  const char* name = "";
  std::optional<Request> request;  // until encoded
  CallOptions options;
  ResponseCallback done;
  CancelRegistration cancel_registration;
  AsioExecutor::Work work;
  std::multimap<Time, std::shared_ptr<OutCall>>::iterator deadline_entry;
  bool has_deadline_entry = false;
  std::weak_ptr<Connection> conn;  // once sent
  std::uint64_t wire_id = 0;
  bool waiting = false;  // for discovery
  bool finished = false;
};

struct InCall {
  std::weak_ptr<Connection> conn;
  std::uint64_t wire_id = 0;
  std::uint64_t bytes = 0;  // of the request, counted against max_connection_inbound_bytes
  std::optional<CancellationSource> cancel;
  AsioExecutor::Work work;
  bool finished = false;
};

}  // namespace dp

using dp::Connection;
using dp::InCall;
using dp::OutCall;
using dp::Target;
using dp::TargetRecorder;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using dp::local;
using dp::Socket;
namespace df = dataframe;

// ================================================================== state

struct DataPlane::State : std::enable_shared_from_this<State> {
  struct Peer {
    enum class Phase { kUnknown, kDiscovering, kReady, kNoDataPlane };
    Phase phase = Phase::kUnknown;
    DataEndpoint endpoint;
    std::vector<std::shared_ptr<Connection>> conns;
    std::size_t next = 0;
    std::vector<std::shared_ptr<OutCall>> waiting;
    std::uint64_t generation = 0;  // of the discovery in progress
  };

  State(const TaskId& s, AsioExecutor& e, DataPlaneOptions o)
      : self(s), executor(e), options(std::move(o)), resolver(e.context()) {
    if (options.security.tls && options.security.data_plane_tls) configure_tls();
  }

  TaskId self;
  AsioExecutor& executor;
  DataPlaneOptions options;
  DataPlaneStats stats;
  // With TLS: one context for both ends (server and client certificate alike).
  std::unique_ptr<asio::ssl::context> tls;
  Status configuration;  // why the data plane cannot work (bad TLS material), or OK
  void configure_tls();

  // callee
  std::optional<tcp::acceptor> acceptor;
  int port = 0;
  // Tasks on this host connect here instead (DataPlaneOptions::same_host_socket).
  std::optional<local::acceptor> local_acceptor;
  std::string local_name;
  std::shared_ptr<const CallHandler> handler;
  std::shared_ptr<const ArrivalHook> arrival_hook;
  std::set<std::shared_ptr<Connection>> accepted;

  // caller
  tcp::resolver resolver;
  std::map<TaskId, Peer> peers;
  std::size_t in_flight = 0;
  std::multimap<Time, std::shared_ptr<OutCall>> deadlines;
  TimerId deadline_timer = kNoTimer;
  Time deadline_timer_at = kTimeNever;

  // ---- caller side
  void call(const TaskId& to, Request request, CallOptions options, ResponseCallback done);
  void start_discovery(const TaskId& to, Peer& peer);
  void on_discovered(const TaskId& to, std::uint64_t generation, StatusOr<DataEndpoint> found);
  void dispatch(Peer& peer, const std::shared_ptr<OutCall>& c);
  void hand_to_grpc(const std::shared_ptr<OutCall>& c);
  void finish(const std::shared_ptr<OutCall>& c, StatusOr<Response> result, bool post);
  void cancel_call(const std::shared_ptr<OutCall>& c, Status why);
  void add_deadline(const std::shared_ptr<OutCall>& c);
  void remove_deadline(OutCall& c);
  void arm_deadline_timer();
  void on_deadline_timer();
  void on_caller_connection_closed(Connection* conn);
  void drop(OutCall& c);

  // ---- callee side
  // Accepts connections on `which` (the TCP acceptor or the same-host one), one after another.
  template <typename Protocol>
  void accept_next(std::optional<asio::basic_socket_acceptor<Protocol>> State::*which);
  void listen_same_host();
  void on_accepted(Socket socket);
  void serve_request(const std::shared_ptr<Connection>& conn, std::uint64_t wire_id, std::uint64_t bytes,
                     IncomingCall call);
  void stop_serving();

  ~State();
};

namespace dp {

// ================================================================== connection

// One TCP connection, either end. Callee: sends the challenge, reads the
// hello, answers it, then reads requests and cancels and sends responses.
// Caller: reads the challenge, sends the hello, waits for the answer, then
// sends requests and cancels (queued meanwhile) and reads responses. Lives
// as long as a pending asynchronous operation or the state holds it; `state_`
// is valid while the connection is open.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  enum class Role { kCaller, kCallee };
  enum class CloseMode { kFail, kDrop };  // peer trouble / our own shutdown

  Connection(DataPlane::State* state, Role role, Socket socket, TaskId peer)
      : state_(state), role_(role), socket_(std::move(socket)), peer_(peer),
        rbuf_(std::make_unique_for_overwrite<char[]>(kReadBufferBytes)), rcap_(kReadBufferBytes) {
    if (state_->tls) tls_ = std::make_unique<asio::ssl::stream<Socket&>>(socket_, *state_->tls);
  }

  bool closed() const { return closed_; }
  Role role() const { return role_; }
  const TaskId& peer() const { return peer_; }
  const DataEndpoint& endpoint() const { return endpoint_; }

  // ---- caller
  void connect(const DataEndpoint& ep);
  std::uint64_t add_call(const std::shared_ptr<OutCall>& c) {
    const std::uint64_t id = next_wire_id_++;
    calls_.emplace(id, c);
    return id;
  }
  void forget_call(std::uint64_t wire_id) { calls_.erase(wire_id); }
  void send_cancel(std::uint64_t wire_id) {
    send(make_frame(df::Kind::kCancel, 0, wire_id, nullptr, 0, nullptr, nullptr));
  }

  // ---- callee
  void start_callee();
  void forget_live(std::uint64_t wire_id) { live_.erase(wire_id); }
  // An answered (or cancelled) request of `bytes` frees its share of max_connection_inbound_bytes.
  void release_inbound(std::uint64_t bytes);
  void add_live(std::uint64_t wire_id, const std::shared_ptr<InCall>& call) { live_.emplace(wire_id, call); }
  void reply(std::uint64_t wire_id, StatusOr<Response> result);
  void reply_transport_error(std::uint64_t wire_id, const Status& error);

  // A caller's frames wait for the handshake; a callee only sends once it is done.
  void send(OutFrame f) {
    if (closed_) return;
    if (!ready_) {
      pending_.push_back(std::move(f));
      return;
    }
    if (send_ring_on_) put_in_ring(f);
    queue_.push_back(std::move(f));
    if (!batching_) flush();
  }

  void close(const Status& why, CloseMode mode);

 private:
  enum class Phase { kHeader, kEnvelope, kAttachments, kDiscard, kHeld };

  void flush() {
    if (closed_ || !connected_ || writing_ || queue_.empty()) return;
    start_write();
  }
  void start_write();
  void on_written(const boost::system::error_code& ec);
  // The handshake's own frames go out at once.
  void send_handshake(OutFrame f) {
    queue_.push_back(std::move(f));
    if (!batching_) flush();
  }
  void start_timer(const char* what);
  void on_transport_ready();
  void refuse(const Status& why);

  // Reads and writes go through TLS when the data plane has it.
  template <typename Buffers, typename Handler>
  void async_read_some(const Buffers& buffers, Handler&& handler) {
    if (tls_) return tls_->async_read_some(buffers, std::forward<Handler>(handler));
    socket_.async_read_some(buffers, std::forward<Handler>(handler));
  }
  template <typename Buffers, typename Handler>
  void async_read_all(const Buffers& buffers, Handler&& handler) {
    if (tls_) return asio::async_read(*tls_, buffers, std::forward<Handler>(handler));
    asio::async_read(socket_, buffers, std::forward<Handler>(handler));
  }
  template <typename Buffers, typename Handler>
  void async_write_all(const Buffers& buffers, Handler&& handler) {
    if (tls_) return asio::async_write(*tls_, buffers, std::forward<Handler>(handler));
    asio::async_write(socket_, buffers, std::forward<Handler>(handler));
  }

  void read_more();
  void on_read(const boost::system::error_code& ec, std::size_t n);
  void process();
  bool begin_frame();   // after a header; false: the connection closed
  void on_envelope(const char* p, std::size_t n);
  void on_hello(const char* p, std::size_t n);
  void on_challenge(const char* p, std::size_t n);
  void on_hello_ack(const char* p, std::size_t n);
  void on_request(const char* p, std::size_t n);
  void on_response(const char* p, std::size_t n);
  void on_cancel(std::uint64_t wire_id);
  void expect_attachments(TargetRecorder& recorder);
  void fill(const char* src, std::size_t n);
  void read_direct();
  void read_observed();
  void finish_inbound();
  // Skips the rest of the frame: `bytes` of it, attachments included.
  void discard(std::uint64_t bytes) {
    if (frame_.flags & df::kInRing) {
      // The attachments are in the peer's ring, not on the socket.
      bytes -= std::min(bytes, frame_.attachment_bytes);
      peer_ring_->release();
    }
    phase_ = Phase::kDiscard;
    left_ = bytes;
  }
  // Shared memory over a Unix socket (net/shared_ring.h).
  void offer_ring(wire::SharedRingOffer* offer);
  bool map_peer_ring(const wire::SharedRingOffer& offer);
  void put_in_ring(OutFrame& f);
  bool locate_ring_region();
  void make_room(std::size_t need);
  void shrink_buffer();
  bool admit_request(std::uint64_t bytes);
  void protocol_error(const std::string& what);
  void io_error(const char* op, const boost::system::error_code& ec);
  void set_socket_options();
  bool use_rings() const { return same_host_ && !tls_ && state_->options.same_host_ring_bytes > 0; }
  // Caller: the peer's Unix socket when it is on this host, else (or when that fails) TCP.
  void connect_same_host(const DataEndpoint& ep);
  void connect_tcp(const DataEndpoint& ep);
  void on_connected(const boost::system::error_code& ec);
  void cancel_connect_timer() {
    if (connect_timer_ != kNoTimer) state_->executor.cancel(connect_timer_);
    connect_timer_ = kNoTimer;
  }

  DataPlane::State* state_;
  Role role_;
  Socket socket_;
  std::unique_ptr<asio::ssl::stream<Socket&>> tls_;  // over socket_, when the data plane has TLS
  bool same_host_ = false;  // over a Unix socket (connect_same_host; a callee: accepted on one)
  std::unique_ptr<RingWriter> send_ring_;  // offered to the peer
  bool send_ring_on_ = false;              // the peer mapped it: tensors go through it
  std::unique_ptr<RingReader> peer_ring_;  // the peer's, mapped
  const char* ring_region_ = nullptr;      // the current frame's tensors in peer_ring_
  TaskId peer_;
  DataEndpoint endpoint_;
  bool connected_ = false;  // TCP (and TLS) up: handshake frames may be written
  bool ready_ = false;      // the handshake is done: calls may flow
  bool closed_ = false;
  TimerId connect_timer_ = kNoTimer;  // until ready_ (both roles)
  bool hello_seen_ = false;      // callee
  bool challenge_seen_ = false;  // caller
  bool hello_sent_ = false;      // caller
  bool refused_ = false;         // callee: the peer failed the handshake; closing once the refusal is written
  std::string nonce_;            // this end's handshake nonce
  std::string peer_nonce_;       // the callee's, as the caller saw it

  // writing
  std::deque<OutFrame> pending_;  // caller: frames waiting for the handshake
  std::deque<OutFrame> queue_;
  std::vector<OutFrame> writing_frames_;
  bool writing_ = false;
  bool batching_ = false;  // inside process(): replies are written together at its end

  // reading
  std::unique_ptr<char[]> rbuf_;
  std::size_t rcap_;
  std::size_t rbegin_ = 0, rend_ = 0;
  Phase phase_ = Phase::kHeader;
  df::Header frame_;
  std::uint64_t left_ = 0;  // attachment (or discarded) bytes of the frame still to read
  std::uint64_t inbound_bytes_ = 0;  // requests received or arriving, not yet answered
  std::uint64_t arriving_bytes_ = 0;  // of those, the request being read
  // the message being received
  struct Inbound {
    Request request;  // callee
    TaskId from;
    RequestId request_id = 0;
    Time deadline = kTimeNever;
    std::shared_ptr<OutCall> call;  // caller
    Response response;
    std::vector<Target> targets;
    std::size_t next_target = 0;
    std::size_t target_filled = 0;
    std::unique_ptr<char[]> scratch;  // when the tensors do not tile the attachments
    std::vector<Target> scattered;    // where scratch goes afterwards
    std::shared_ptr<ArrivalObserver> arrival;  // callee: shown the tensors' bytes as they land
  } in_;

  // caller: calls sent, by wire id; callee: calls being served
  std::uint64_t next_wire_id_ = 1;
  std::unordered_map<std::uint64_t, std::shared_ptr<OutCall>> calls_;
  std::unordered_map<std::uint64_t, std::shared_ptr<InCall>> live_;
};

// ---------------------------------------------------------------- connecting

void Connection::set_socket_options() {
  boost::system::error_code ig;
  if (!same_host_) socket_.set_option(tcp::no_delay(true), ig);
  if (state_->options.socket_buffer_bytes > 0) {
    socket_.set_option(asio::socket_base::send_buffer_size(state_->options.socket_buffer_bytes), ig);
    socket_.set_option(asio::socket_base::receive_buffer_size(state_->options.socket_buffer_bytes), ig);
  }
}

void Connection::start_timer(const char* what) {
  connect_timer_ = state_->executor.post_after(kConnectTimeout, [weak = weak_from_this(), what] {
    auto self = weak.lock();
    if (!self || self->closed_ || self->ready_) return;
    self->connect_timer_ = kNoTimer;
    self->io_error(what, asio::error::timed_out);
  });
}

void Connection::connect(const DataEndpoint& ep) {
  endpoint_ = ep;
  start_timer("connect to");
  // A Unix socket moves bytes between two processes of one kernel at about
  // twice loopback TCP's rate (no TCP stack, no checksums or segmentation).
  // With TLS configured the connection stays TLS over TCP, as configured.
  if (!tls_ && state_->options.same_host_socket && on_this_host(ep.same_host_socket)) return connect_same_host(ep);
  connect_tcp(ep);
}

void Connection::connect_same_host(const DataEndpoint& ep) {
  same_host_ = true;
  socket_.async_connect(abstract_endpoint(ep.same_host_socket),
                        [self = shared_from_this(), ep](const boost::system::error_code& ec) {
                          if (self->closed_) return;
                          if (!ec) {
                            ++self->state_->stats.same_host_connections_opened;
                            return self->on_connected(ec);
                          }
                          // Another network namespace, or the peer has just gone: TCP decides.
                          boost::system::error_code ig;
                          self->socket_.close(ig);
                          self->same_host_ = false;
                          self->connect_tcp(ep);
                        });
}

void Connection::connect_tcp(const DataEndpoint& ep) {
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(ep.host, ec);
  if (tls_) {
    // The callee's certificate must be signed by the cluster's CA and name
    // the host this task dialled (as gRPC checks its channels).
    tls_->set_verify_mode(asio::ssl::verify_peer);
    tls_->set_verify_callback(asio::ssl::host_name_verification(ep.host));
    if (ec) SSL_set_tlsext_host_name(tls_->native_handle(), ep.host.c_str());  // SNI, for names only
  }
  auto connected = [self = shared_from_this()](const boost::system::error_code& cec) { self->on_connected(cec); };
  if (!ec) {
    socket_.async_connect(tcp::endpoint(address, static_cast<unsigned short>(ep.port)), std::move(connected));
    return;
  }
  state_->resolver.async_resolve(
      ep.host, std::to_string(ep.port),
      [self = shared_from_this(), connected = std::move(connected)](const boost::system::error_code& rec,
                                                                   tcp::resolver::results_type results) mutable {
        if (self->closed_) return;
        if (rec) return self->io_error("resolve the address of", rec);
        std::vector<Socket::endpoint_type> candidates;
        for (const auto& entry : results) candidates.emplace_back(entry.endpoint());
        asio::async_connect(self->socket_, candidates,
                            [connected = std::move(connected)](const boost::system::error_code& cec,
                                                               const Socket::endpoint_type&) { connected(cec); });
      });
}

void Connection::on_connected(const boost::system::error_code& ec) {
  if (closed_) return;
  if (ec) return io_error("connect to", ec);
  set_socket_options();
  if (!tls_) return on_transport_ready();
  tls_->async_handshake(asio::ssl::stream_base::client, [self = shared_from_this()](const boost::system::error_code& hec) {
    if (self->closed_) return;
    if (hec) return self->io_error("complete the TLS handshake with", hec);
    self->on_transport_ready();
  });
}

void Connection::start_callee() {
  start_timer("complete the handshake with");
  boost::system::error_code ec;
  same_host_ = socket_.local_endpoint(ec).protocol().family() == AF_UNIX && !ec;
  set_socket_options();
  if (!tls_) return on_transport_ready();
  tls_->async_handshake(asio::ssl::stream_base::server, [self = shared_from_this()](const boost::system::error_code& ec) {
    if (self->closed_) return;
    if (ec) return self->io_error("complete the TLS handshake with", ec);
    self->on_transport_ready();
  });
}

// TCP (and TLS) is up. The callee opens the handshake with its challenge;
// the caller waits for it.
void Connection::on_transport_ready() {
  connected_ = true;
  if (role_ == Role::kCallee) {
    nonce_ = random_nonce();
    wire::DataPlaneChallenge challenge;
    challenge.set_nonce(nonce_);
    if (use_rings()) offer_ring(challenge.mutable_ring());
    send_handshake(make_frame(df::Kind::kChallenge, 0, 0, &challenge, challenge.ByteSizeLong(), nullptr, nullptr));
  }
  read_more();
}

// ---------------------------------------------------------------- writing

void Connection::start_write() {
  writing_ = true;
  writing_frames_.clear();
  while (!queue_.empty()) {
    writing_frames_.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  std::vector<asio::const_buffer> buffers;
  for (const auto& f : writing_frames_) {
    buffers.emplace_back(f.head.data(), f.head.size());
    for (const auto& s : f.spans) buffers.emplace_back(s.data, s.size);
  }
  async_write_all(buffers, [self = shared_from_this()](const boost::system::error_code& ec, std::size_t n) {
    if (!self->closed_) self->state_->stats.bytes_sent += n;
    self->on_written(ec);
  });
}

void Connection::on_written(const boost::system::error_code& ec) {
  writing_ = false;
  writing_frames_.clear();  // releases the messages' tensors
  if (closed_) return;
  if (ec) return io_error("write to", ec);
  if (refused_ && queue_.empty())
    return close(absl::UnauthenticatedError("refused in the handshake"), CloseMode::kFail);
  flush();
}

// ---------------------------------------------------------------- reading

void Connection::read_more() {
  if (closed_) return;
  if (rbegin_ == rend_) {
    rbegin_ = rend_ = 0;
  } else if (rcap_ - rend_ < (kReadBufferBytes >> 2)) {
    std::memmove(rbuf_.get(), rbuf_.get() + rbegin_, rend_ - rbegin_);
    rend_ -= rbegin_;
    rbegin_ = 0;
  }
  async_read_some(asio::buffer(rbuf_.get() + rend_, rcap_ - rend_),
                  [self = shared_from_this()](const boost::system::error_code& ec, std::size_t n) {
                    self->on_read(ec, n);
                  });
}

void Connection::on_read(const boost::system::error_code& ec, std::size_t n) {
  if (closed_) return;
  if (ec) return io_error("read from", ec);
  state_->stats.bytes_received += n;
  rend_ += n;
  process();
}

void Connection::make_room(std::size_t need) {
  if (rcap_ - rbegin_ < need) {
    std::memmove(rbuf_.get(), rbuf_.get() + rbegin_, rend_ - rbegin_);
    rend_ -= rbegin_;
    rbegin_ = 0;
  }
  // A header only claims a length: the buffer grows when the bytes that
  // arrived fill it, doubling up to `need`, so memory follows what the peer
  // actually sent (a 32-byte header claiming 250 MiB costs nothing).
  if (need <= rcap_ || rend_ < rcap_) return;
  const std::size_t cap = std::min(need, 2 * rcap_);
  auto bigger = std::make_unique_for_overwrite<char[]>(cap);
  std::memcpy(bigger.get(), rbuf_.get() + rbegin_, rend_ - rbegin_);
  rbuf_ = std::move(bigger);
  rcap_ = cap;
  rend_ -= rbegin_;
  rbegin_ = 0;
}

void Connection::shrink_buffer() {
  // Between frames, a buffer grown for one large envelope goes back to its
  // usual size: an idle connection holds kReadBufferBytes.
  const std::size_t avail = rend_ - rbegin_;
  if (rcap_ <= kReadBufferBytes || avail > kReadBufferBytes) return;
  auto smaller = std::make_unique_for_overwrite<char[]>(kReadBufferBytes);
  std::memcpy(smaller.get(), rbuf_.get() + rbegin_, avail);
  rbuf_ = std::move(smaller);
  rcap_ = kReadBufferBytes;
  rend_ = avail;
  rbegin_ = 0;
}

bool Connection::admit_request(std::uint64_t bytes) {
  const auto& o = state_->options;
  const std::uint64_t cap = o.max_connection_inbound_bytes ? o.max_connection_inbound_bytes : o.max_message_bytes;
  if (inbound_bytes_ > 0 && bytes > cap - std::min<std::uint64_t>(cap, inbound_bytes_)) return false;
  inbound_bytes_ += bytes;
  arriving_bytes_ = bytes;
  return true;
}

void Connection::release_inbound(std::uint64_t bytes) {
  inbound_bytes_ -= std::min(bytes, inbound_bytes_);
  if (phase_ != Phase::kHeld || closed_) return;
  if (!admit_request(std::uint64_t{frame_.envelope_bytes} + frame_.attachment_bytes)) return;
  phase_ = Phase::kEnvelope;
  // Not from inside a handler's reply: next on the executor.
  state_->executor.post([self = shared_from_this()] {
    if (!self->closed_) self->process();
  });
}

void Connection::process() {
  auto keep = shared_from_this();  // a handler or `done` may close this connection
  batching_ = true;
  for (;;) {
    if (closed_) return;
    if (refused_ || phase_ == Phase::kHeld) {
      // Refused: nothing more is read (the refusal goes out, then the
      // connection closes). Held: reading resumes when answers free room
      // (release_inbound).
      batching_ = false;
      flush();
      return;
    }
    if (phase_ == Phase::kHeader && rcap_ > kReadBufferBytes) shrink_buffer();
    const std::size_t avail = rend_ - rbegin_;
    const char* at = rbuf_.get() + rbegin_;
    if (phase_ == Phase::kHeader) {
      if (avail < df::kHeaderBytes) break;
      if (!df::decode_header(reinterpret_cast<const std::uint8_t*>(at), &frame_))
        return protocol_error("a frame header that is not twinps' data-plane protocol");
      rbegin_ += df::kHeaderBytes;
      if (!begin_frame()) return;
      continue;
    }
    if (phase_ == Phase::kEnvelope) {
      if (avail < frame_.envelope_bytes) {
        make_room(frame_.envelope_bytes);
        break;
      }
      rbegin_ += frame_.envelope_bytes;
      on_envelope(at, frame_.envelope_bytes);
      continue;
    }
    const std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(avail, left_));
    if (phase_ == Phase::kAttachments) fill(at, take);
    rbegin_ += take;
    left_ -= take;
    if (left_ == 0) {
      if (phase_ == Phase::kAttachments) finish_inbound();
      phase_ = Phase::kHeader;
      continue;
    }
    if (phase_ == Phase::kAttachments && left_ >= kDirectReadMin) {
      // The buffer is drained; the rest goes straight into the tensors.
      rbegin_ = rend_ = 0;
      batching_ = false;
      flush();
      return read_direct();
    }
    break;
  }
  batching_ = false;
  flush();
  read_more();
}

bool Connection::begin_frame() {
  if (!locate_ring_region()) return false;
  const std::uint64_t body = std::uint64_t{frame_.envelope_bytes} + frame_.attachment_bytes;
  const std::size_t max = state_->options.max_message_bytes;
  if (role_ == Role::kCallee) {
    if (!hello_seen_ && frame_.kind != df::Kind::kHello) {
      protocol_error("a frame before the hello");
      return false;
    }
    switch (frame_.kind) {
      case df::Kind::kHello:
        if (hello_seen_ || frame_.envelope_bytes > kMaxHelloBytes || frame_.attachment_bytes != 0) {
          protocol_error("a second or oversized hello");
          return false;
        }
        phase_ = Phase::kEnvelope;
        return true;
      case df::Kind::kCancel:
        if (body != 0) {
          protocol_error("a cancel frame with a body");
          return false;
        }
        on_cancel(frame_.call_id);
        phase_ = Phase::kHeader;
        return true;
      case df::Kind::kRequest:
        if (frame_.call_id == 0 || live_.count(frame_.call_id)) {
          protocol_error("a request whose call id is 0 or still in use");
          return false;
        }
        if (body > max) {
          reply_transport_error(frame_.call_id,
                                absl::ResourceExhaustedError(
                                    state_->self.short_name() + " refused a request of " + std::to_string(body) +
                                    " bytes: it exceeds the max message size of " + std::to_string(max) + " bytes"));
          discard(body);
          return true;
        }
        if (!admit_request(body)) {
          ++state_->stats.requests_held;
          phase_ = Phase::kHeld;
          return true;
        }
        phase_ = Phase::kEnvelope;
        return true;
      case df::Kind::kResponse:
      case df::Kind::kChallenge:
      case df::Kind::kHelloAck:
        break;
    }
    protocol_error("a response or handshake answer sent to the callee");
    return false;
  }
  // Caller: the callee's challenge, then its ack, then responses.
  const bool small_envelope = frame_.envelope_bytes <= kMaxHelloBytes && frame_.attachment_bytes == 0;
  if (frame_.kind == df::Kind::kChallenge) {
    if (challenge_seen_ || !small_envelope) {
      protocol_error("a second or oversized challenge");
      return false;
    }
    phase_ = Phase::kEnvelope;
    return true;
  }
  if (frame_.kind == df::Kind::kHelloAck) {
    if (!hello_sent_ || ready_ || !small_envelope) {
      protocol_error("an unexpected or oversized handshake answer");
      return false;
    }
    phase_ = Phase::kEnvelope;
    return true;
  }
  if (frame_.kind != df::Kind::kResponse || !ready_) {
    protocol_error(ready_ ? "a frame other than a response sent to the caller" : "a response before the handshake");
    return false;
  }
  auto it = calls_.find(frame_.call_id);
  if (it == calls_.end()) {  // completed already (cancelled, deadline): skip the reply
    discard(body);
    return true;
  }
  in_.call = std::move(it->second);
  calls_.erase(it);
  if (body > max) {
    auto call = std::move(in_.call);
    state_->finish(call,
                   with_failed_task(absl::ResourceExhaustedError(
                                        call_name(call->name, peer_) + ": the reply of " + std::to_string(body) +
                                        " bytes exceeds the max message size of " + std::to_string(max) + " bytes"),
                                    peer_),
                   /*post=*/false);
    discard(body);
    return true;
  }
  phase_ = Phase::kEnvelope;
  return true;
}

void Connection::on_envelope(const char* p, std::size_t n) {
  phase_ = Phase::kHeader;
  left_ = 0;
  if (frame_.kind == df::Kind::kHello) return on_hello(p, n);
  if (frame_.kind == df::Kind::kChallenge) return on_challenge(p, n);
  if (frame_.kind == df::Kind::kHelloAck) return on_hello_ack(p, n);
  if (role_ == Role::kCallee) return on_request(p, n);
  on_response(p, n);
}

// Callee: the caller says who it is and proves it holds the cluster token.
void Connection::on_hello(const char* p, std::size_t n) {
  wire::DataPlaneHello hello;
  TaskId from, to;
  if (!hello.ParseFromArray(p, static_cast<int>(n)) || !from_proto(hello.from(), &from).ok() ||
      !from_proto(hello.to(), &to).ok())
    return protocol_error("a malformed hello");
  if (to != state_->self)
    return protocol_error("a hello for " + to.short_name() + " (this is " + state_->self.short_name() + ")");
  hello_seen_ = true;
  peer_ = from;
  const std::string& token = state_->options.security.token;
  if (hello.nonce().size() != kNonceBytes ||
      !constant_time_equal(hello.proof(), hello_proof(token, nonce_, hello.nonce(), from, to)))
    return refuse(absl::UnauthenticatedError(state_->self.short_name() + " refused a data-plane connection from " +
                                             from.short_name() + ": it did not prove it holds the cluster token"));
  wire::DataPlaneHelloAck ack;
  ack.set_proof(ack_proof(token, nonce_, hello.nonce(), from, to));
  if (use_rings()) {
    send_ring_on_ = send_ring_ && hello.mapped_your_ring();
    if (hello.has_ring()) ack.set_mapped_your_ring(map_peer_ring(hello.ring()));
  }
  if (!send_ring_on_) send_ring_.reset();
  send_handshake(make_frame(df::Kind::kHelloAck, 0, 0, &ack, ack.ByteSizeLong(), nullptr, nullptr));
  ready_ = true;
  cancel_connect_timer();
}

// Callee: answers a failed handshake with the reason, then closes once it is written.
void Connection::refuse(const Status& why) {
  ++state_->stats.handshakes_refused;
  wire::DataPlaneHelloAck ack;
  to_proto(why, ack.mutable_error());
  send_handshake(make_frame(df::Kind::kHelloAck, 0, 0, &ack, ack.ByteSizeLong(), nullptr, nullptr));
  refused_ = true;  // nothing more is read
}

// Caller: the callee's nonce; answer with who this is and the proof.
void Connection::on_challenge(const char* p, std::size_t n) {
  wire::DataPlaneChallenge challenge;
  if (!challenge.ParseFromArray(p, static_cast<int>(n)) || challenge.nonce().size() != kNonceBytes)
    return protocol_error("a malformed challenge");
  challenge_seen_ = true;
  peer_nonce_ = challenge.nonce();
  nonce_ = random_nonce();
  wire::DataPlaneHello hello;
  to_proto(state_->self, hello.mutable_from());
  to_proto(peer_, hello.mutable_to());
  hello.set_nonce(nonce_);
  hello.set_proof(hello_proof(state_->options.security.token, peer_nonce_, nonce_, state_->self, peer_));
  if (use_rings()) {
    if (challenge.has_ring()) hello.set_mapped_your_ring(map_peer_ring(challenge.ring()));
    offer_ring(hello.mutable_ring());
  }
  send_handshake(make_frame(df::Kind::kHello, 0, 0, &hello, hello.ByteSizeLong(), nullptr, nullptr));
  hello_sent_ = true;
}

// Caller: the callee accepted (and proved it holds the token too) or refused.
void Connection::on_hello_ack(const char* p, std::size_t n) {
  wire::DataPlaneHelloAck ack;
  if (!ack.ParseFromArray(p, static_cast<int>(n))) return protocol_error("a malformed handshake answer");
  const std::string where = peer_.short_name() + " (" + endpoint_.host + ":" + std::to_string(endpoint_.port) + ")";
  if (ack.has_error()) {
    Status refused;
    if (!from_proto(ack.error(), &refused).ok() || refused.ok())
      return protocol_error("a malformed handshake answer");
    return close(Status(refused.code(), "the data plane of " + where + " refused this task: " +
                                            std::string(refused.message())),
                 CloseMode::kFail);
  }
  if (!constant_time_equal(ack.proof(), ack_proof(state_->options.security.token, peer_nonce_, nonce_, state_->self,
                                                  peer_)))
    return close(absl::UnauthenticatedError("the data plane of " + where +
                                            " did not prove it holds the cluster token"),
                 CloseMode::kFail);
  send_ring_on_ = send_ring_ && ack.mapped_your_ring();
  if (!send_ring_on_) send_ring_.reset();
  ready_ = true;
  cancel_connect_timer();
  while (!pending_.empty()) {
    if (send_ring_on_) put_in_ring(pending_.front());
    queue_.push_back(std::move(pending_.front()));
    pending_.pop_front();
  }
}

// The answer to a request that came here is encoded on this thread and its
// memory kept until written (Connection::reply), so the ps may answer a pull
// from its shards' memory instead of copying it into the answer.
namespace {
void let_answer_share_shard_memory(Request& request) {
  if (auto* pull = std::get_if<PullRequest>(&request)) pull->share_shard_memory = true;
  if (auto* push = std::get_if<PushRequest>(&request)) push->then_pull.share_shard_memory = true;
}
}  // namespace

void Connection::on_request(const char* p, std::size_t n) {
  wire::RpcRequest envelope;
  Status st;
  if (!envelope.ParseFromArray(p, static_cast<int>(n))) {
    st = absl::InvalidArgumentError("malformed message: the envelope does not parse");
  } else if (!envelope.attachment_data().empty()) {
    st = absl::InvalidArgumentError("RpcRequest.attachment_data: must be empty on the data plane");
  }
  TaskId from;
  if (st.ok()) {
    st = from_proto(envelope.from(), &from);
    if (!st.ok()) st = absl::InvalidArgumentError("RpcRequest.from." + std::string(st.message()));
  }
  TargetRecorder recorder(frame_.attachment_bytes);
  in_.request = Request();
  if (st.ok()) st = from_proto(envelope.request(), &in_.request, &recorder);
  if (st.ok()) let_answer_share_shard_memory(in_.request);
  if (!st.ok()) {
    reply_transport_error(frame_.call_id, absl::InvalidArgumentError(state_->self.short_name() +
                                                                     " rejected a request: " + std::string(st.message())));
    in_.request = Request();
    release_inbound(std::exchange(arriving_bytes_, 0));
    discard(frame_.attachment_bytes);
    return;
  }
  in_.from = from;
  in_.request_id = envelope.request_id();
  in_.arrival.reset();
  if (auto hook = state_->arrival_hook; hook && *hook) in_.arrival = (*hook)(from, in_.request_id, in_.request);
  in_.deadline = envelope.timeout_nanos() == 0
                     ? kTimeNever
                     : add_saturating(state_->executor.now(), static_cast<Duration>(std::min<std::uint64_t>(
                                                                   envelope.timeout_nanos(), kTimeNever / 2)));
  expect_attachments(recorder);
}

void Connection::on_response(const char* p, std::size_t n) {
  auto fail = [&](const std::string& why) {
    auto call = std::move(in_.call);
    state_->finish(call,
                   with_failed_task(absl::InvalidArgumentError(call_name(call->name, peer_) + ": malformed reply: " + why),
                                    peer_),
                   /*post=*/false);
    discard(frame_.attachment_bytes);
  };
  wire::RpcResponse envelope;
  if (!envelope.ParseFromArray(p, static_cast<int>(n))) return fail("the envelope does not parse");
  if ((frame_.flags & df::kTransportError) || (envelope.has_status() && envelope.status().code() != 0)) {
    Status error;
    Status st = from_proto(envelope.status(), &error);
    if (!st.ok()) return fail(std::string(st.message()));
    if (error.ok()) return fail("an error reply without an error");
    auto call = std::move(in_.call);
    if (frame_.flags & df::kTransportError) {
      // The callee's transport refused the call: attribute it to the callee.
      error = with_failed_task(Status(error.code(), call_name(call->name, peer_) + " failed: " +
                                                        std::string(error.message())),
                               peer_);
    }
    state_->finish(call, std::move(error), /*post=*/false);
    discard(frame_.attachment_bytes);
    return;
  }
  TargetRecorder recorder(frame_.attachment_bytes);
  in_.response = Response();
  Status st = from_proto(envelope.response(), &in_.response, &recorder);
  if (!st.ok()) {
    in_.response = Response();
    return fail(std::string(st.message()));
  }
  expect_attachments(recorder);
}

void Connection::expect_attachments(TargetRecorder& recorder) {
  in_.targets = std::move(recorder.targets());
  in_.next_target = 0;
  in_.target_filled = 0;
  in_.scattered.clear();
  in_.scratch.reset();
  const std::uint64_t total = frame_.attachment_bytes;
  // Our senders lay the tensors out back to back; anything else (gaps,
  // overlaps, bytes no tensor uses) is read into a buffer and copied out.
  std::uint64_t end = 0;
  bool tiles = true;
  for (const auto& t : in_.targets) {
    if (t.offset != end) tiles = false;
    end = t.offset + t.len;
  }
  if (end != total) tiles = false;
  if (!tiles) {
    in_.scattered = std::move(in_.targets);
    // Uninitialised: its pages are touched (and counted) only as bytes arrive.
    in_.scratch = std::make_unique_for_overwrite<char[]>(static_cast<std::size_t>(total));
    in_.targets.assign(1, Target{0, static_cast<std::size_t>(total), in_.scratch.get()});
    if (total == 0) in_.targets.clear();
  }
  if (total == 0) return finish_inbound();
  if (ring_region_) {  // in the peer's ring, all there: copied out now
    fill(ring_region_, static_cast<std::size_t>(total));
    peer_ring_->release();
    return finish_inbound();
  }
  phase_ = Phase::kAttachments;
  left_ = total;
}

void Connection::fill(const char* src, std::size_t n) {
  while (n > 0) {
    Target& t = in_.targets[in_.next_target];
    // An observer is shown at most kObservedReadBytes at a time, still in cache.
    const std::size_t k = std::min({n, t.len - in_.target_filled, in_.arrival ? kObservedReadBytes : n});
    std::memcpy(t.dst + in_.target_filled, src, k);
    if (in_.arrival && in_.scattered.empty()) in_.arrival->arrived(t.dst + in_.target_filled, k);
    src += k;
    n -= k;
    in_.target_filled += k;
    if (in_.target_filled == t.len) {
      ++in_.next_target;
      in_.target_filled = 0;
    }
  }
}

void Connection::read_direct() {
  if (in_.arrival && in_.scattered.empty()) return read_observed();
  std::vector<asio::mutable_buffer> buffers;
  buffers.reserve(in_.targets.size() - in_.next_target);
  for (std::size_t i = in_.next_target; i < in_.targets.size(); ++i) {
    const std::size_t skip = i == in_.next_target ? in_.target_filled : 0;
    buffers.emplace_back(in_.targets[i].dst + skip, in_.targets[i].len - skip);
  }
  async_read_all(buffers,
                 [self = shared_from_this()](const boost::system::error_code& ec, std::size_t n) {
                     if (self->closed_) return;
                     self->state_->stats.bytes_received += n;
                     if (ec) return self->io_error("read from", ec);
                     self->left_ = 0;
                     self->phase_ = Phase::kHeader;
                     self->batching_ = true;
                     self->finish_inbound();
                     self->process();
                   });
}

// read_direct with an observer: one read at a time into the current tensor,
// each shown to the observer as it lands, so the callee works on the front
// of a tensor while its back is still on the wire. A read takes at most
// kObservedReadBytes, so what it brought is still in the core's cache when
// the observer reads it.
void Connection::read_observed() {
  const Target& t = in_.targets[in_.next_target];
  char* at = t.dst + in_.target_filled;
  const std::size_t want = std::min(t.len - in_.target_filled, kObservedReadBytes);
  async_read_some(asio::buffer(at, want), [self = shared_from_this(), at](const boost::system::error_code& ec,
                                                                         std::size_t n) {
    if (self->closed_) return;
    self->state_->stats.bytes_received += n;
    if (ec) return self->io_error("read from", ec);
    auto& in = self->in_;
    in.arrival->arrived(at, n);
    in.target_filled += n;
    if (in.target_filled == in.targets[in.next_target].len) {
      ++in.next_target;
      in.target_filled = 0;
    }
    self->left_ -= n;
    if (self->left_ > 0) return self->read_observed();
    self->phase_ = Phase::kHeader;
    self->batching_ = true;
    self->finish_inbound();
    self->process();
  });
}

void Connection::finish_inbound() {
  for (const auto& t : in_.scattered) {
    std::memcpy(t.dst, in_.scratch.get() + t.offset, t.len);
    if (in_.arrival) in_.arrival->arrived(t.dst, t.len);
  }
  in_.scattered.clear();
  in_.scratch.reset();
  in_.targets.clear();
  if (role_ == Role::kCallee) {
    Request request = std::move(in_.request);
    in_.request = Request();
    state_->serve_request(shared_from_this(), frame_.call_id, std::exchange(arriving_bytes_, 0),
                          IncomingCall{in_.from, std::move(request), in_.request_id, in_.deadline, {},
                                       std::move(in_.arrival)});
    return;
  }
  auto call = std::move(in_.call);
  Response response = std::move(in_.response);
  in_.response = Response();
  if (call && !call->finished) state_->finish(call, std::move(response), /*post=*/false);
}

void Connection::on_cancel(std::uint64_t wire_id) {
  auto it = live_.find(wire_id);
  if (it == live_.end()) return;  // answered already
  auto call = std::move(it->second);
  live_.erase(it);
  call->finished = true;
  call->work.reset();
  release_inbound(call->bytes);
  if (call->cancel) {
    CancellationSource source = std::move(*call->cancel);
    call->cancel.reset();
    source.cancel();
  }
}

// ---------------------------------------------------------------- shared rings

// In the handshake over a Unix socket: this end's ring for the peer to map.
// Without one (no memfd, no memory) the socket carries everything.
void Connection::offer_ring(wire::SharedRingOffer* offer) {
  auto ring = RingWriter::create(state_->options.same_host_ring_bytes);
  if (!ring.ok()) return;
  send_ring_ = std::move(*ring);
  offer->set_fd(static_cast<std::uint32_t>(send_ring_->fd()));
  offer->set_capacity(send_ring_->capacity());
}

// The peer's ring, by the pid the kernel gives for the socket's other end.
// False (the peer then keeps to the socket) if it cannot be mapped.
bool Connection::map_peer_ring(const wire::SharedRingOffer& offer) {
  auto ring = RingReader::open(unix_socket_peer_pid(socket_.native_handle()), static_cast<int>(offer.fd()),
                               offer.capacity());
  if (!ring.ok()) return false;
  peer_ring_ = std::move(*ring);
  ++state_->stats.rings_mapped;
  return true;
}

// A frame's tensors into this end's ring when it has room for them (the
// frame then carries only where they are); else they stay on the socket.
void Connection::put_in_ring(OutFrame& f) {
  std::size_t bytes = 0;
  for (const auto& span : f.spans) bytes += span.size;
  if (bytes < kRingMinBytes) return;
  const auto offset = send_ring_->reserve(bytes);
  if (!offset) {
    ++state_->stats.ring_full;
    return;
  }
  char* at = send_ring_->at(*offset);
  for (const auto& span : f.spans) {
    std::memcpy(at, span.data, span.size);
    at += span.size;
  }
  auto* head = reinterpret_cast<std::uint8_t*>(f.head.data());
  df::Header h;
  df::decode_header(head, &h);
  h.flags |= df::kInRing;
  h.ring_offset = *offset;
  df::encode_header(h, head);
  f.spans.clear();
  f.owner.reset();  // the tensors are copied: their memory is free
  ++state_->stats.ring_frames_sent;
  state_->stats.ring_bytes_sent += bytes;
}

// After a header: where a kInRing frame's tensors are in the peer's ring.
// False (the connection closed) when they cannot be there.
bool Connection::locate_ring_region() {
  ring_region_ = nullptr;
  if (!(frame_.flags & df::kInRing)) return true;
  const bool carries = frame_.kind == df::Kind::kRequest || frame_.kind == df::Kind::kResponse;
  if (peer_ring_ && carries) ring_region_ = peer_ring_->next(frame_.ring_offset, frame_.attachment_bytes);
  if (ring_region_) return true;
  protocol_error("a frame whose tensors are not in the shared ring where they can be");
  return false;
}

// ---------------------------------------------------------------- replies

void Connection::reply(std::uint64_t wire_id, StatusOr<Response> result) {
  if (closed_) return;
  const auto& options = state_->options;
  if (result.ok())
    if (Status sendable = check_sendable(*result); !sendable.ok()) result = std::move(sendable);
  auto owner = std::make_shared<StatusOr<Response>>(std::move(result));
  wire::RpcResponse envelope;
  AttachmentWriter attachments(options.attachment_threshold);
  if (owner->ok()) {
    to_proto(**owner, envelope.mutable_response(), &attachments);
  } else {
    to_proto(owner->status(), envelope.mutable_status());
  }
  std::size_t bytes = envelope.ByteSizeLong();
  if (bytes + attachments.total() > options.max_message_bytes || bytes > UINT32_MAX) {
    const std::uint64_t total = bytes + attachments.total();
    envelope.Clear();
    attachments = AttachmentWriter(options.attachment_threshold);
    owner.reset();
    to_proto(with_failed_task(absl::ResourceExhaustedError(state_->self.short_name() + "'s reply of " +
                                                           std::to_string(total) +
                                                           " bytes exceeds the max message size of " +
                                                           std::to_string(options.max_message_bytes) + " bytes"),
                              state_->self),
             envelope.mutable_status());
    bytes = envelope.ByteSizeLong();
  }
  send(make_frame(df::Kind::kResponse, 0, wire_id, &envelope, bytes, &attachments, std::move(owner)));
}

void Connection::reply_transport_error(std::uint64_t wire_id, const Status& error) {
  ++state_->stats.frames_rejected;
  wire::RpcResponse envelope;
  envelope.mutable_status()->set_code(static_cast<int>(error.code()));
  envelope.mutable_status()->set_message(std::string(error.message()));
  const std::size_t bytes = envelope.ByteSizeLong();
  send(make_frame(df::Kind::kResponse, df::kTransportError, wire_id, &envelope, bytes, nullptr, nullptr));
}

// ---------------------------------------------------------------- errors and closing

void Connection::protocol_error(const std::string& what) {
  ++state_->stats.frames_rejected;
  close(absl::UnavailableError("the data-plane connection " +
                               std::string(role_ == Role::kCaller ? "to " : "from ") + peer_.short_name() +
                               " sent " + what),
        CloseMode::kFail);
}

void Connection::io_error(const char* op, const boost::system::error_code& ec) {
  std::string where = peer_.short_name();
  if (role_ == Role::kCaller)
    where += " (" + endpoint_.host + ":" + std::to_string(endpoint_.port) + (same_host_ ? ", over its Unix socket" : "") + ")";
  close(absl::UnavailableError(std::string("cannot ") + op + " the data plane of " + where + ": " + ec.message()),
        CloseMode::kFail);
}

void Connection::close(const Status& why, CloseMode mode) {
  if (closed_) return;
  cancel_connect_timer();
  closed_ = true;
  boost::system::error_code ig;
  socket_.close(ig);
  queue_.clear();
  pending_.clear();
  DataPlane::State* state = state_;
  auto keep = shared_from_this();
  if (role_ == Role::kCallee) {
    state->accepted.erase(keep);
    auto live = std::move(live_);
    live_.clear();
    for (auto& [id, call] : live) {
      call->finished = true;
      call->work.reset();
      if (!call->cancel) continue;
      CancellationSource source = std::move(*call->cancel);
      call->cancel.reset();
      if (mode == CloseMode::kFail) source.cancel();  // the caller went away
    }
    return;
  }
  std::vector<std::shared_ptr<OutCall>> calls;
  if (in_.call) calls.push_back(std::move(in_.call));
  for (auto& [id, c] : calls_) calls.push_back(std::move(c));
  calls_.clear();
  state->on_caller_connection_closed(this);
  for (auto& c : calls) {
    if (mode == CloseMode::kDrop) {
      state->drop(*c);
    } else if (!c->finished) {
      // Posted: a `done` may destroy the transport, and more calls follow.
      state->finish(c, with_failed_task(Status(why.code(), call_name(c->name, peer_) + " failed: " +
                                                               std::string(why.message())),
                                        peer_),
                    /*post=*/true);
    }
  }
}

}  // namespace dp

using dp::call_name;
using dp::make_frame;

// ================================================================== state: caller side

void DataPlane::State::call(const TaskId& to, Request request, CallOptions opts, ResponseCallback done) {
  Peer& peer = peers[to];
  if (peer.phase == Peer::Phase::kNoDataPlane) {
    ++stats.fallbacks;
    options.fallback(to, std::move(request), std::move(opts), std::move(done));
    return;
  }
  auto c = std::make_shared<OutCall>();
  c->to = to;
  c->name = request_name(request);
  c->request.emplace(std::move(request));
  c->done = std::move(done);
  c->work = AsioExecutor::Work(executor);
  c->options = std::move(opts);
  ++in_flight;
  ++stats.calls;

  if (c->options.cancel.cancelled())
    return finish(c, with_failed_task(absl::CancelledError(call_name(c->name, to) + " was cancelled"), to), true);
  if (c->options.deadline != kTimeNever && c->options.deadline <= executor.now())
    return finish(c, with_failed_task(absl::DeadlineExceededError(call_name(c->name, to) + " passed its deadline"), to),
                  true);
  if (c->options.cancel.can_be_cancelled()) {
    c->cancel_registration = c->options.cancel.on_cancel(
        [weak = weak_from_this(), weak_call = std::weak_ptr<OutCall>(c)] {
          auto s = weak.lock();
          auto call = weak_call.lock();
          if (!s || !call || call->finished) return;
          s->cancel_call(call, absl::CancelledError(call_name(call->name, call->to) + " was cancelled"));
        });
  }
  add_deadline(c);
  switch (peer.phase) {
    case Peer::Phase::kReady:
      return dispatch(peer, c);
    case Peer::Phase::kUnknown:
      c->waiting = true;
      peer.waiting.push_back(c);
      return start_discovery(to, peer);
    case Peer::Phase::kDiscovering:
      c->waiting = true;
      peer.waiting.push_back(c);
      return;
    case Peer::Phase::kNoDataPlane:
      break;
  }
}

void DataPlane::State::start_discovery(const TaskId& to, Peer& peer) {
  peer.phase = Peer::Phase::kDiscovering;
  const std::uint64_t generation = ++peer.generation;
  ++stats.discoveries;
  options.discover(to, add_saturating(executor.now(), dp::kDiscoveryTimeout),
                   [weak = weak_from_this(), to, generation](StatusOr<DataEndpoint> found) {
                     if (auto s = weak.lock()) s->on_discovered(to, generation, std::move(found));
                   });
}

void DataPlane::State::on_discovered(const TaskId& to, std::uint64_t generation, StatusOr<DataEndpoint> found) {
  Peer& peer = peers[to];
  if (peer.phase != Peer::Phase::kDiscovering || peer.generation != generation) return;
  auto waiting = std::move(peer.waiting);
  peer.waiting.clear();
  for (auto& c : waiting) c->waiting = false;
  if (!found.ok()) {
    peer.phase = Peer::Phase::kUnknown;
    const Status& st = found.status();
    for (auto& c : waiting)
      if (!c->finished)
        finish(c, with_failed_task(Status(st.code(), call_name(c->name, to) + " failed: " + std::string(st.message())), to),
               /*post=*/true);
    return;
  }
  if (found->port == 0) {
    peer.phase = Peer::Phase::kNoDataPlane;
    for (auto& c : waiting)
      if (!c->finished) hand_to_grpc(c);
    return;
  }
  // Connections to an old endpoint belong to an earlier incarnation of the peer.
  if (peer.endpoint.host != found->host || peer.endpoint.port != found->port ||
      peer.endpoint.same_host_socket != found->same_host_socket) {
    auto old = std::move(peer.conns);
    peer.conns.clear();
    for (auto& conn : old)
      conn->close(absl::UnavailableError(to.short_name() + " moved its data plane"), Connection::CloseMode::kFail);
  }
  peer.phase = Peer::Phase::kReady;
  peer.endpoint = *found;
  for (auto& c : waiting)
    if (!c->finished) dispatch(peer, c);
}

void DataPlane::State::hand_to_grpc(const std::shared_ptr<OutCall>& c) {
  remove_deadline(*c);
  c->cancel_registration.reset();
  c->work.reset();
  c->finished = true;
  --in_flight;
  ++stats.fallbacks;
  options.fallback(c->to, std::move(*c->request), std::move(c->options), std::move(c->done));
}

void DataPlane::State::dispatch(Peer& peer, const std::shared_ptr<OutCall>& c) {
  // A simulator-only message (meta payloads) has nothing to send.
  if (Status sendable = check_sendable(*c->request); !sendable.ok())
    return finish(c, std::move(sendable), true);
  std::shared_ptr<Connection> conn;
  if (peer.conns.size() < static_cast<std::size_t>(std::max(options.connections_per_peer, 1))) {
    conn = std::make_shared<Connection>(this, Connection::Role::kCaller, Socket(executor.context()), c->to);
    peer.conns.push_back(conn);
    ++stats.connections_opened;
    conn->connect(peer.endpoint);
  } else {
    conn = peer.conns[peer.next++ % peer.conns.size()];
  }

  // Encode now; the request moves to the heap, where the socket reads its tensors in place.
  auto owner = std::make_shared<Request>(std::move(*c->request));
  c->request.reset();
  wire::RpcRequest envelope;
  to_proto(self, envelope.mutable_from());
  envelope.set_request_id(c->options.request_id);
  if (c->options.deadline != kTimeNever)
    envelope.set_timeout_nanos(static_cast<std::uint64_t>(std::max<Duration>(c->options.deadline - executor.now(), 1)));
  AttachmentWriter attachments(options.attachment_threshold);
  to_proto(*owner, envelope.mutable_request(), &attachments);
  const std::size_t bytes = envelope.ByteSizeLong();
  if (bytes + attachments.total() > options.max_message_bytes || bytes > UINT32_MAX) {
    return finish(c,
                  with_failed_task(absl::ResourceExhaustedError(
                                       call_name(c->name, c->to) + ": request of " +
                                       std::to_string(bytes + attachments.total()) +
                                       " bytes exceeds the max message size of " +
                                       std::to_string(options.max_message_bytes) + " bytes"),
                                   c->to),
                  true);
  }
  c->conn = conn;
  c->wire_id = conn->add_call(c);
  conn->send(make_frame(dataframe::Kind::kRequest, 0, c->wire_id, &envelope, bytes, &attachments, std::move(owner)));
}

void DataPlane::State::finish(const std::shared_ptr<OutCall>& c, StatusOr<Response> result, bool post) {
  if (c->finished) return;
  c->finished = true;
  remove_deadline(*c);
  c->cancel_registration.reset();
  c->work.reset();  // a posted completion keeps the executor busy by itself
  if (auto conn = c->conn.lock(); conn && c->wire_id) conn->forget_call(c->wire_id);
  if (c->waiting) {
    auto& w = peers[c->to].waiting;
    w.erase(std::remove(w.begin(), w.end(), c), w.end());
    c->waiting = false;
  }
  auto run = [](State& s, OutCall& call, StatusOr<Response> r) {
    --s.in_flight;
    auto done = std::move(call.done);
    call.done = nullptr;
    done(std::move(r));
  };
  if (!post) return run(*this, *c, std::move(result));
  executor.post([weak = weak_from_this(), c, r = std::move(result), run]() mutable {
    if (auto s = weak.lock()) run(*s, *c, std::move(r));
  });
}

void DataPlane::State::drop(OutCall& c) {
  c.finished = true;
  remove_deadline(c);
  c.cancel_registration.reset();
  c.work.reset();
  c.done = nullptr;
}

void DataPlane::State::cancel_call(const std::shared_ptr<OutCall>& c, Status why) {
  auto conn = c->conn.lock();
  const std::uint64_t wire_id = c->wire_id;
  finish(c, with_failed_task(std::move(why), c->to), /*post=*/true);
  // Tell the callee, which fires its IncomingCall::cancelled.
  if (conn && wire_id && !conn->closed()) conn->send_cancel(wire_id);
}

void DataPlane::State::add_deadline(const std::shared_ptr<OutCall>& c) {
  if (c->options.deadline == kTimeNever) return;
  c->deadline_entry = deadlines.emplace(c->options.deadline, c);
  c->has_deadline_entry = true;
  // One executor timer for all calls, armed for the earliest deadline; calls
  // completing never re-arm it (it finds nothing due and re-arms for the next).
  if (c->options.deadline < deadline_timer_at) arm_deadline_timer();
}

void DataPlane::State::remove_deadline(OutCall& c) {
  if (!c.has_deadline_entry) return;
  deadlines.erase(c.deadline_entry);
  c.has_deadline_entry = false;
}

void DataPlane::State::arm_deadline_timer() {
  if (deadline_timer != kNoTimer) executor.cancel(deadline_timer);
  deadline_timer = kNoTimer;
  deadline_timer_at = kTimeNever;
  if (deadlines.empty()) return;
  deadline_timer_at = deadlines.begin()->first;
  deadline_timer = executor.post_at(deadline_timer_at, [weak = weak_from_this()] {
    if (auto s = weak.lock()) s->on_deadline_timer();
  });
}

void DataPlane::State::on_deadline_timer() {
  deadline_timer = kNoTimer;
  deadline_timer_at = kTimeNever;
  const Time now = executor.now();
  while (!deadlines.empty() && deadlines.begin()->first <= now) {
    auto c = deadlines.begin()->second;
    cancel_call(c, absl::DeadlineExceededError(call_name(c->name, c->to) + " passed its deadline"));
  }
  if (deadline_timer == kNoTimer) arm_deadline_timer();
}

void DataPlane::State::on_caller_connection_closed(Connection* conn) {
  auto it = peers.find(conn->peer());
  if (it == peers.end()) return;
  Peer& peer = it->second;
  auto& conns = peer.conns;
  conns.erase(std::remove_if(conns.begin(), conns.end(), [&](const auto& c) { return c.get() == conn; }), conns.end());
  // The peer may have restarted elsewhere: ask gRPC again on the next call.
  if (peer.phase == Peer::Phase::kReady) peer.phase = Peer::Phase::kUnknown;
}

// ================================================================== state: callee side

template <typename Protocol>
void DataPlane::State::accept_next(std::optional<asio::basic_socket_acceptor<Protocol>> State::*which) {
  auto& listening = this->*which;
  if (!listening) return;
  listening->async_accept(executor.context(), [weak = weak_from_this(), which](const boost::system::error_code& ec,
                                                                              typename Protocol::socket socket) {
    auto s = weak.lock();
    if (!s || !(s.get()->*which) || ec == asio::error::operation_aborted) return;
    if (ec) {  // out of descriptors, say: try again shortly rather than spin
      s->executor.post_after(10 * kMillisecond, [weak = std::weak_ptr<State>(s), which] {
        if (auto st = weak.lock()) st->accept_next(which);
      });
      return;
    }
    if constexpr (std::is_same_v<Protocol, local>) ++s->stats.same_host_connections_accepted;
    const auto protocol = socket.local_endpoint().protocol();
    s->on_accepted(Socket(s->executor.context(), protocol, socket.release()));
    s->accept_next(which);
  });
}

void DataPlane::State::on_accepted(Socket socket) {
  auto conn = std::make_shared<Connection>(this, Connection::Role::kCallee, std::move(socket), TaskId());
  conn->start_callee();
  accepted.insert(conn);
  ++stats.connections_accepted;
}

// Also listens on a Unix socket in the abstract namespace, named for this
// boot, process and port, for callers on this host (DataEndpoint). Not
// having one (no boot id to name it by, the name taken) costs only speed:
// callers use TCP.
void DataPlane::State::listen_same_host() {
  if (!options.same_host_socket || tls) return;
  const std::string name = same_host_socket_name(port);
  if (name.empty()) return;
  boost::system::error_code ec;
  local::acceptor a(executor.context());
  a.open(local(), ec);
  if (!ec) a.bind(dp::abstract_endpoint(name), ec);
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return;
  local_acceptor.emplace(std::move(a));
  local_name = name;
  accept_next(&State::local_acceptor);
}

void DataPlane::State::serve_request(const std::shared_ptr<Connection>& conn, std::uint64_t wire_id,
                                     std::uint64_t bytes, IncomingCall incoming) {
  auto h = handler;  // serve() may replace it while it runs
  if (!h || !*h) {
    conn->release_inbound(bytes);
    conn->reply_transport_error(wire_id, absl::UnavailableError(self.short_name() + " has no service running"));
    return;
  }
  ++stats.requests_served;
  auto call = std::make_shared<InCall>();
  call->conn = conn;
  call->wire_id = wire_id;
  call->bytes = bytes;
  call->work = AsioExecutor::Work(executor);  // until answered, the executor is not idle
  call->cancel.emplace();
  incoming.cancelled = call->cancel->token();
  conn->add_live(wire_id, call);
  (*h)(std::move(incoming), [call](StatusOr<Response> result) mutable {
    if (call->finished) return;  // cancelled, or the connection went away
    call->finished = true;
    call->cancel.reset();
    call->work.reset();
    auto c = call->conn.lock();
    if (!c || c->closed()) return;
    c->forget_live(call->wire_id);
    c->reply(call->wire_id, std::move(result));
    c->release_inbound(call->bytes);
  });
}

void DataPlane::State::stop_serving() {
  boost::system::error_code ig;
  if (acceptor) {
    acceptor->close(ig);
    acceptor.reset();
  }
  if (local_acceptor) {
    local_acceptor->close(ig);
    local_acceptor.reset();
    local_name.clear();
  }
  auto conns = accepted;
  for (auto& conn : conns)
    conn->close(absl::UnavailableError(self.short_name() + " stopped serving"), Connection::CloseMode::kDrop);
  accepted.clear();
}

DataPlane::State::~State() {
  stop_serving();
  std::vector<std::shared_ptr<Connection>> conns;
  for (auto& [task, peer] : peers) {
    for (auto& c : peer.waiting) drop(*c);
    peer.waiting.clear();
    for (auto& conn : peer.conns) conns.push_back(conn);
  }
  for (auto& conn : conns) conn->close(absl::UnavailableError("shutting down"), Connection::CloseMode::kDrop);
  for (auto& [t, c] : deadlines) {
    c->has_deadline_entry = false;
    drop(*c);
  }
  deadlines.clear();
  if (deadline_timer != kNoTimer) executor.cancel(deadline_timer);
  resolver.cancel();
}

void DataPlane::State::configure_tls() {
  const SecurityOptions& sec = options.security;
  try {
    tls = std::make_unique<asio::ssl::context>(asio::ssl::context::tls);
    tls->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                     asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1);
    tls->use_certificate_chain(asio::buffer(sec.cert_pem));
    tls->use_private_key(asio::buffer(sec.key_pem), asio::ssl::context::pem);
    tls->add_certificate_authority(asio::buffer(sec.ca_pem));
    // As a server; a caller sets verify_peer on its own streams.
    tls->set_verify_mode(sec.mutual_tls ? asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert
                                        : asio::ssl::verify_none);
  } catch (const boost::system::system_error& e) {
    tls.reset();
    configuration = absl::InvalidArgumentError(self.short_name() + ": the data plane's TLS certificate, key or CA " +
                                               "is not usable: " + e.what());
  }
}

// ================================================================== DataPlane

DataPlane::DataPlane(const TaskId& self, AsioExecutor& executor, DataPlaneOptions options)
    : state_(std::make_shared<State>(self, executor, std::move(options))) {}

DataPlane::~DataPlane() = default;

Status DataPlane::listen(const std::string& host, int port) {
  TWINPS_RETURN_IF_ERROR(state_->configuration);
  boost::system::error_code ec;
  const auto port_text = std::to_string(port);
  std::vector<tcp::endpoint> candidates;
  if (is_wildcard_host(host)) {
    // Every interface: an IPv6 socket that also takes IPv4 where the host has
    // IPv6 at all (a pod on a dual-stack or IPv6-only cluster), else IPv4.
    if (host != "0.0.0.0") candidates.emplace_back(tcp::v6(), static_cast<unsigned short>(port));
    if (host != "::") candidates.emplace_back(tcp::v4(), static_cast<unsigned short>(port));
  } else {
    tcp::resolver resolver(state_->executor.context());
    auto results = resolver.resolve(host, port_text, tcp::resolver::passive, ec);
    if (ec || results.empty())
      return absl::UnavailableError(state_->self.short_name() + " cannot resolve '" + host +
                                    "' to listen for its data plane: " + ec.message());
    candidates.push_back(results.begin()->endpoint());
  }
  tcp::acceptor acceptor(state_->executor.context());
  for (const auto& endpoint : candidates) {
    ec.clear();
    acceptor = tcp::acceptor(state_->executor.context());
    acceptor.open(endpoint.protocol(), ec);
    if (!ec && endpoint.protocol() == tcp::v6() && is_wildcard_host(host))
      acceptor.set_option(asio::ip::v6_only(false), ec);
    // A restarted task takes its fixed data-plane port back at once (TIME_WAIT).
    if (!ec && port != 0) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor.bind(endpoint, ec);
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (!ec) break;
  }
  if (ec)
    return absl::UnavailableError(state_->self.short_name() + " cannot listen for its data plane on " +
                                  (host.empty() ? std::string("every interface") : host) + " port " + port_text +
                                  ": " + ec.message());
  state_->port = acceptor.local_endpoint().port();
  state_->acceptor.emplace(std::move(acceptor));
  state_->accept_next(&State::acceptor);
  state_->listen_same_host();
  return absl::OkStatus();
}

int DataPlane::port() const { return state_->acceptor ? state_->port : 0; }
const std::string& DataPlane::same_host_socket() const { return state_->local_name; }

void DataPlane::set_handler(std::shared_ptr<const CallHandler> handler) { state_->handler = std::move(handler); }
void DataPlane::set_arrival_hook(std::shared_ptr<const ArrivalHook> hook) { state_->arrival_hook = std::move(hook); }

void DataPlane::stop_serving() { state_->stop_serving(); }

void DataPlane::call(const TaskId& to, Request request, CallOptions options, ResponseCallback done) {
  state_->call(to, std::move(request), std::move(options), std::move(done));
}

std::size_t DataPlane::calls_in_flight() const { return state_->in_flight; }
const DataPlaneStats& DataPlane::stats() const { return state_->stats; }

}  // namespace twinps::net
