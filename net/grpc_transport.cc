#include "net/grpc_transport.h"

#include <algorithm>
#include <climits>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include <grpc/support/time.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <grpcpp/support/channel_arguments.h>
#include <grpcpp/support/server_callback.h>

#include "net/data_plane.h"
#include "net/frame.h"
#include "net/proto/twinps.grpc.pb.h"
#include "net/status_mapping.h"

namespace twinps::net {

std::function<std::string(const TaskId&)> address_map(std::map<TaskId, std::string> addresses) {
  return [addresses = std::move(addresses)](const TaskId& t) -> std::string {
    auto it = addresses.find(t);
    return it == addresses.end() ? std::string() : it->second;
  };
}

namespace {

int clamp_to_int(std::size_t v) { return static_cast<int>(std::min<std::size_t>(v, INT_MAX)); }
int to_millis(Duration d) { return static_cast<int>(std::clamp<Duration>(d / kMillisecond, 1, INT_MAX)); }

// ================================================================== server side

class IncomingRpc;

// What the server side shares with gRPC's threads and with callbacks queued
// on the executor; it lives as long as any of them holds it.
struct ServerShared {
  TaskId self;
  AsioExecutor* executor = nullptr;
  std::size_t max_message_bytes = 0;
  std::size_t attachment_threshold = 0;
  std::string token;  // "" = any caller is served
  std::atomic<std::uint64_t> unauthenticated{0};

  // gRPC thread: OK when the call carries the cluster token.
  grpc::Status authenticate(grpc::CallbackServerContext* ctx) {
    if (token.empty()) return grpc::Status::OK;
    const auto& md = ctx->client_metadata();
    auto it = md.find(kTokenMetadataKey);
    if (it != md.end() && token_matches(token, std::string_view(it->second.data(), it->second.size())))
      return grpc::Status::OK;
    unauthenticated.fetch_add(1);
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        self.short_name() + " refused a call from " + ctx->peer() +
                            ": it carries no valid cluster token");
  }

  std::mutex mu;
  bool stopping = false;
  std::shared_ptr<const CallHandler> handler;
  std::map<std::uint64_t, std::shared_ptr<IncomingRpc>> live;  // received, not yet answered
  std::uint64_t next_id = 1;
  std::atomic<int> data_port{0};  // 0: no data plane
  std::string same_host_socket;   // set before the server starts, then only read
};

// One incoming call. Kept alive by itself until gRPC is done with it (OnDone)
// and by its Responder; finished exactly once, by whichever comes first: the
// handler's reply, the caller cancelling, or the server stopping.
class IncomingRpc final : public grpc::ServerUnaryReactor, public std::enable_shared_from_this<IncomingRpc> {
 public:
  IncomingRpc(std::shared_ptr<ServerShared> shared, grpc::CallbackServerContext* ctx, grpc::ByteBuffer* response)
      : shared_(std::move(shared)), ctx_(ctx), response_(response), work_(*shared_->executor) {}

  // On a gRPC thread, before the reactor is returned to gRPC.
  void start(const grpc::ByteBuffer& request) {
    self_ = shared_from_this();
    wire::RpcRequest envelope;
    ReceivedFrame frame;
    TaskId from;
    Request decoded;
    Status st = frame.parse(request, &envelope);
    if (st.ok()) {
      st = from_proto(envelope.from(), &from);
      if (!st.ok()) st = absl::InvalidArgumentError("RpcRequest.from." + std::string(st.message()));
    }
    if (st.ok()) st = from_proto(envelope.request(), &decoded, &frame);
    if (!st.ok()) {
      finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          shared_->self.short_name() + " rejected a request: " + std::string(st.message())));
      return;
    }
    const Time deadline = callee_deadline();

