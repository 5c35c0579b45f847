// Push -> pull round trips through two GrpcTransports in one process over
// 127.0.0.1, the shape of ps-lite's benchmark: a worker pushes N bytes, waits,
// pulls N bytes back, waits. Pull and Push take the TCP data plane (the
// default); TWINPS_BENCH_DATA_PLANE=grpc measures them over gRPC instead.
// (`twinps bench ps` measures the same against real ps processes.)
//
//   client: "worker:0", its executor driven by the benchmark thread (run_until)
//   server: "ps:0", its executor on a thread of its own (start())
//
// BM_PushPull measures the transport alone: the server is an echo/sink (a push
// keeps the pushed tensor, by move; a pull returns it, by move) and the worker
// pushes back what it pulled, so no byte is copied outside the transport.
// BM_PushPullCopying is closer to a parameter server: each push carries a
// fresh copy of the gradient (excluded from the timing for N >= 64 KiB) and a
// pull copies the stored tensor into the reply, as a ps copies its shard.
// BM_PushPullPipelined keeps `depth` copying pairs in flight instead of one.
//
// BM_RawGrpcEcho is the ceiling: plain gRPC (callback API, generic ByteBuffer
// stub and service, same channel arguments) echoing N bytes, i.e. the same
// bytes moved per iteration as a pair, in one RPC, with no executors, no
// encoding and no copy into tensors.
//
// main() applies net/allocator_tuning.h, as a twinps process would; set
// TWINPS_BENCH_DEFAULT_MALLOC=1 to measure with glibc's defaults.
//
// Counters: pairs/s; GB/s = payload bytes moved (N each way, 2N per pair) per
// second of wall time; cpu_us/pair = CPU time of the whole process (every
// thread) per pair, which varies less with the machine's load than wall time.
#include <benchmark/benchmark.h>

#include <sys/resource.h>

#include <cstdlib>
#include <memory>
#include <sstream>

#include <condition_variable>
#include <mutex>

#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include "net/allocator_tuning.h"
#include "net/grpc_transport.h"
#include "net/proto/twinps.grpc.pb.h"

namespace twinps::net {
namespace {

const TaskId kWorker = TaskId::worker(0);
const TaskId kPs = TaskId::ps(0);

// TWINPS_BENCH_GRPC_ARGS="grpc.key=1,grpc.other=2" adds gRPC arguments (for tuning experiments).
GrpcTransportOptions tuning_from_env() {
  GrpcTransportOptions o;
  // TWINPS_BENCH_DATA_PLANE=grpc measures Pull/Push over gRPC instead of the TCP data plane.
  if (const char* d = std::getenv("TWINPS_BENCH_DATA_PLANE"); d && std::string(d) == "grpc")
    o.data_plane = DataPlaneMode::kGrpc;
  if (const char* b = std::getenv("TWINPS_BENCH_DATA_SOCKBUF")) o.data_socket_buffer_bytes = std::stoi(b);
  if (const char* c = std::getenv("TWINPS_BENCH_DATA_CONNECTIONS")) o.data_connections_per_peer = std::stoi(c);
  const char* env = std::getenv("TWINPS_BENCH_GRPC_ARGS");
  if (!env) return o;
  std::stringstream ss(env);
  std::string item;
  while (std::getline(ss, item, ',')) {
    auto eq = item.find('=');
    if (eq != std::string::npos) o.grpc_int_args[item.substr(0, eq)] = std::stoi(item.substr(eq + 1));
  }
  if (const char* t = std::getenv("TWINPS_BENCH_ATTACHMENT_THRESHOLD")) o.attachment_threshold = std::stoul(t);
  if (const char* c = std::getenv("TWINPS_BENCH_CHANNELS")) o.channels_per_peer = std::stoi(c);
  return o;
}

struct Cluster {
  AsioExecutor client_ex;
  AsioExecutor server_ex;
  std::unique_ptr<GrpcTransport> server;
  std::unique_ptr<GrpcTransport> client;
  Matrix stored;  // what pulls return

