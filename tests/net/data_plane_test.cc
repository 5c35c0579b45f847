// What the TCP data plane adds to the transport contract (which
// transport_contract_test.cc runs on both planes): routing between the
// planes, discovery of a peer's data port (again after a restart), the Unix
// socket between tasks of one host (and TCP where it cannot be reached), several
// connections per peer, pipelined large replies, and frames from a client
// that does not follow the protocol. Waits are bounded; nothing asserts on timing.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <optional>

#include <gtest/gtest.h>

#include "core/ps/ps_node.h"
#include "core/runtime/trace.h"
#include "net/data_frame.h"
#include "net/data_plane.h"
#include "net/grpc_transport.h"
#include "net/security.h"
#include "tests/net/net_test_util.h"

namespace twinps::net {
namespace {

using testing::expect_eq;
using testing::ramp;
namespace df = dataframe;

constexpr Duration kBound = 30 * kSecond;
const TaskId kChief = TaskId::chief();
const TaskId kPs = TaskId::ps(0);

struct Book {
  std::shared_ptr<std::map<TaskId, std::string>> map = std::make_shared<std::map<TaskId, std::string>>();
  std::function<std::string(const TaskId&)> resolver() const {
    return [m = map](const TaskId& t) {
      auto it = m->find(t);
      return it == m->end() ? std::string() : it->second;
    };
  }
};

std::unique_ptr<GrpcTransport> make_server(const TaskId& self, AsioExecutor& ex, Book& book, GrpcTransportOptions o = {},
                                           int port = 0) {
  o.listen_address = "127.0.0.1:" + std::to_string(port);
  o.resolve = book.resolver();
  auto t = GrpcTransport::create(self, ex, std::move(o));
  EXPECT_TRUE(t.ok()) << t.status();
  if (!t.ok()) return nullptr;
  (*book.map)[self] = "127.0.0.1:" + std::to_string((*t)->port());
  return std::move(*t);
}

std::unique_ptr<GrpcTransport> make_client(const TaskId& self, AsioExecutor& ex, Book& book,
                                           GrpcTransportOptions o = {}) {
  o.resolve = book.resolver();
  auto t = GrpcTransport::create(self, ex, std::move(o));
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

StatusOr<Response> call_and_wait(AsioExecutor& ex, GrpcTransport& from, const TaskId& to, Request request,
                                 CallOptions options = {}) {
  std::optional<StatusOr<Response>> got;
  from.call(to, std::move(request), std::move(options), [&](StatusOr<Response> r) { got = std::move(r); });
  EXPECT_TRUE(ex.run_until([&] { return got.has_value(); }, ex.now() + kBound));
  if (!got) return absl::InternalError("test: no reply within the bound");
  return std::move(*got);
}

PushRequest push_of(Matrix values, std::uint32_t shard = 0) {
  PushRequest push;
  push.updates.push_back(Update{shard, Update::Op::kAdd, false, {}, std::move(values), 0});
  return push;
}

// A handler that answers a Push with its tensors (as pulled values), a Pull
// with `pull_reply`, and anything else with its task's health.
CallHandler echo_handler(const TaskId& self, Matrix pull_reply = Matrix()) {
  return [self, pull_reply](IncomingCall call, Responder respond) {
    if (auto* push = std::get_if<PushRequest>(&call.request)) {
      PullResponse out;
      for (auto& u : push->updates) out.items.push_back(PulledValue{std::move(u.values), u.counter_delta});
      respond(Response(std::move(out)));
    } else if (std::holds_alternative<PullRequest>(call.request)) {
      respond(Response(PullResponse{{PulledValue{pull_reply, 0}}}));
    } else {
      respond(Response(HealthResponse{self, 1}));
    }
  };
}

// Pushes `values` to an echo_handler and checks they come back unchanged.
void expect_echoed(AsioExecutor& ex, GrpcTransport& client, const Matrix& values) {
  auto pushed = call_and_wait(ex, client, kPs, push_of(values));
  ASSERT_TRUE(pushed.ok()) << pushed.status();
  expect_eq(std::get<PullResponse>(*pushed).items.at(0).values, values);
}

// A server task on an executor thread of its own, so the test thread can block on raw sockets.
struct ThreadedServer {
  AsioExecutor ex;
  std::unique_ptr<GrpcTransport> transport;
  ThreadedServer(Book& book, CallHandler handler, GrpcTransportOptions o = {}, int port = 0) {
    transport = make_server(kPs, ex, book, std::move(o), port);
    transport->serve(std::move(handler));
    ex.start();
  }
  GrpcTransportStats stats() {
    GrpcTransportStats s;
    ex.run_sync([&] { s = transport->stats(); });
    return s;
  }
  ~ThreadedServer() {
    ex.run_sync([&] { transport.reset(); });
    ex.stop();
  }
};

TEST(DataPlaneTest, PullAndPushTakeTheDataPlaneAndControlCallsTakeGrpc) {
  Book book;
  ThreadedServer server(book, echo_handler(kPs, ramp(3, 5)));
  AsioExecutor ex;
  auto client = make_client(kChief, ex, book);
  ASSERT_NE(server.transport->data_port(), 0);
  EXPECT_NE(server.transport->data_port(), server.transport->port());

  auto health = call_and_wait(ex, *client, kPs, HealthRequest{});
  ASSERT_TRUE(health.ok()) << health.status();
  auto pulled = call_and_wait(ex, *client, kPs, PullRequest{{PullItem{0, true, {}}}});
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  expect_eq(std::get<PullResponse>(*pulled).items.at(0).values, ramp(3, 5));
  auto pushed = call_and_wait(ex, *client, kPs, push_of(ramp(100, 100)));
  ASSERT_TRUE(pushed.ok()) << pushed.status();
  expect_eq(std::get<PullResponse>(*pushed).items.at(0).values, ramp(100, 100));

  const auto s = client->stats();
  EXPECT_EQ(s.grpc_calls, 1u) << "Health only";
  EXPECT_EQ(s.data_plane_calls, 2u);
  EXPECT_EQ(s.discoveries, 1u) << "asked once where ps:0's data plane is";
  EXPECT_EQ(s.data_connections_opened, 1u);
  EXPECT_EQ(server.stats().data_connections_accepted, 1u);
}

// Two tasks of one host: the data plane takes the Unix socket the peer
// announced (the same frames and handshake), unless either end is told
// tcp-only; a name made on another host, or one nobody listens on, is TCP.
TEST(DataPlaneTest, TasksOnOneHostUseTheUnixSocketAndOthersTcp) {
  for (bool same_host : {true, false}) {
    SCOPED_TRACE(same_host ? "default" : "tcp-only");
    Book book;
    GrpcTransportOptions o;
    o.data_same_host_socket = same_host;
    ThreadedServer server(book, echo_handler(kPs, ramp(300, 64)), o);
    AsioExecutor ex;
    auto client = make_client(kChief, ex, book, o);
    for (int i = 0; i < 3; ++i) ASSERT_NO_FATAL_FAILURE(expect_echoed(ex, *client, ramp(2000, 64)));
    const auto s = client->stats();
    EXPECT_EQ(s.data_plane_calls, 3u);
    EXPECT_EQ(s.data_connections_opened, 1u);
    EXPECT_EQ(s.data_same_host_connections_opened, same_host ? 1u : 0u);
    EXPECT_EQ(server.stats().data_same_host_connections_accepted, same_host ? 1u : 0u);
    // Each 500 KiB tensor went through shared memory, both ways.
    EXPECT_EQ(s.data_ring_frames_sent, same_host ? 3u : 0u);
    EXPECT_EQ(s.data_ring_bytes_sent, same_host ? 3u * 2000 * 64 * 4 : 0u);
    EXPECT_EQ(server.stats().data_ring_frames_sent, same_host ? 3u : 0u);
  }
}

// tcp-unix: the Unix socket without the rings; every byte on the socket.
TEST(DataPlaneTest, WithoutRingsTheUnixSocketCarriesTheTensors) {
  Book book;
  GrpcTransportOptions o;
  o.data_same_host_ring_bytes = 0;
  ThreadedServer server(book, echo_handler(kPs, ramp(300, 64)), o);
  AsioExecutor ex;
  auto client = make_client(kChief, ex, book, o);
  ASSERT_NO_FATAL_FAILURE(expect_echoed(ex, *client, ramp(2000, 64)));
  EXPECT_EQ(client->stats().data_same_host_connections_opened, 1u);
  EXPECT_EQ(client->stats().data_ring_frames_sent, 0u);
  EXPECT_EQ(server.stats().data_ring_frames_sent, 0u);
  EXPECT_GT(client->stats().data_bytes_sent, 2000u * 64 * 4);
}

// One end with rings, the other without: the one that offers finds its ring
// unmapped and keeps to the socket, and the calls go through.
TEST(DataPlaneTest, ARingOnlyOneEndWantsIsNotUsed) {
  for (const bool server_rings : {true, false}) {
    SCOPED_TRACE(server_rings ? "the callee offers" : "the caller offers");
    Book book;
    GrpcTransportOptions so, co;
    (server_rings ? co : so).data_same_host_ring_bytes = 0;
    ThreadedServer server(book, echo_handler(kPs, ramp(300, 64)), so);
    AsioExecutor ex;
    auto client = make_client(kChief, ex, book, co);
    ASSERT_NO_FATAL_FAILURE(expect_echoed(ex, *client, ramp(2000, 64)));
    EXPECT_EQ(client->stats().data_ring_frames_sent, 0u);
    EXPECT_EQ(server.stats().data_ring_frames_sent, 0u);
  }
}

// A ring smaller than a message: what does not fit goes over the socket,
// what fits through the ring, and a ring whose room comes back in order is
// used again and again (each call's tensors released before the next).
TEST(DataPlaneTest, WhatTheRingHasNoRoomForGoesOverTheSocket) {
  Book book;
  GrpcTransportOptions o;
  o.data_same_host_ring_bytes = 1 << 20;  // 1 MiB
  ThreadedServer server(book, echo_handler(kPs, ramp(300, 64)), o);
  AsioExecutor ex;
  auto client = make_client(kChief, ex, book, o);
  for (int i = 0; i < 6; ++i) {
    const std::int64_t rows = i % 2 == 0 ? 3000 : 1500;  // 750 KiB, fits; 375 KiB
    ASSERT_NO_FATAL_FAILURE(expect_echoed(ex, *client, ramp(rows, 64, static_cast<float>(i))));
  }
  ASSERT_NO_FATAL_FAILURE(expect_echoed(ex, *client, ramp(8000, 64)));  // 2 MiB: never fits
  EXPECT_EQ(client->stats().data_ring_frames_sent, 6u);
  EXPECT_EQ(server.stats().data_ring_frames_sent, 6u);
}

// A peer whose Unix socket cannot be reached from here (another network
// namespace of this host, say) is called over TCP after all.
TEST(DataPlaneTest, AnUnreachableSameHostSocketFallsBackToTcp) {
  Book book;
  ThreadedServer server(book, echo_handler(kPs, ramp(2, 2)));
  const int data_port = server.transport->data_port();
  ASSERT_NE(data_port, 0);
  AsioExecutor ex;
  DataPlaneOptions o;
  o.discover = [data_port](const TaskId&, Time, UniqueFunction<void(StatusOr<DataEndpoint>)> done) {
    // This boot's name, but for a port nobody here listens on.
    done(DataEndpoint{"127.0.0.1", data_port, same_host_socket_name(1)});
  };
  o.fallback = [](const TaskId&, Request, CallOptions, ResponseCallback done) {
    done(absl::InternalError("test: no gRPC fallback expected"));
  };
  DataPlane plane(kChief, ex, o);
  std::optional<StatusOr<Response>> got;
  plane.call(kPs, push_of(ramp(50, 8)), {}, [&](StatusOr<Response> r) { got = std::move(r); });
  ASSERT_TRUE(ex.run_until([&] { return got.has_value(); }, ex.now() + kBound));
  ASSERT_TRUE(got->ok()) << got->status();
  expect_eq(std::get<PullResponse>(**got).items.at(0).values, ramp(50, 8));
  EXPECT_EQ(plane.stats().connections_opened, 1u);
  EXPECT_EQ(plane.stats().same_host_connections_opened, 0u);
  EXPECT_EQ(server.stats().data_same_host_connections_accepted, 0u);
}

TEST(DataPlaneTest, ASameHostSocketNameIsOnlyTakenForThisBoot) {
  ASSERT_FALSE(this_boot_id().empty()) << "Linux always has /proc/sys/kernel/random/boot_id";
  EXPECT_TRUE(on_this_host(same_host_socket_name(4242)));
  EXPECT_FALSE(on_this_host("twinps-data-00000000-0000-0000-0000-000000000000-1-4242"));
  EXPECT_FALSE(on_this_host(""));
  EXPECT_NE(same_host_socket_name(1), same_host_socket_name(2)) << "one per data port";
}

TEST(DataPlaneTest, APeerAddressedByHostNameIsResolved) {
  Book book;
  ThreadedServer server(book, echo_handler(kPs, ramp(2, 3)));
  // The cluster names the peer "localhost": its data plane is found at that name too.
  (*book.map)[kPs] = "localhost:" + std::to_string(server.transport->port());
  AsioExecutor ex;
  auto client = make_client(kChief, ex, book);
  auto pulled = call_and_wait(ex, *client, kPs, PullRequest{});
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  expect_eq(std::get<PullResponse>(*pulled).items.at(0).values, ramp(2, 3));
  EXPECT_EQ(client->stats().data_connections_opened, 1u);
  EXPECT_EQ(client->stats().data_plane_fallbacks, 0u);
}

TEST(DataPlaneTest, APeerWithoutADataPlaneGetsPullAndPushOverGrpc) {
  Book book;
  GrpcTransportOptions grpc_only;
  grpc_only.data_plane = DataPlaneMode::kGrpc;
  ThreadedServer server(book, echo_handler(kPs, ramp(2, 2)), grpc_only);
  EXPECT_EQ(server.transport->data_port(), 0);
  AsioExecutor ex;
  auto client = make_client(kChief, ex, book);
  for (int i = 0; i < 2; ++i) {
    auto pulled = call_and_wait(ex, *client, kPs, PullRequest{{PullItem{0, true, {}}}});
    ASSERT_TRUE(pulled.ok()) << pulled.status();
    expect_eq(std::get<PullResponse>(*pulled).items.at(0).values, ramp(2, 2));
  }
  const auto s = client->stats();
  EXPECT_EQ(s.discoveries, 1u);
  EXPECT_EQ(s.data_plane_fallbacks, 2u);
  EXPECT_EQ(s.grpc_calls, 2u);
  EXPECT_EQ(s.data_connections_opened, 0u);
}

TEST(DataPlaneTest, ARestartedPeerIsFoundAgainOnItsNewDataPort) {
  Book book;
  AsioExecutor ex;
  auto client = make_client(kChief, ex, book);
  auto serve_incarnation = [](GrpcTransport& t, std::int64_t inc) {
    t.serve([inc](IncomingCall, Responder respond) { respond(Response(PullResponse{{PulledValue{Matrix(), inc}}})); });
  };
  auto server = make_server(kPs, ex, book);
  serve_incarnation(*server, 1);
  auto r = call_and_wait(ex, *client, kPs, PullRequest{});
  ASSERT_TRUE(r.ok()) << r.status();
  const int grpc_port = server->port();

  // A call in flight when the peer goes down fails, attributed to it.
  std::vector<Responder> parked;
  server->serve([&](IncomingCall, Responder respond) { parked.push_back(std::move(respond)); });
  std::optional<Status> in_flight;
  client->call(kPs, PullRequest{}, {}, [&](StatusOr<Response> got) { in_flight = got.status(); });
  ASSERT_TRUE(ex.run_until([&] { return parked.size() == 1; }, ex.now() + kBound));
  server.reset();
  ASSERT_TRUE(ex.run_until([&] { return in_flight.has_value(); }, ex.now() + kBound));
  EXPECT_EQ(in_flight->code(), StatusCode::kUnavailable) << *in_flight;
  EXPECT_EQ(failed_task(*in_flight), kPs);
  parked.clear();

  // Down: calls fail fast.
  r = call_and_wait(ex, *client, kPs, PullRequest{});
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status();
  EXPECT_EQ(failed_task(r.status()), kPs);

  // Back on the same gRPC port; its data plane listens wherever the OS put it.
  server = make_server(kPs, ex, book, {}, grpc_port);
  ASSERT_TRUE(server);
  serve_incarnation(*server, 2);
  const Time start = ex.now();
  for (;;) {
    r = call_and_wait(ex, *client, kPs, PullRequest{});
    if (r.ok() || ex.now() - start > kBound) break;
    EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status();
    ex.run_until([] { return false; }, ex.now() + 20 * kMillisecond);
  }
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(std::get<PullResponse>(*r).items.at(0).counter, 2);
  EXPECT_GE(client->stats().discoveries, 2u);
  EXPECT_GE(client->stats().data_connections_opened, 2u);
}

TEST(DataPlaneTest, SeveralConnectionsPerPeerCarryPipelinedCallsAndLargeReplies) {
  Book book;
  ThreadedServer server(book, echo_handler(kPs));
  AsioExecutor ex;
  GrpcTransportOptions o;
  o.data_connections_per_peer = 3;
  auto client = make_client(kChief, ex, book, o);
  // Sizes around the read buffer and the direct-read threshold, in-band and out of band.
  const std::vector<std::int64_t> cols = {1, 200, 513, 4096, 5000, 16384, 40000, 300000};
  constexpr int kCalls = 48;
  std::vector<int> completions(kCalls, 0);
  int ok = 0;
  for (int i = 0; i < kCalls; ++i) {
    PushRequest push;
    for (int k = 0; k < 3; ++k) {
      const auto c = cols[static_cast<std::size_t>(i + k) % cols.size()];
      push.updates.push_back(Update{0, Update::Op::kAdd, false, {}, ramp(1, c, static_cast<float>(i * 3 + k)), k});
    }
    client->call(kPs, push, {}, [&, i, push](StatusOr<Response> r) {
      ++completions[i];
      ASSERT_TRUE(r.ok()) << r.status();
      const auto& items = std::get<PullResponse>(*r).items;
      ASSERT_EQ(items.size(), 3u);
      for (int k = 0; k < 3; ++k) expect_eq(items[k].values, push.updates[k].values);
      ++ok;
    });
  }
  ASSERT_TRUE(ex.run_until([&] { return client->calls_in_flight() == 0; }, ex.now() + kBound));
  for (int i = 0; i < kCalls; ++i) EXPECT_EQ(completions[i], 1) << i;
  EXPECT_EQ(ok, kCalls);
  EXPECT_EQ(client->stats().data_connections_opened, 3u);
}

// Records each landed range of a request's tensors.
class RecordingObserver final : public ArrivalObserver {
 public:
  void arrived(const char* at, std::size_t bytes) override { pieces.emplace_back(at, bytes); }
  std::vector<std::pair<const char*, std::size_t>> pieces;
};

// The callee is shown every byte of a request's tensors as it lands, front to
// back, in more than one piece for a large one; the handler gets the observer
// the hook made. Over TCP and over the Unix socket; a small tensor travels in
// the request's metadata, which the hook is given whole.
TEST(DataPlaneTest, AnArrivalHookSeesEachTensorsBytesLandInOrder) {
  for (const bool same_host : {false, true}) {
    SCOPED_TRACE(same_host ? "Unix socket" : "TCP");
    Book book;
    std::shared_ptr<RecordingObserver> made;
    std::vector<std::pair<const char*, std::size_t>> pieces;  // of the request that reached the handler
    std::vector<std::pair<const char*, std::size_t>> tensors;  // where its tensors' bytes are
    bool handler_got_observer = false;
    GrpcTransportOptions so;
    so.data_same_host_socket = same_host;
    ThreadedServer server(book, echo_handler(kPs), so);
    server.ex.run_sync([&] {
      server.transport->observe_arrivals([&](const TaskId& from, RequestId, const Request& request) {
        EXPECT_EQ(from, kChief);
        made = std::holds_alternative<PushRequest>(request) ? std::make_shared<RecordingObserver>() : nullptr;
        return made;
      });
      server.transport->serve([&, echo = echo_handler(kPs)](IncomingCall call, Responder respond) {
        handler_got_observer = call.arrival != nullptr && call.arrival == made;
        pieces = made ? made->pieces : decltype(pieces){};
        for (const auto& u : std::get<PushRequest>(call.request).updates)
          tensors.emplace_back(reinterpret_cast<const char*>(u.values.data()), byte_size(u.values));
        echo(std::move(call), std::move(respond));
      });
    });
    AsioExecutor ex;
    GrpcTransportOptions co;
    co.data_same_host_socket = same_host;
    auto client = make_client(kChief, ex, book, co);
    PushRequest push = push_of(ramp(1, 1 << 20));  // 4 MiB
    push.updates.push_back(Update{0, Update::Op::kAdd, false, {}, ramp(2, 3), 0});
    auto pushed = call_and_wait(ex, *client, kPs, push);
    ASSERT_TRUE(pushed.ok()) << pushed.status();
    expect_eq(std::get<PullResponse>(*pushed).items.at(0).values, push.updates[0].values);
    EXPECT_TRUE(handler_got_observer);
    EXPECT_EQ(client->stats().data_same_host_connections_opened, same_host ? 1u : 0u);

    ASSERT_EQ(tensors.size(), 2u);
    for (std::size_t t = 0; t < tensors.size(); ++t) {
      // Every piece inside one tensor, the tensor's pieces contiguous from its front.
      std::size_t landed = 0, count = 0;
      for (const auto& [at, bytes] : pieces) {
        if (at < tensors[t].first || at >= tensors[t].first + tensors[t].second) continue;
        EXPECT_EQ(at, tensors[t].first + landed) << "tensor " << t << " piece " << count;
        EXPECT_LE(at + bytes, tensors[t].first + tensors[t].second);
        landed += bytes;
        ++count;
      }
      if (t == 0) {
        EXPECT_EQ(landed, tensors[t].second);
        EXPECT_GT(count, 1u) << "a 4 MiB tensor lands in pieces";
      } else {
        EXPECT_EQ(landed, 0u) << "a small tensor comes inside the request's metadata";
      }
    }
  }
}

// A parameter server over the real transport applies a large dense gradient
// from the next value it computed while the gradient arrived, and the result
// is what SGD gives.
TEST(DataPlaneTest, APsAppliesALargeGradientComputedAsItArrived) {
  Book book;
  AsioExecutor ps_ex;
  auto ps_transport = make_server(kPs, ps_ex, book);
  NullTraceSink trace;
  Runtime runtime{kPs, 1, ps_ex, *ps_transport, trace, RandomStream(1)};
  auto ps = std::make_unique<ParameterServerNode>(runtime);  // before the executor's thread runs
  ps_ex.start();
  AsioExecutor ex;
  auto client = make_client(kChief, ex, book);

  constexpr std::int64_t kCols = 1 << 18;  // 1 MiB
  CreateShardsRequest create;
  create.optimizer.learning_rate = LearningRateSchedule::constant(0.5);
  ShardState w;
  w.spec = ShardSpec{1, "w", VariableKind::kTrainable, 1, kCols};
  w.value = ramp(1, kCols, 1.0f);
  create.shards = {w};
  ASSERT_TRUE(call_and_wait(ex, *client, kPs, create).ok());
  PushRequest push;
  push.updates.push_back(Update{1, Update::Op::kApplyGradient, false, {}, ramp(1, kCols, 0.25f), 0});
  auto pushed = call_and_wait(ex, *client, kPs, push);
  ASSERT_TRUE(pushed.ok()) << pushed.status();
  auto pulled = call_and_wait(ex, *client, kPs, PullRequest{{PullItem{1, true, {}}}});
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  const Matrix expected = (w.value.array() - 0.5f * push.updates[0].values.array()).matrix();
  expect_eq(std::get<PullResponse>(*pulled).items.at(0).values, expected);

  ParameterStoreStats stats;
  ps_ex.run_sync([&] { stats = ps->store().stats(); });
  EXPECT_EQ(stats.optimizer_steps, 1u);
  EXPECT_EQ(stats.updates_computed_on_arrival, 1u);
  ps_ex.run_sync([&] {
    ps.reset();
    ps_transport.reset();
  });
  ps_ex.stop();
}

TEST(DataPlaneTest, AReplyOverTheCallersLimitIsRefusedAndTheConnectionGoesOn) {
  Book book;
  ThreadedServer server(book, echo_handler(kPs, ramp(1024, 512)));  // 2 MiB pulls
  AsioExecutor ex;
  GrpcTransportOptions o;
  o.max_message_bytes = 1 << 20;
  auto client = make_client(kChief, ex, book, o);
  auto r = call_and_wait(ex, *client, kPs, PullRequest{});
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted) << r.status();
  EXPECT_EQ(failed_task(r.status()), kPs);
  r = call_and_wait(ex, *client, kPs, push_of(ramp(2, 2)));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(client->stats().data_connections_opened, 1u) << "the same connection served on";
}

// ------------------------------------------------------------------ raw frames

// A blocking TCP client speaking (or not) the data plane's protocol.
class RawConnection {
 public:
  explicit RawConnection(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~RawConnection() { ::close(fd_); }
  bool connected() const { return connected_; }

  void send_raw(const std::string& bytes) {
    std::size_t off = 0;
    while (off < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return;  // the server may have closed: the test reads that
      off += static_cast<std::size_t>(n);
    }
  }
  static std::string frame(df::Kind kind, std::uint64_t call_id, const std::string& envelope,
                           const std::string& attachments, std::optional<std::uint64_t> declared = {}) {
    df::Header h;
    h.kind = kind;
    h.call_id = call_id;
    h.envelope_bytes = static_cast<std::uint32_t>(envelope.size());
    h.attachment_bytes = declared.value_or(attachments.size());
    std::string out(df::kHeaderBytes, '\0');
    df::encode_header(h, reinterpret_cast<std::uint8_t*>(out.data()));
    return out + envelope + attachments;
  }
  // The handshake: reads the challenge, sends the hello with its proof
  // (of `token`: none by default, as the test servers have none); reads the
  // answer when the callee will give one (not to a hello for another task).
  void hello(const TaskId& to = kPs, const std::string& token = "") {
    df::Header h;
    std::string env, att;
    wire::DataPlaneChallenge challenge;
    ASSERT_TRUE(read_frame(&h, &env, &att));
    ASSERT_EQ(h.kind, df::Kind::kChallenge);
    ASSERT_TRUE(challenge.ParseFromString(env));
    const std::string nonce(kNonceBytes, 'n');
    wire::DataPlaneHello hello;
    to_proto(TaskId::worker(7), hello.mutable_from());
    to_proto(to, hello.mutable_to());
    hello.set_nonce(nonce);
    hello.set_proof(hello_proof(token, challenge.nonce(), nonce, TaskId::worker(7), to));
    send_raw(frame(df::Kind::kHello, 0, hello.SerializeAsString(), ""));
    if (to != kPs) return;
    ASSERT_TRUE(read_frame(&h, &env, &att));
    ASSERT_EQ(h.kind, df::Kind::kHelloAck);
  }
  // Reads the challenge and ignores it (a peer that skips the handshake).
  void skip_challenge() {
    df::Header h;
    std::string env, att;
    ASSERT_TRUE(read_frame(&h, &env, &att));
    ASSERT_EQ(h.kind, df::Kind::kChallenge);
  }
  void request(std::uint64_t id, const wire::RpcRequest& envelope, const std::string& attachments = "") {
    send_raw(frame(df::Kind::kRequest, id, envelope.SerializeAsString(), attachments));
  }

  // Reads one frame (false on EOF, error or after the bound).
  bool read_frame(df::Header* h, std::string* envelope, std::string* attachments) {
    std::string head;
    if (!read_exact(df::kHeaderBytes, &head)) return false;
    if (!df::decode_header(reinterpret_cast<const std::uint8_t*>(head.data()), h)) return false;
    return read_exact(h->envelope_bytes, envelope) && read_exact(h->attachment_bytes, attachments);
  }
  // A response to `id`: its status (transport error or handler error) or its response.
  StatusOr<wire::Response> response(std::uint64_t id, bool* transport_error = nullptr, std::string* attachments = nullptr) {
    df::Header h;
    std::string env, att;
    if (!read_frame(&h, &env, &att)) return absl::InternalError("test: no frame");
    EXPECT_EQ(h.kind, df::Kind::kResponse);
    EXPECT_EQ(h.call_id, id);
    if (transport_error) *transport_error = h.flags & df::kTransportError;
    if (attachments) *attachments = att;
    wire::RpcResponse r;
    if (!r.ParseFromString(env)) return absl::InternalError("test: unparsable response");
    if (r.has_status() && r.status().code() != 0)
      return Status(static_cast<StatusCode>(r.status().code()), r.status().message());
    return r.response();
  }
  // True once the server has closed the connection (within the bound).
  bool closed_by_server() {
    char c;
    for (;;) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(kBound / kMillisecond)) <= 0) return false;
      const ssize_t n = ::recv(fd_, &c, 1, 0);
      if (n <= 0) return true;  // EOF or reset
    }
  }