    std::shared_ptr<const CallHandler> handler;
    bool stopping = false;
    {
      std::lock_guard lock(shared_->mu);
      stopping = shared_->stopping;
      if (!stopping && shared_->handler) {
        handler = shared_->handler;
        id_ = shared_->next_id++;
        shared_->live.emplace(id_, shared_from_this());
      }
    }
    if (!handler) {
      finish(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          shared_->self.short_name() + (stopping ? " stopped serving" : " has no service running")));
      return;
    }
    shared_->executor->post([rpc = shared_from_this(), handler = std::move(handler), from,
                             request = std::move(decoded), rid = envelope.request_id(), deadline]() mutable {
      rpc->dispatch(*handler, IncomingCall{from, std::move(request), rid, deadline, {}, nullptr});
    });
  }

  // Finishes the RPC unless it already is; the body, if any, is the reply.
  bool finish(const grpc::Status& status, grpc::ByteBuffer* body = nullptr) {
    {
      std::lock_guard lock(mu_);
      if (finished_) return false;
      finished_ = true;
      if (body) *response_ = std::move(*body);
      work_.reset();
    }
    if (id_ != 0) {
      std::lock_guard lock(shared_->mu);
      shared_->live.erase(id_);
    }
    Finish(status);
    return true;
  }

  // Executor thread (or, from stop_serving(), while nothing runs on it).
  void forget_cancellation() { cancel_.reset(); }

  void OnCancel() override {
    // Tell the handler, on its executor (posted before finishing, so that the
    // executor never looks idle in between).
    shared_->executor->post([rpc = shared_from_this()] {
      if (!rpc->cancel_) return;
      CancellationSource source = std::move(*rpc->cancel_);
      rpc->cancel_.reset();
      source.cancel();
    });
    finish(grpc::Status(grpc::StatusCode::CANCELLED, "the caller cancelled the call or went away"));
  }

  void OnDone() override {
    auto keep = std::move(self_);  // may destroy this on return
  }

 private:
  bool finished() {
    std::lock_guard lock(mu_);
    return finished_;
  }

  // Executor thread.
  void dispatch(const CallHandler& handler, IncomingCall call) {
    if (finished()) return;  // cancelled or stopped while queued
    cancel_.emplace();
    call.cancelled = cancel_->token();
    handler(std::move(call), [rpc = shared_from_this()](StatusOr<Response> result) mutable {
      rpc->respond(std::move(result));
    });
  }

  // Executor thread: the handler's reply.
  void respond(StatusOr<Response> result) {
    cancel_.reset();
    if (finished()) return;  // cancelled, or the server stopped meanwhile
    if (result.ok())
      if (Status sendable = check_sendable(*result); !sendable.ok()) result = std::move(sendable);
    auto owner = std::make_shared<StatusOr<Response>>(std::move(result));
    wire::RpcResponse envelope;
    AttachmentWriter attachments(shared_->attachment_threshold);
    if (owner->ok()) {
      to_proto(**owner, envelope.mutable_response(), &attachments);
    } else {
      to_proto(owner->status(), envelope.mutable_status());
    }
    std::size_t bytes = 0;
    grpc::ByteBuffer body = encode_frame(envelope, attachments, owner, &bytes);
    if (bytes > shared_->max_message_bytes) {
      envelope.Clear();
      Status too_large = with_failed_task(
          absl::ResourceExhaustedError(shared_->self.short_name() + "'s reply of " + std::to_string(bytes) +
                                       " bytes exceeds the max message size of " +
                                       std::to_string(shared_->max_message_bytes) + " bytes"),
          shared_->self);
      to_proto(too_large, envelope.mutable_status());
      body = encode_frame(envelope, AttachmentWriter(), nullptr, &bytes);
    }
    finish(grpc::Status::OK, &body);
  }

  // The caller's deadline on this task's clock.
  Time callee_deadline() const {
    const auto deadline = ctx_->deadline();
    if (deadline == std::chrono::system_clock::time_point::max()) return kTimeNever;
    const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - std::chrono::system_clock::now());
    return add_saturating(shared_->executor->now(), std::max<Duration>(left.count(), 0));
  }

  std::shared_ptr<ServerShared> shared_;
  grpc::CallbackServerContext* ctx_;
  grpc::ByteBuffer* response_;
  std::uint64_t id_ = 0;
  std::shared_ptr<IncomingRpc> self_;  // until OnDone

  std::mutex mu_;
  bool finished_ = false;
  // Until answered, the call may still reach the handler or cancel it: the
  // executor is not idle (matters only when run_until() drives it).
  AsioExecutor::Work work_;

  std::optional<CancellationSource> cancel_;  // executor thread only
};