  // echo: a push keeps its tensor (by move), a pull hands it back (by move).
  // Otherwise a push is dropped and a pull copies `stored` into the reply.
  Cluster(std::size_t bytes, bool echo, GrpcTransportOptions tuning = tuning_from_env()) {
    const auto cols = static_cast<std::int64_t>(std::max<std::size_t>(bytes / sizeof(float), 1));
    stored = Matrix::Constant(1, cols, 0.5f);
    GrpcTransportOptions so = tuning;
    so.listen_address = "127.0.0.1:0";
    server = std::move(*GrpcTransport::create(kPs, server_ex, so));
    server->serve([this, echo](IncomingCall call, Responder respond) {
      if (auto* push = std::get_if<PushRequest>(&call.request)) {
        if (echo) stored = std::move(push->updates[0].values);
        respond(Response(PushResponse{false, {}}));
      } else {
        PullResponse out;
        out.items.push_back(PulledValue{echo ? std::move(stored) : Matrix(stored), 0});
        respond(Response(std::move(out)));
      }
    });
    server_ex.start();
    GrpcTransportOptions co = tuning;
    co.resolve = address_map({{kPs, "127.0.0.1:" + std::to_string(server->port())}});
    client = std::move(*GrpcTransport::create(kWorker, client_ex, co));
  }
  ~Cluster() {
    client.reset();
    server_ex.run_sync([this] { server.reset(); });
    server_ex.stop();
  }
};

PushRequest make_push(Matrix gradient) {
  PushRequest push;
  push.updates.push_back(Update{0, Update::Op::kApplyGradient, false, {}, std::move(gradient), 0});
  return push;
}

PullRequest make_pull() { return PullRequest{{PullItem{0, true, {}}}}; }

// CPU seconds used so far by the whole process (every thread: gRPC's, both
// executors), and its page faults (fresh memory touched: allocator churn).
struct Usage {
  double cpu_seconds = 0;
  double page_faults = 0;
};
Usage process_usage() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto secs = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; };
  return {secs(u.ru_utime) + secs(u.ru_stime), static_cast<double>(u.ru_minflt + u.ru_majflt)};
}

void report(benchmark::State& state, std::size_t bytes, Usage start) {
  const auto pairs = std::max(static_cast<double>(state.iterations()), 1.0);
  const Usage end = process_usage();
  state.counters["cpu_us/pair"] = (end.cpu_seconds - start.cpu_seconds) * 1e6 / pairs;
  state.counters["faults/pair"] = (end.page_faults - start.page_faults) / pairs;
  state.counters["pairs/s"] = benchmark::Counter(pairs, benchmark::Counter::kIsRate);
  state.counters["GB/s"] = benchmark::Counter(pairs * 2.0 * static_cast<double>(bytes) / 1e9, benchmark::Counter::kIsRate);
}

void BM_PushPull(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  Cluster c(bytes, /*echo=*/true);
  Matrix tensor = c.stored;  // travels back and forth
  const auto size = tensor.size();
  bool ok = true;
  const Usage cpu_start = process_usage();
  for (auto _ : state) {
    int done = 0;
    c.client->call(kPs, make_push(std::move(tensor)), {}, [&](StatusOr<Response> r) {
      ok &= r.ok();
      ++done;
      c.client->call(kPs, make_pull(), {}, [&](StatusOr<Response> p) {
        ok &= p.ok();
        if (p.ok()) tensor = std::move(std::get<PullResponse>(*p).items[0].values);
        ++done;
      });
    });
    c.client_ex.run_until([&] { return done == 2; });
  }
  if (!ok || tensor.size() != size) state.SkipWithError("a call failed");
  report(state, bytes, cpu_start);
}