 private:
  bool read_exact(std::uint64_t n, std::string* out) {
    out->resize(static_cast<std::size_t>(n));
    std::size_t off = 0;
    while (off < n) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(kBound / kMillisecond)) <= 0) return false;
      const ssize_t k = ::recv(fd_, out->data() + off, static_cast<std::size_t>(n) - off, 0);
      if (k <= 0) return false;
      off += static_cast<std::size_t>(k);
    }
    return true;
  }
  int fd_ = -1;
  bool connected_ = false;
};

std::string bytes_of(const Matrix& m) { return std::string(reinterpret_cast<const char*>(m.data()), byte_size(m)); }

wire::RpcRequest push_envelope(const std::vector<std::pair<Matrix, std::uint64_t>>& tensors_at) {
  wire::RpcRequest env;
  to_proto(TaskId::worker(7), env.mutable_from());
  auto* push = env.mutable_request()->mutable_push();
  for (const auto& [m, offset] : tensors_at) {
    auto* t = push->add_updates()->mutable_values();
    t->set_rows(m.rows());
    t->set_cols(m.cols());
    t->set_attachment_offset(offset);
  }
  return env;
}

TEST(DataPlaneTest, MalformedOrOversizedFramesAreAnsweredAndTheConnectionGoesOn) {
  Book book;
  GrpcTransportOptions small;
  small.max_message_bytes = 1 << 20;
  std::atomic<int> handled{0};
  ThreadedServer server(book, [&](IncomingCall call, Responder respond) {
    handled.fetch_add(1);
    echo_handler(kPs)(std::move(call), std::move(respond));
  }, small);
  RawConnection raw(server.transport->data_port());
  ASSERT_TRUE(raw.connected());
  raw.hello();
  bool transport_error = false;

  // An envelope that is not a protobuf.
  raw.send_raw(RawConnection::frame(df::Kind::kRequest, 1, "\xff\xff\xff", ""));
  auto r = raw.response(1, &transport_error);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status();
  EXPECT_TRUE(transport_error);
  EXPECT_NE(r.status().message().find("does not parse"), std::string::npos) << r.status();

  // A tensor whose attachment range lies outside the frame's attachments (whose bytes are skipped).
  const Matrix m = ramp(2, 4);
  raw.request(2, push_envelope({{m, 8}}), bytes_of(m));
  r = raw.response(2, &transport_error);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status();
  EXPECT_NE(r.status().message().find("Request.push.updates[0].values.attachment_offset"), std::string::npos)
      << r.status();

  // A request over the server's limit: refused, its bytes skipped.
  const Matrix big = ramp(1024, 300);  // 1.2 MB
  raw.request(3, push_envelope({{big, 0}}), bytes_of(big));
  r = raw.response(3, &transport_error);
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted) << r.status();
  EXPECT_TRUE(transport_error);
  EXPECT_EQ(handled, 0);

  // Tensors that do not tile the attachments (a gap, then a tensor read out of order) still arrive intact.
  const Matrix a = ramp(1, 4, 1.0f), b = ramp(1, 4, 9.0f);
  std::string att = bytes_of(b) + std::string(16, '\x7f') + bytes_of(a);  // b at 0, a at 32
  raw.request(4, push_envelope({{a, 32}, {b, 0}}), att);
  r = raw.response(4, &transport_error);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->pull().items_size(), 2);
  Matrix got_a, got_b;
  ASSERT_TRUE(from_proto(r->pull().items(0).values(), &got_a).ok());
  ASSERT_TRUE(from_proto(r->pull().items(1).values(), &got_b).ok());
  expect_eq(got_a, a);
  expect_eq(got_b, b);
  EXPECT_EQ(handled, 1);

  // Cancelling an unknown call is harmless; a good request is still served on this connection.
  raw.send_raw(RawConnection::frame(df::Kind::kCancel, 99, "", ""));
  wire::RpcRequest pull;
  to_proto(TaskId::worker(7), pull.mutable_from());
  pull.mutable_request()->mutable_pull();
  raw.request(5, pull);
  r = raw.response(5, &transport_error);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(transport_error);
  EXPECT_EQ(handled, 2);
  EXPECT_GE(server.stats().data_frames_rejected, 3u);
}