using ServiceBase =
    wire::Twinps::WithRawCallbackMethod_Call<wire::Twinps::WithRawCallbackMethod_LocateDataPlane<wire::Twinps::Service>>;

class Service final : public ServiceBase {
 public:
  explicit Service(std::shared_ptr<ServerShared> shared) : shared_(std::move(shared)) {}
  using ServiceBase::Call;
  using ServiceBase::LocateDataPlane;

  // Answered on gRPC's thread: the port is fixed once serving.
  grpc::ServerUnaryReactor* LocateDataPlane(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer*,
                                            grpc::ByteBuffer* response) override {
    auto* reactor = ctx->DefaultReactor();
    if (grpc::Status denied = shared_->authenticate(ctx); !denied.ok()) {
      reactor->Finish(denied);
      return reactor;
    }
    bool stopping;
    {
      std::lock_guard lock(shared_->mu);
      stopping = shared_->stopping;
    }
    if (stopping) {
      reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, shared_->self.short_name() + " stopped serving"));
      return reactor;
    }
    wire::DataPlaneInfo info;
    to_proto(shared_->self, info.mutable_task());
    info.set_port(static_cast<std::uint32_t>(shared_->data_port.load()));
    info.set_same_host_socket(shared_->same_host_socket);
    grpc::Slice slice(info.SerializeAsString());
    *response = grpc::ByteBuffer(&slice, 1);
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  grpc::ServerUnaryReactor* Call(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response) override {
    if (grpc::Status denied = shared_->authenticate(ctx); !denied.ok()) {
      auto* reactor = ctx->DefaultReactor();
      reactor->Finish(denied);
      return reactor;
    }
    auto rpc = std::make_shared<IncomingRpc>(shared_, ctx, response);
    rpc->start(*request);
    return rpc.get();  // alive until OnDone
  }

 private:
  std::shared_ptr<ServerShared> shared_;
};

// ================================================================== client side

// Counts gRPC callbacks not yet returned, so the transport can wait for them.
struct ClientShared {
  std::mutex mu;
  std::condition_variable cv;
  std::size_t pending = 0;
  std::set<grpc::ClientContext*> discoveries;  // in flight, cancelled when the transport goes
};

// A LocateDataPlane RPC in flight.
struct Discovery {
  TaskId to;
  std::string host;
  grpc::ClientContext ctx;
  grpc::ByteBuffer request;
  grpc::ByteBuffer response;
  UniqueFunction<void(StatusOr<DataEndpoint>)> done;
};

// On a gRPC thread: where the peer's data plane is, as the caller sees it.
StatusOr<DataEndpoint> decode_location(const grpc::Status& status, const Discovery& d) {
  const std::string what = "locating the data plane of " + d.to.short_name();
  if (!status.ok()) {
    switch (status.error_code()) {
      case grpc::StatusCode::UNIMPLEMENTED:
        return DataEndpoint{d.host, 0};  // a peer without a data plane: use Call
      case grpc::StatusCode::CANCELLED:
        return absl::UnavailableError(what + ": cancelled by the peer or the connection dropped");
      case grpc::StatusCode::DEADLINE_EXCEEDED:
        return absl::DeadlineExceededError(what + " passed its deadline");
      default:
        return absl::Status(from_grpc_code(status.error_code()), what + ": " + status.error_message());
    }
  }
  grpc::Slice slice;
  wire::DataPlaneInfo info;
  TaskId task;
  if (!d.response.TrySingleSlice(&slice).ok() && !d.response.DumpToSingleSlice(&slice).ok())
    return absl::InvalidArgumentError(what + ": an unreadable reply");
  if (!info.ParseFromArray(slice.begin(), static_cast<int>(slice.size())) || !from_proto(info.task(), &task).ok() ||
      info.port() > 65535)
    return absl::InvalidArgumentError(what + ": a malformed reply");
  if (task != d.to) return absl::UnavailableError(what + ": its address is served by " + task.short_name());
  return DataEndpoint{d.host, static_cast<int>(info.port()), info.same_host_socket()};
}