void BM_PushPullCopying(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  Cluster c(bytes, /*echo=*/false);
  const Matrix gradient = Matrix::Constant(1, c.stored.cols(), 0.25f);
  const bool exclude_build = bytes >= (64u << 10);
  bool ok = true;
  const Usage cpu_start = process_usage();
  for (auto _ : state) {
    if (exclude_build) state.PauseTiming();
    PushRequest push = make_push(gradient);
    if (exclude_build) state.ResumeTiming();
    int done = 0;
    c.client->call(kPs, std::move(push), {}, [&](StatusOr<Response> r) {
      ok &= r.ok();
      ++done;
      c.client->call(kPs, make_pull(), {}, [&](StatusOr<Response> p) {
        ok &= p.ok() && std::get<PullResponse>(*p).items[0].values.size() == c.stored.size();
        ++done;
      });
    });
    c.client_ex.run_until([&] { return done == 2; });
  }
  if (!ok) state.SkipWithError("a call failed");
  report(state, bytes, cpu_start);
}

void BM_PushPullPipelined(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  const int depth = static_cast<int>(state.range(1));
  Cluster c(bytes, /*echo=*/false);
  const Matrix gradient = Matrix::Constant(1, c.stored.cols(), 0.25f);
  bool ok = true;
  std::int64_t started = 0, finished = 0;
  const Usage cpu_start = process_usage();
  std::function<void()> start_pair = [&] {
    ++started;
    c.client->call(kPs, make_push(gradient), {}, [&](StatusOr<Response> r) {
      ok &= r.ok();
      c.client->call(kPs, make_pull(), {}, [&](StatusOr<Response> p) {
        ok &= p.ok();
        ++finished;
      });
    });
  };
  for (auto _ : state) {
    // Keep `depth` pairs in flight; each iteration is one finished pair.
    while (started - finished < depth) start_pair();
    const auto target = finished + 1;
    c.client_ex.run_until([&] { return finished >= target; });
  }
  c.client_ex.run_until([&] { return finished == started; });
  if (!ok) state.SkipWithError("a call failed");
  report(state, bytes, cpu_start);
}

class EchoService final : public wire::Twinps::WithRawCallbackMethod_Call<wire::Twinps::Service> {
 public:
  using wire::Twinps::WithRawCallbackMethod_Call<wire::Twinps::Service>::Call;
  grpc::ServerUnaryReactor* Call(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response) override {
    *response = *request;  // shares the slices
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

void BM_RawGrpcEcho(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  constexpr int kMax = 256 << 20;
  EchoService service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(kMax);
  builder.SetMaxSendMessageSize(kMax);
  builder.RegisterService(&service);
  auto server = builder.BuildAndStart();
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMax);
  args.SetMaxSendMessageSize(kMax);
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto channel = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials(), args);
  grpc::GenericStub stub(channel);
  std::string payload(bytes, 'x');
  grpc::Slice slice(payload);  // one copy up front; each call shares it
  bool ok = true;
  const Usage cpu_start = process_usage();
  for (auto _ : state) {
    grpc::ByteBuffer request(&slice, 1), response;
    grpc::ClientContext ctx;
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    stub.UnaryCall(&ctx, kCallMethod, grpc::StubOptions(), &request, &response, [&](grpc::Status st) {
      std::lock_guard lock(mu);
      ok &= st.ok();
      done = true;
      cv.notify_one();
    });
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return done; });
  }
  if (!ok) state.SkipWithError("a call failed");
  report(state, bytes, cpu_start);
  server->Shutdown();
}

BENCHMARK(BM_PushPull)->Arg(4 << 10)->Arg(1 << 20)->Arg(16 << 20)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PushPullCopying)->Arg(4 << 10)->Arg(1 << 20)->Arg(16 << 20)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PushPullPipelined)
    ->Args({4 << 10, 8})
    ->Args({1 << 20, 4})
    ->Args({16 << 20, 2})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RawGrpcEcho)->Arg(4 << 10)->Arg(1 << 20)->Arg(16 << 20)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace twinps::net

int main(int argc, char** argv) {
  // As a twinps process would (net/allocator_tuning.h); TWINPS_BENCH_DEFAULT_MALLOC=1 measures without.
  if (!std::getenv("TWINPS_BENCH_DEFAULT_MALLOC")) twinps::net::tune_allocator_for_large_tensors();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
