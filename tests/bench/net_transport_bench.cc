// Push -> pull round trips through two GrpcTransports in one process over
// 127.0.0.1, the shape of ps-lite's benchmark: a worker pushes N bytes, waits,
// pulls N bytes back, waits.
//
//   client: "worker:0", its executor driven by the benchmark thread (run_until)
//   server: "ps:0", its executor on a thread of its own (start()); a trivial
//           parameter "server": a push is a sink, a pull copies a stored
//           tensor of N bytes into the reply (as a real ps copies its shard).
//
// Counters: pairs/s (push+pull pairs), GB/s = payload bytes moved (N each way,
// 2N per pair) per second. Building the pushed gradient (a copy of N bytes that
// a real worker's computation would produce) is excluded from the timing for
// N >= 64 KiB; below that it is a few hundred ns and stays in.
//
// BM_PushPullPipelined keeps `depth` pairs in flight instead of one.
//
// BM_RawGrpcEcho is the ceiling: plain gRPC (callback API, generic ByteBuffer
// stub and service, same channel arguments) echoing N bytes, i.e. the same
// bytes moved per iteration as a pair, in one RPC, with no executors, no
// encoding and no copy into tensors.
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

#include "net/grpc_transport.h"
#include "net/proto/twinps.grpc.pb.h"

namespace twinps::net {
namespace {

const TaskId kWorker = TaskId::worker(0);
const TaskId kPs = TaskId::ps(0);

// TWINPS_BENCH_GRPC_ARGS="grpc.key=1,grpc.other=2" adds gRPC arguments (for tuning experiments).
GrpcTransportOptions tuning_from_env() {
  GrpcTransportOptions o;
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

  explicit Cluster(std::size_t bytes, GrpcTransportOptions tuning = tuning_from_env()) {
    const auto cols = static_cast<std::int64_t>(std::max<std::size_t>(bytes / sizeof(float), 1));
    stored = Matrix::Constant(1, cols, 0.5f);
    GrpcTransportOptions so = tuning;
    so.listen_address = "127.0.0.1:0";
    server = std::move(*GrpcTransport::create(kPs, server_ex, so));
    server->serve([this](IncomingCall call, Responder respond) {
      if (std::holds_alternative<PushRequest>(call.request)) {
        respond(Response(PushResponse{false}));
      } else {
        PullResponse out;
        out.items.push_back(PulledValue{stored, 0});
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

PushRequest make_push(const Matrix& gradient) {
  PushRequest push;
  push.updates.push_back(Update{0, Update::Op::kApplyGradient, false, {}, gradient, 0});
  return push;
}

PullRequest make_pull() { return PullRequest{{PullItem{0, true, {}}}}; }

// CPU seconds used so far by the whole process (every thread: gRPC's, both executors).
double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto secs = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; };
  return secs(u.ru_utime) + secs(u.ru_stime);
}

void report(benchmark::State& state, std::size_t bytes, double cpu_start) {
  const auto pairs = static_cast<double>(state.iterations());
  // Process CPU per pair: what the transport costs, independent of how busy the machine is.
  state.counters["cpu_us/pair"] = (process_cpu_seconds() - cpu_start) * 1e6 / std::max(pairs, 1.0);
  state.counters["pairs/s"] = benchmark::Counter(pairs, benchmark::Counter::kIsRate);
  state.counters["GB/s"] = benchmark::Counter(pairs * 2.0 * static_cast<double>(bytes) / 1e9, benchmark::Counter::kIsRate);
}

void BM_PushPull(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  Cluster c(bytes);
  const Matrix gradient = Matrix::Constant(1, c.stored.cols(), 0.25f);
  const bool exclude_build = bytes >= (64u << 10);
  bool ok = true;
  const double cpu_start = process_cpu_seconds();
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
  Cluster c(bytes);
  const Matrix gradient = Matrix::Constant(1, c.stored.cols(), 0.25f);
  bool ok = true;
  std::int64_t started = 0, finished = 0;
  const double cpu_start = process_cpu_seconds();
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
  const double cpu_start = process_cpu_seconds();
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
BENCHMARK(BM_PushPullPipelined)
    ->Args({4 << 10, 8})
    ->Args({1 << 20, 4})
    ->Args({16 << 20, 2})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RawGrpcEcho)->Arg(4 << 10)->Arg(1 << 20)->Arg(16 << 20)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace twinps::net

BENCHMARK_MAIN();