struct OutgoingRpc {
  std::uint64_t id = 0;
  TaskId to;
  std::string address;  // where `to` was looked for, once known: error messages name it
  const char* name = "";
  grpc::ClientContext ctx;
  grpc::ByteBuffer request;
  grpc::ByteBuffer response;
  // Executor thread only:
  bool finished = false;
  // Cancelled by the caller's token: the outcome is CANCELLED whatever gRPC
  // reports (its report may run first, see on_cancel below).
  bool cancelled_by_caller = false;
  ResponseCallback done;
  CancelRegistration cancel_registration;
  AsioExecutor::Work work;
};

struct Peer {
  std::string address;  // as configured
  std::string host;     // of its address, for the data plane
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  std::vector<std::unique_ptr<grpc::GenericStub>> stubs;
  std::size_t next = 0;
  grpc::GenericStub& stub() { return *stubs[next++ % stubs.size()]; }
};

std::string call_name(const OutgoingRpc& rpc) {
  return std::string(rpc.name) + " to " + rpc.to.short_name() + (rpc.address.empty() ? "" : " at " + rpc.address);
}

// On a gRPC thread: the call's outcome as core sees it.
StatusOr<Response> decode_reply(const grpc::Status& status, const OutgoingRpc& rpc) {
  if (!status.ok()) {
    // The transport failed: attribute it to the callee.
    Status st;
    switch (status.error_code()) {
      case grpc::StatusCode::CANCELLED:
        // We did not cancel (that completes the call before gRPC reports):
        // the peer or the connection gave up on the call.
        st = absl::UnavailableError(call_name(rpc) + " failed: cancelled by the peer or the connection dropped (" +
                                    status.error_message() + ")");
        break;
      case grpc::StatusCode::DEADLINE_EXCEEDED:
        st = absl::DeadlineExceededError(call_name(rpc) + " passed its deadline");
        break;
      default:
        st = absl::Status(from_grpc_code(status.error_code()), call_name(rpc) + " failed: " + status.error_message());
        break;
    }
    return with_failed_task(std::move(st), rpc.to);
  }
  wire::RpcResponse envelope;
  ReceivedFrame frame;
  Status st = frame.parse(rpc.response, &envelope);
  if (st.ok() && envelope.has_status() && envelope.status().code() != 0) {
    // The handler's own error: delivered as it was returned, payloads and all.
    Status handler_error;
    st = from_proto(envelope.status(), &handler_error);
    if (st.ok()) return handler_error;
  }
  Response response;
  if (st.ok()) st = from_proto(envelope.response(), &response, &frame);
  if (!st.ok()) {
    return with_failed_task(
        absl::InvalidArgumentError(call_name(rpc) + ": malformed reply: " + std::string(st.message())), rpc.to);
  }
  return response;
}

}  // namespace

// ================================================================== the transport

struct GrpcTransport::Impl {
  TaskId self;
  AsioExecutor& executor;
  GrpcTransportOptions options;

  std::shared_ptr<ServerShared> server_shared = std::make_shared<ServerShared>();
  std::unique_ptr<Service> service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;

  std::mutex peers_mu;
  std::map<TaskId, Peer> peers;

  std::shared_ptr<ClientShared> client_shared = std::make_shared<ClientShared>();
  std::map<std::uint64_t, std::shared_ptr<OutgoingRpc>> outgoing;  // executor thread only
  std::uint64_t next_call_id = 1;
  std::uint64_t grpc_calls = 0;
  std::uint64_t discoveries = 0;

  std::unique_ptr<DataPlane> data;  // with DataPlaneMode::kTcp

  Impl(const TaskId& t, AsioExecutor& ex, GrpcTransportOptions o) : self(t), executor(ex), options(std::move(o)) {
    server_shared->self = self;
    server_shared->executor = &executor;
    server_shared->max_message_bytes = options.max_message_bytes;
    server_shared->attachment_threshold = options.attachment_threshold;
    server_shared->token = options.security.token;
  }