TEST(DataPlaneTest, AByteStreamThatIsNotTheProtocolEndsOnlyItsOwnConnection) {
  Book book;
  ThreadedServer server(book, echo_handler(kPs, ramp(1, 3)));
  AsioExecutor ex;
  auto client = make_client(kChief, ex, book);
  // A good caller holds a call open across the misbehaviour of others.
  auto r = call_and_wait(ex, *client, kPs, PullRequest{});
  ASSERT_TRUE(r.ok()) << r.status();

  const int port = server.transport->data_port();
  {
    RawConnection raw(port);
    raw.hello();
    raw.send_raw(std::string(df::kHeaderBytes, 'G'));  // not a header
    EXPECT_TRUE(raw.closed_by_server());
  }
  {
    RawConnection raw(port);
    raw.skip_challenge();
    wire::RpcRequest pull;
    pull.mutable_request()->mutable_pull();
    raw.request(1, pull);  // before any hello
    EXPECT_TRUE(raw.closed_by_server());
  }
  {
    RawConnection raw(port);
    raw.hello(TaskId::ps(7));  // meant for another task (a stale port)
    EXPECT_TRUE(raw.closed_by_server());
  }
  {
    // Tensors said to lie in a shared ring this connection never set up (a
    // TCP connection has none).
    RawConnection raw(port);
    raw.hello();
    wire::RpcRequest pull;
    pull.mutable_request()->mutable_pull();
    df::Header h;
    h.kind = df::Kind::kRequest;
    h.flags = df::kInRing;
    h.call_id = 1;
    h.envelope_bytes = static_cast<std::uint32_t>(pull.ByteSizeLong());
    h.attachment_bytes = 4096;
    std::string f(df::kHeaderBytes, '\0');
    df::encode_header(h, reinterpret_cast<std::uint8_t*>(f.data()));
    raw.send_raw(f + pull.SerializeAsString());
    EXPECT_TRUE(raw.closed_by_server());
  }
  {
    RawConnection raw(port);
    raw.hello();
    wire::RpcRequest pull;
    pull.mutable_request()->mutable_pull();
    raw.request(1, pull);
    raw.request(1, pull);  // a call id may be used again once its call was answered
    for (int i = 0; i < 2; ++i) {
      df::Header h;
      std::string env, att;
      EXPECT_TRUE(raw.read_frame(&h, &env, &att));
      EXPECT_EQ(h.call_id, 1u);
    }
  }
  for (int i = 0; i < 3; ++i) {
    r = call_and_wait(ex, *client, kPs, PullRequest{});
    ASSERT_TRUE(r.ok()) << r.status();
    expect_eq(std::get<PullResponse>(*r).items.at(0).values, ramp(1, 3));
  }
  EXPECT_EQ(client->stats().data_connections_opened, 1u) << "the good caller's connection survived";
  EXPECT_GE(server.stats().data_frames_rejected, 3u);
}