  std::shared_ptr<grpc::ServerCredentials> server_credentials() const {
    const SecurityOptions& sec = options.security;
    if (!sec.tls) return grpc::InsecureServerCredentials();
    grpc::SslServerCredentialsOptions o(sec.mutual_tls ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                                       : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
    o.pem_root_certs = sec.ca_pem;
    o.pem_key_cert_pairs.push_back({sec.key_pem, sec.cert_pem});
    return grpc::SslServerCredentials(o);
  }

  std::shared_ptr<grpc::ChannelCredentials> channel_credentials() const {
    const SecurityOptions& sec = options.security;
    if (!sec.tls) return grpc::InsecureChannelCredentials();
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = sec.ca_pem;  // the server's certificate must name the host dialled
    if (sec.mutual_tls) {
      o.pem_private_key = sec.key_pem;
      o.pem_cert_chain = sec.cert_pem;
    }
    return grpc::SslCredentials(o);
  }

  void add_token(grpc::ClientContext& ctx) const {
    if (!options.security.token.empty())
      ctx.AddMetadata(kTokenMetadataKey, token_metadata_value(options.security.token));
  }

  void start_data_plane() {
    DataPlaneOptions o;
    o.max_message_bytes = options.max_message_bytes;
    o.attachment_threshold = options.attachment_threshold;
    o.connections_per_peer = options.data_connections_per_peer;
    o.socket_buffer_bytes = options.data_socket_buffer_bytes;
    o.same_host_socket = options.data_same_host_socket;
    o.same_host_ring_bytes = options.data_same_host_ring_bytes;
    o.security = options.security;
    o.discover = [this](const TaskId& to, Time deadline, UniqueFunction<void(StatusOr<DataEndpoint>)> done) {
      locate(to, deadline, std::move(done));
    };
    o.fallback = [this](const TaskId& to, Request request, CallOptions call_options, ResponseCallback done) {
      grpc_call(to, std::move(request), std::move(call_options), std::move(done));
    };
    data = std::make_unique<DataPlane>(self, executor, std::move(o));
  }

  Status listen_data_plane() {
    std::string host;
    int ignored = 0;
    if (!split_host_port(options.listen_address, &host, &ignored))
      return absl::InvalidArgumentError(self.short_name() + ": cannot tell the host of '" + options.listen_address +
                                        "' to listen for the data plane");
    TWINPS_RETURN_IF_ERROR(data->listen(host, options.data_listen_port));
    server_shared->data_port.store(data->port());
    server_shared->same_host_socket = data->same_host_socket();
    return absl::OkStatus();
  }

  Status start_server() {
    service = std::make_unique<Service>(server_shared);
    grpc::ServerBuilder builder;
    builder.AddListeningPort(options.listen_address, server_credentials(), &port);
    builder.SetMaxReceiveMessageSize(clamp_to_int(options.max_message_bytes));
    builder.SetMaxSendMessageSize(clamp_to_int(options.max_message_bytes));
    // Two live servers on one port would split the callers between them.
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    for (const auto& [key, value] : options.grpc_int_args) builder.AddChannelArgument(key, value);
    builder.RegisterService(service.get());
    server = builder.BuildAndStart();
    if (!server || port == 0) {
      server.reset();
      port = 0;
      return absl::UnavailableError(self.short_name() + " cannot listen on " + options.listen_address +
                                    " (address in use, or not a valid host:port)");
    }
    return absl::OkStatus();
  }

  void stop_serving() {
    if (data) data->stop_serving();
    std::vector<std::shared_ptr<IncomingRpc>> live;
    {
      std::lock_guard lock(server_shared->mu);
      server_shared->stopping = true;
      for (auto& [id, rpc] : server_shared->live) live.push_back(rpc);
      server_shared->live.clear();
    }
    for (auto& rpc : live) {
      rpc->finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, self.short_name() + " stopped serving"));
      rpc->forget_cancellation();
    }
    if (server) {
      // Every call is answered; the grace period only lets those answers flush.
      server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
      server.reset();
    }
  }

  Peer* peer(const TaskId& to) {
    std::lock_guard lock(peers_mu);
    auto it = peers.find(to);
    if (it != peers.end()) return &it->second;
    const std::string address = options.resolve ? options.resolve(to) : std::string();
    if (address.empty()) return nullptr;
    std::string host;
    int port = 0;
    if (!split_host_port(address, &host, &port)) host = address;  // gRPC may still make sense of it
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(clamp_to_int(options.max_message_bytes));
    args.SetMaxSendMessageSize(clamp_to_int(options.max_message_bytes));
    // Retries, backoff and idempotence are core's business (request ids).
    args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
    // Each transport owns its connections: a task that goes down takes only its own.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, to_millis(options.initial_reconnect_backoff));
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, to_millis(options.max_reconnect_backoff));
    for (const auto& [key, value] : options.grpc_int_args) args.SetInt(key, value);
    Peer p;
    p.address = address;
    p.host = host;
    for (int i = 0; i < std::max(options.channels_per_peer, 1); ++i) {
      // A distinct argument per channel keeps gRPC from sharing one connection among them.
      grpc::ChannelArguments channel_args = args;
      channel_args.SetInt("twinps.channel_index", i);
      p.channels.push_back(grpc::CreateCustomChannel(address, channel_credentials(), channel_args));
      p.stubs.push_back(std::make_unique<grpc::GenericStub>(p.channels.back()));
    }
    return &peers.emplace(to, std::move(p)).first->second;
  }

  // Executor thread. A no-op once the call is finished — in particular once
  // the transport has dropped it, so a completion queued on the executor never
  // touches a destroyed transport (it checks the call before `impl`).
  static void complete(Impl* impl, const std::shared_ptr<OutgoingRpc>& rpc, StatusOr<Response> result) {
    if (rpc->finished) return;
    rpc->finished = true;
    impl->outgoing.erase(rpc->id);
    rpc->cancel_registration.reset();
    rpc->work.reset();
    auto done = std::move(rpc->done);
    done(std::move(result));
  }

  void fail_soon(const std::shared_ptr<OutgoingRpc>& rpc, Status status) {
    executor.post([this, rpc, st = with_failed_task(std::move(status), rpc->to)]() mutable {
      complete(this, rpc, std::move(st));
    });
  }

  // Executor thread: asks `to` over gRPC where its data plane listens.
  void locate(const TaskId& to, Time deadline, UniqueFunction<void(StatusOr<DataEndpoint>)> done) {
    ++discoveries;
    Peer* p = peer(to);
    if (!p) {
      executor.post([done = std::move(done), to]() mutable {
        done(absl::InvalidArgumentError("no address is known for " + to.short_name()));
      });
      return;
    }
    auto d = std::make_shared<Discovery>();
    d->to = to;
    d->host = p->host;
    d->done = std::move(done);
    d->request = grpc::ByteBuffer(nullptr, 0);
    if (deadline != kTimeNever) {
      const Duration left = std::max<Duration>(deadline - executor.now(), 1);
      d->ctx.set_deadline(gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_nanos(left, GPR_TIMESPAN)));
    }
    d->ctx.set_wait_for_ready(false);  // a peer that is down is UNAVAILABLE now
    add_token(d->ctx);
    {
      std::lock_guard lock(client_shared->mu);
      ++client_shared->pending;
      client_shared->discoveries.insert(&d->ctx);
    }
    Discovery* raw = d.get();
    // As in call(): the context (holding the channel) goes back to the executor to be dropped.
    p->stub().UnaryCall(&raw->ctx, kLocateDataPlaneMethod, grpc::StubOptions(), &raw->request, &raw->response,
                       [d = std::move(d), shared = client_shared, ex = &executor](grpc::Status status) mutable {
                         StatusOr<DataEndpoint> found = decode_location(status, *d);
                         std::lock_guard lock(shared->mu);
                         shared->discoveries.erase(&d->ctx);
                         ex->post([d = std::move(d), found = std::move(found)]() mutable { d->done(std::move(found)); });
                         if (--shared->pending == 0) shared->cv.notify_all();
                       });
  }

  static bool data_request(const Request& r) {
    return std::holds_alternative<PullRequest>(r) || std::holds_alternative<PushRequest>(r);
  }

  void call(const TaskId& to, Request request, CallOptions options_in, ResponseCallback done) {
    if (data && (options.data_plane_for_every_request || data_request(request))) {
      data->call(to, std::move(request), std::move(options_in), std::move(done));
      return;
    }
    grpc_call(to, std::move(request), std::move(options_in), std::move(done));
  }

  void grpc_call(const TaskId& to, Request request, CallOptions options_in, ResponseCallback done) {
    ++grpc_calls;
    auto rpc = std::make_shared<OutgoingRpc>();
    rpc->id = next_call_id++;
    rpc->to = to;
    rpc->name = request_name(request);
    rpc->done = std::move(done);
    rpc->work = AsioExecutor::Work(executor);
    outgoing.emplace(rpc->id, rpc);

    Peer* p = peer(to);
    if (!p) {
      fail_soon(rpc, absl::InvalidArgumentError(call_name(*rpc) + ": no address is known for " + to.short_name()));
      return;
    }
    rpc->address = p->address;  // from here on, messages name where `to` was looked for
    if (options_in.cancel.cancelled()) {
      fail_soon(rpc, absl::CancelledError(call_name(*rpc) + " was cancelled"));
      return;
    }
    const Duration left = options_in.deadline == kTimeNever ? 0 : options_in.deadline - executor.now();
    if (options_in.deadline != kTimeNever && left <= 0) {
      fail_soon(rpc, absl::DeadlineExceededError(call_name(*rpc) + " passed its deadline"));
      return;
    }

    // A simulator-only message (meta payloads) has nothing to send; the
    // fault is the caller's own, so no peer is named as the failed task.
    if (Status sendable = check_sendable(request); !sendable.ok()) {
      executor.post([this, rpc, st = std::move(sendable)]() mutable { complete(this, rpc, std::move(st)); });
      return;
    }
    // Encode. The request moves to the heap, where gRPC reads its tensors in place.
    auto owner = std::make_shared<Request>(std::move(request));
    wire::RpcRequest envelope;
    to_proto(self, envelope.mutable_from());
    envelope.set_request_id(options_in.request_id);
    AttachmentWriter attachments(options.attachment_threshold);
    to_proto(*owner, envelope.mutable_request(), &attachments);
    std::size_t bytes = 0;
    rpc->request = encode_frame(envelope, attachments, std::move(owner), &bytes);
    if (bytes > options.max_message_bytes) {
      rpc->request.Clear();
      fail_soon(rpc, absl::ResourceExhaustedError(call_name(*rpc) + ": request of " + std::to_string(bytes) +
                                                  " bytes exceeds the max message size of " +
                                                  std::to_string(options.max_message_bytes) + " bytes"));
      return;
    }

    if (options_in.deadline != kTimeNever) {
      rpc->ctx.set_deadline(gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_nanos(left, GPR_TIMESPAN)));
    }
    rpc->ctx.set_wait_for_ready(false);  // fail fast: a peer that is down is UNAVAILABLE now
    add_token(rpc->ctx);

    if (options_in.cancel.can_be_cancelled()) {
      std::weak_ptr<OutgoingRpc> weak = rpc;
      rpc->cancel_registration = options_in.cancel.on_cancel([this, weak] {
        auto r = weak.lock();
        if (!r || r->finished) return;
        // gRPC reports the cancelled call from its own thread at once, and
        // asio runs that report before what this thread posts while its
        // callback still runs: the flag, not the order, makes it CANCELLED.
        r->cancelled_by_caller = true;
        fail_soon(r, absl::CancelledError(call_name(*r) + " was cancelled"));
        r->ctx.TryCancel();
      });
    }

    {
      std::lock_guard lock(client_shared->mu);
      ++client_shared->pending;
    }
    // The completion runs on one of gRPC's threads. It hands the call (and
    // with it the ClientContext, which holds a reference to the channel) over
    // to the executor rather than dropping it there: a channel must never be
    // destroyed on gRPC's own callback threads (in gRPC 1.51 the last channel
    // releases the callback CQ, whose threads would then join themselves).
    OutgoingRpc* raw = rpc.get();
    p->stub().UnaryCall(&raw->ctx, kCallMethod, grpc::StubOptions(), &raw->request, &raw->response,
                       [this, rpc = std::move(rpc), shared = client_shared, ex = &executor](grpc::Status status) mutable {
                         StatusOr<Response> result = decode_reply(status, *rpc);
                         rpc->request.Clear();  // releases the request's tensors
                         ex->post([impl = this, rpc = std::move(rpc), r = std::move(result)]() mutable {
                           if (rpc->cancelled_by_caller) return;  // its CANCELLED is queued
                           complete(impl, rpc, std::move(r));
                         });
                         std::lock_guard lock(shared->mu);
                         if (--shared->pending == 0) shared->cv.notify_all();
                       });
  }

  ~Impl() {
    stop_serving();
    data.reset();  // drops this task's data-plane calls
    {
      std::lock_guard lock(client_shared->mu);
      for (auto* ctx : client_shared->discoveries) ctx->TryCancel();
    }
    // Drop this task's own calls: their `done` never runs.
    for (auto& [id, rpc] : outgoing) {
      rpc->finished = true;
      rpc->cancel_registration.reset();
      rpc->work.reset();
      rpc->done = nullptr;
      rpc->ctx.TryCancel();
    }
    outgoing.clear();
    std::unique_lock lock(client_shared->mu);
    client_shared->cv.wait(lock, [&] { return client_shared->pending == 0; });
  }
};