TEST(DataPlaneTest, AFrameHeaderCarriesARingOffsetOnlyWithItsFlag) {
  df::Header h;
  h.kind = df::Kind::kResponse;
  h.flags = df::kInRing | df::kTransportError;
  h.call_id = 42;
  h.envelope_bytes = 7;
  h.attachment_bytes = 1 << 20;
  h.ring_offset = 123456;
  std::uint8_t bytes[df::kHeaderBytes];
  df::encode_header(h, bytes);
  df::Header back;
  ASSERT_TRUE(df::decode_header(bytes, &back));
  EXPECT_EQ(back.flags, h.flags);
  EXPECT_EQ(back.ring_offset, 123456u);
  EXPECT_EQ(back.attachment_bytes, std::uint64_t{1} << 20);
  // Without the flag the offset is neither written nor accepted.
  h.flags = 0;
  df::encode_header(h, bytes);
  ASSERT_TRUE(df::decode_header(bytes, &back));
  EXPECT_EQ(back.ring_offset, 0u);
  bytes[20] = 1;
  EXPECT_FALSE(df::decode_header(bytes, &back));
  bytes[20] = 0;
  bytes[6] = 0x80;  // a flag nobody defined
  EXPECT_FALSE(df::decode_header(bytes, &back));
}

TEST(DataPlaneTest, SplitHostPort) {
  std::string host;
  int port = 0;
  EXPECT_TRUE(split_host_port("127.0.0.1:2222", &host, &port));
  EXPECT_EQ(host, "127.0.0.1");
  EXPECT_EQ(port, 2222);
  EXPECT_TRUE(split_host_port("[::1]:0", &host, &port));
  EXPECT_EQ(host, "::1");
  EXPECT_EQ(port, 0);
  EXPECT_TRUE(split_host_port("ps-0.example:80", &host, &port));
  EXPECT_EQ(host, "ps-0.example");
  for (const char* bad : {"", "host", ":80", "host:", "host:99999", "host:8x", "[::1]80", "[::1"})
    EXPECT_FALSE(split_host_port(bad, &host, &port)) << bad;
}

}  // namespace
}  // namespace twinps::net