StatusOr<std::unique_ptr<GrpcTransport>> GrpcTransport::create(const TaskId& self, AsioExecutor& executor,
                                                               GrpcTransportOptions options) {
  TWINPS_RETURN_IF_ERROR(check_tls_material(options.security));
  auto impl = std::make_unique<Impl>(self, executor, std::move(options));
  if (impl->options.data_plane == DataPlaneMode::kTcp) impl->start_data_plane();
  if (!impl->options.listen_address.empty()) {
    if (impl->data) TWINPS_RETURN_IF_ERROR(impl->listen_data_plane());
    TWINPS_RETURN_IF_ERROR(impl->start_server());
  }
  return std::unique_ptr<GrpcTransport>(new GrpcTransport(std::move(impl)));
}

GrpcTransport::GrpcTransport(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GrpcTransport::~GrpcTransport() = default;

void GrpcTransport::call(const TaskId& to, Request request, CallOptions options, ResponseCallback done) {
  impl_->call(to, std::move(request), std::move(options), std::move(done));
}

void GrpcTransport::serve(CallHandler handler) {
  auto h = handler ? std::make_shared<const CallHandler>(std::move(handler)) : nullptr;
  if (impl_->data) impl_->data->set_handler(h);
  std::lock_guard lock(impl_->server_shared->mu);
  impl_->server_shared->handler = std::move(h);
}

void GrpcTransport::observe_arrivals(ArrivalHook hook) {
  if (impl_->data) impl_->data->set_arrival_hook(hook ? std::make_shared<const ArrivalHook>(std::move(hook)) : nullptr);
}

const TaskId& GrpcTransport::self() const { return impl_->self; }
int GrpcTransport::port() const { return impl_->port; }
void GrpcTransport::stop_serving() { impl_->stop_serving(); }
std::size_t GrpcTransport::calls_in_flight() const {
  return impl_->outgoing.size() + (impl_->data ? impl_->data->calls_in_flight() : 0);
}

int GrpcTransport::data_port() const { return impl_->data ? impl_->data->port() : 0; }

GrpcTransportStats GrpcTransport::stats() const {
  GrpcTransportStats out;
  out.grpc_calls = impl_->grpc_calls;
  out.discoveries = impl_->discoveries;
  if (impl_->data) {
    const auto& d = impl_->data->stats();
    out.data_plane_calls = d.calls;
    out.data_plane_fallbacks = d.fallbacks;
    out.data_connections_opened = d.connections_opened;
    out.data_connections_accepted = d.connections_accepted;
    out.data_same_host_connections_opened = d.same_host_connections_opened;
    out.data_same_host_connections_accepted = d.same_host_connections_accepted;
    out.data_ring_frames_sent = d.ring_frames_sent;
    out.data_ring_bytes_sent = d.ring_bytes_sent;
    out.data_frames_rejected = d.frames_rejected;
    out.unauthenticated_refused += d.handshakes_refused;
    out.data_bytes_received = d.bytes_received;
    out.data_bytes_sent = d.bytes_sent;
  }
  out.unauthenticated_refused += impl_->server_shared->unauthenticated.load();
  return out;
}

}  // namespace twinps::net
