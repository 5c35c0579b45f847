// twinps bench ps: push/pull throughput against real parameter-server
// processes on loopback — the shape of ps-lite's benchmark (tests/
// test_benchmark.cc): S server processes (`twinps serve --role ps`), W worker
// processes that each push and pull K keys of N floats, over and over.
//
//   parent     starts the servers, creates the keys (CreateShards, SGD), starts
//              the load generators, gathers their counts, prints the summary;
//   generator  this binary again (`--load-generator`), one process per worker,
//              as worker:i with its own executor and transport, driving calls
//              from its main thread.
//
// Every generator counts the push->pull pairs it completes in each of
// --repeats windows of --window seconds, all windows aligned on a common start
// (CLOCK_MONOTONIC is shared by the processes); per window the parent sums over
// workers. Modes (per key and iteration; an iteration covers every key and
// waits for all of them, as ps-lite's does):
//   pipelined   push then pull issued back to back, both in flight (ps-lite's PUSH_PULL);
//   sequential  push, wait, pull, wait — one message in flight per worker;
//   push-then-pull  every key's push at once, wait for all, then every key's
//               pull, wait for all: one message in flight per worker and
//               server (ps-lite's PUSH_THEN_PULL, and what its KVWorker does
//               for `Wait(Push(keys)); Wait(Pull(keys))`);
//   push-pull   one Push carrying the pull (then_pull): one round trip.
// With --tls the same load runs three times in one invocation — plain;
// gRPC over TLS with the data plane in clear but token-authenticated; TLS on
// both planes — with a throwaway CA made for the run (net/throwaway_pki.h),
// and the table gives each one's throughput relative to plain.
// A pair moves N floats each way (or the pulled rows with --pull rows). GB/s
// counts both directions; "goodput" counts one, as ps-lite's benchmark prints it.
// The servers run the real ParameterStore: each push is validated and applied
// by SGD, each pull copies the shard into the reply (ps-lite's benchmark
// server neither sums nor copies).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <numeric>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/runtime/block_on.h"
#include "net/allocator_tuning.h"
#include "net/grpc_transport.h"
#include "net/throwaway_pki.h"
#include "tools/cli.h"
#include "tools/commands/commands.h"
#include "tools/data_plane_flag.h"
#include "tools/serving_flags.h"
#include "tools/serving_line.h"
#include "tools/subprocess.h"
#include "tools/tf_config.h"

namespace twinps::cli {
namespace {

struct BenchConfig {
  int servers = 1;
  int workers = 1;
  int keys = 0;  // 0: one per server
  std::int64_t values_per_key = 262144;
  std::int64_t rows = 1;
  bool row_pulls = false;
  std::int64_t rows_per_pull = 0;  // 0: rows / 8 (at least 1)
  std::string mode = "pipelined";
  // What a push does on the ps: "sgd" or "adam" (the optimizer's apply, with
  // a learning rate so small that values stay put) or "none" (the ps stores
  // the pushed values, as a key-value store such as ps-lite's default
  // handler does: comparisons with a store-only server are like for like).
  std::string optimizer = "sgd";
  int repeats = 5;
  double window = 2.0;
  double warmup = 1.0;
  std::string data_plane = "tcp";
  net::GrpcTransportOptions transport;  // from --data-plane and the security flags
  std::size_t max_message_mb = 512;
  std::vector<std::string> security_args;  // passed on to the servers and generators
  bool quiet = false;                      // --tls: one summary table at the end
};

std::int64_t cols_of(const BenchConfig& c) { return c.values_per_key / c.rows; }
ShardId shard_of(int key) { return static_cast<ShardId>(key + 1); }
int ps_of(const BenchConfig& c, int key) { return key % c.servers; }

// How the parent starts this command again as a load generator.
const std::vector<std::string> kThisCommand = {"bench", "ps"};

std::int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Rows a worker pulls (and pushes gradients for) from each key: spread over the shard.
RowIds pulled_rows(const BenchConfig& c, int worker, int key) {
  RowIds ids(static_cast<std::size_t>(c.rows_per_pull));
  const std::int64_t stride = std::max<std::int64_t>(c.rows / c.rows_per_pull, 1);
  for (std::int64_t i = 0; i < c.rows_per_pull; ++i)
    ids[static_cast<std::size_t>(i)] = (i * stride + worker + key) % c.rows;
  return ids;
}

// ================================================================== load generator

class LoadGenerator {
 public:
  LoadGenerator(const BenchConfig& c, int index, std::unique_ptr<net::GrpcTransport> transport,
                net::AsioExecutor& ex, std::int64_t start_ns)
      : c_(c), index_(index), ex_(ex), transport_(std::move(transport)), start_ns_(start_ns),
        counts_(static_cast<std::size_t>(c.repeats), 0) {
    const std::int64_t cols = cols_of(c);
    for (int k = 0; k < c.keys; ++k) {
      buffers_.push_back(Matrix::Constant(c.row_pulls ? c.rows_per_pull : c.rows, cols, 1e-3f));
      rows_.push_back(c.row_pulls ? pulled_rows(c, index, k) : RowIds());
    }
    pair_bytes_ = 2.0 * static_cast<double>(byte_size(buffers_[0]));
  }

  // Runs until the last window closes; false (after printing why) on an error.
  bool run() {
    end_ns_ = start_ns_ + static_cast<std::int64_t>(c_.repeats * c_.window * 1e9);
    next_iteration();
    ex_.run_until([&] { return finished_ || failed_; });
    if (failed_) return false;
    nlohmann::json out;
    out["worker"] = index_;
    out["pairs"] = counts_;
    out["pair_bytes"] = pair_bytes_;
    out["calls_per_pair"] = c_.mode == "push-pull" ? 1 : 2;
    std::printf("%s\n", out.dump().c_str());
    std::fflush(stdout);
    return true;
  }

 private:
  CallOptions options(bool push) {
    CallOptions o;
    o.deadline = ex_.now() + 30 * kSecond;
    if (push) o.request_id = (static_cast<RequestId>(index_ + 1) << 40) + ++request_counter_;
    return o;
  }

  PushRequest push_request(int k, bool with_pull) {
    PushRequest push;
    Update u;
    u.shard = shard_of(k);
    u.op = c_.optimizer == "none" ? Update::Op::kAssign : Update::Op::kApplyGradient;
    u.sparse = c_.row_pulls;
    u.rows = rows_[static_cast<std::size_t>(k)];
    u.values = std::move(buffers_[static_cast<std::size_t>(k)]);  // the last pull's values travel back
    push.updates.push_back(std::move(u));
    if (with_pull) push.then_pull = pull_request(k);
    return push;
  }
  PullRequest pull_request(int k) {
    return PullRequest{{PullItem{shard_of(k), !c_.row_pulls, rows_[static_cast<std::size_t>(k)]}}};
  }

  void fail(const Status& s) {
    if (!failed_) std::fprintf(stderr, "twinps bench ps: worker %d: %s\n", index_, describe(s).c_str());
    failed_ = true;
  }

  void pair_done(int k, Matrix values) {
    buffers_[static_cast<std::size_t>(k)] = std::move(values);
    const std::int64_t now = steady_now_ns();
    if (now >= start_ns_ && now < end_ns_) {
      const auto w = static_cast<std::size_t>((now - start_ns_) / static_cast<std::int64_t>(c_.window * 1e9));
      if (w < counts_.size()) ++counts_[w];
    }
    if (--outstanding_ == 0) next_iteration();
  }

  void next_iteration() {
    if (failed_) return;
    if (steady_now_ns() >= end_ns_) {
      finished_ = true;
      return;
    }
    outstanding_ = c_.keys;
    if (c_.mode == "sequential") return sequential(0);
    if (c_.mode == "push-then-pull") return push_then_pull();
    for (int k = 0; k < c_.keys; ++k) {
      const TaskId ps = TaskId::ps(ps_of(c_, k));
      if (c_.mode == "push-pull") {
        transport_->call(ps, push_request(k, true), options(true), [this, k](StatusOr<Response> r) {
          auto push = response_as<PushResponse>(std::move(r));
          if (!push.ok()) return fail(push.status());
          if (push->pulled.items.size() != 1) return fail(absl::InternalError("no pulled values"));
          pair_done(k, std::move(push->pulled.items[0].values));
        });
        continue;
      }
      transport_->call(ps, push_request(k, false), options(true), [this](StatusOr<Response> r) {
        if (!r.ok()) fail(r.status());
      });
      pull(k);
    }
  }

  // Pulls key k; `then` runs after the pair is counted, unless it failed.
  void pull(int k, std::function<void()> then = nullptr) {
    transport_->call(TaskId::ps(ps_of(c_, k)), pull_request(k), options(false),
                     [this, k, then = std::move(then)](StatusOr<Response> r) {
                       auto pulled = response_as<PullResponse>(std::move(r));
                       if (!pulled.ok()) return fail(pulled.status());
                       pair_done(k, std::move(pulled->items.at(0).values));
                       if (then && !failed_) then();
                     });
  }

  void sequential(int k) {
    const TaskId ps = TaskId::ps(ps_of(c_, k));
    transport_->call(ps, push_request(k, false), options(true), [this, k](StatusOr<Response> r) {
      if (!r.ok()) return fail(r.status());
      if (k + 1 < c_.keys) return pull(k, [this, k] { sequential(k + 1); });
      pull(k);
    });
  }

  void push_then_pull() {
    pushes_left_ = c_.keys;
    for (int k = 0; k < c_.keys; ++k) {
      transport_->call(TaskId::ps(ps_of(c_, k)), push_request(k, false), options(true), [this](StatusOr<Response> r) {
        if (!r.ok()) return fail(r.status());
        if (--pushes_left_ > 0 || failed_) return;
        for (int key = 0; key < c_.keys; ++key) pull(key);
      });
    }
  }

  const BenchConfig& c_;
  int index_;
  net::AsioExecutor& ex_;
  std::unique_ptr<net::GrpcTransport> transport_;
  std::int64_t start_ns_, end_ns_ = 0;
  std::vector<Matrix> buffers_;
  std::vector<RowIds> rows_;
  std::vector<std::uint64_t> counts_;
  double pair_bytes_ = 0;
  std::uint64_t request_counter_ = 0;
  int outstanding_ = 0;
  int pushes_left_ = 0;  // push-then-pull: pushes of this iteration not yet answered
  bool finished_ = false, failed_ = false;
};

int run_load_generator(const BenchConfig& c, int index, const std::string& tf_config, std::int64_t start_ns) {
  auto tfc = parse_tf_config(tf_config, "--tf-config");
  if (!tfc.ok()) {
    std::fprintf(stderr, "twinps bench ps: %s\n", std::string(tfc.status().message()).c_str());
    return kExitBadInput;
  }
  net::AsioExecutor ex;
  net::GrpcTransportOptions o = c.transport;
  o.resolve = resolver(tfc->cluster);
  o.max_message_bytes = c.max_message_mb << 20;
  auto transport = net::GrpcTransport::create(TaskId::worker(index), ex, o);
  if (!transport.ok()) {
    std::fprintf(stderr, "twinps bench ps: %s\n", describe(transport.status()).c_str());
    return kExitFailed;
  }
  LoadGenerator gen(c, index, std::move(*transport), ex, start_ns);
  return gen.run() ? kExitOk : kExitFailed;
}

// ================================================================== parent

struct Summary {
  double median = 0, min = 0, max = 0;
};
Summary summarize(std::vector<double> v) {
  Summary s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.min = v.front();
  s.max = v.back();
  s.median = v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  return s;
}
std::string show(const Summary& s, const char* fmt) {
  return format(fmt, s.median) + "  [" + format(fmt, s.min) + " .. " + format(fmt, s.max) + "]";
}

// Creates every key on its ps; the bench is their coordinator, unfenced.
Status create_keys(const BenchConfig& c, const std::function<std::string(const TaskId&)>& resolve) {
  net::AsioExecutor ex;
  net::GrpcTransportOptions o;
  o.resolve = resolve;
  o.max_message_bytes = c.max_message_mb << 20;
  o.security = c.transport.security;
  auto transport = net::GrpcTransport::create(TaskId::chief(), ex, o);
  if (!transport.ok()) return transport.status();
  std::map<int, CreateShardsRequest> per_ps;
  for (int k = 0; k < c.keys; ++k) {
    auto& req = per_ps[ps_of(c, k)];
    req.optimizer.kind = c.optimizer == "adam" ? OptimizerConfig::Kind::kAdam : OptimizerConfig::Kind::kSgd;
    req.optimizer.learning_rate = LearningRateSchedule::constant(1e-9);  // values stay put, and finite
    // Store-only keys are accumulators: a push assigns, no optimizer runs.
    const VariableKind kind = c.optimizer == "none" ? VariableKind::kAccumulator : VariableKind::kTrainable;
    ShardState shard;
    shard.spec = ShardSpec{shard_of(k), "key_" + std::to_string(k), kind, c.rows, cols_of(c)};
    shard.value = Matrix::Constant(c.rows, cols_of(c), 0.5f);
    req.shards.push_back(std::move(shard));
  }
  for (auto& [ps, req] : per_ps) {
    // The ps may still be starting its gRPC server: retry briefly.
    StatusOr<Response> r = absl::UnavailableError("not tried");
    for (int attempt = 0; attempt < 100; ++attempt) {
      auto f = call_async(ex, **transport, TaskId::ps(ps), req, CallOptions{ex.now() + 30 * kSecond, {}, 0});
      auto got = block_on(ex, [](Future<StatusOr<Response>> f) -> Task<StatusOr<Response>> { co_return co_await f; }(
                                  std::move(f)));
      r = got ? std::move(*got) : StatusOr<Response>(absl::DeadlineExceededError("no answer"));
      if (r.ok() || r.status().code() != StatusCode::kUnavailable) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (!r.ok()) return r.status();
  }
  return absl::OkStatus();
}

struct Measured {
  Summary pairs, gbps;
};

// The machine's limit for one connection, measured just before the
// servers start and just after the last window: one loopback TCP stream, and
// one Unix socket stream where the data plane uses it (tasks of one host).
// This VM's stream speed moves by 50 % within minutes, so only a stream
// measured around the windows says how close they came to it.
struct StreamsAround {
  double tcp = 0;
  double unix = 0;  // 0: not measured (the plane does not use the Unix socket)
};
StreamsAround measure_streams(const BenchConfig& c) {
  StreamsAround s;
  s.tcp = loopback_stream_bytes_per_s(std::size_t{64} << 20, 3);
  if (c.data_plane == "tcp" || c.data_plane == "tcp-unix") s.unix = unix_stream_bytes_per_s(std::size_t{64} << 20, 3);
  return s;
}

int run_parent(const BenchConfig& c, Measured* measured = nullptr) {
  const ScratchDir scratch("bench-ps");
  const std::string& dir = scratch.path();
  // Every ps listens on a port the OS picks (--port 0) and reports it on its
  // readiness line; until then its address, like the others (only the load
  // generators call the ps), is a distinct placeholder never dialled.
  std::map<TaskId, std::string> addresses;
  int placeholder = 0;
  auto cluster_of = [&] {
    TfConfig tfc;
    tfc.cluster = make_cluster(c.workers, c.servers, /*chief=*/true, [&](TaskId t) {
      auto& a = addresses[t];
      if (a.empty()) a = "127.0.0.1:" + std::to_string(++placeholder);
      return a;
    });
    return tfc;
  };
  const TfConfig placeholders = cluster_of();
  const std::string self = self_binary();
  const std::string load_before = load_average();
  const StreamsAround streams_before = c.quiet ? StreamsAround{} : measure_streams(c);

  std::vector<Child> servers;
  for (int i = 0; i < c.servers; ++i) {
    TfConfig task = placeholders;
    task.task = TaskId::ps(i);
    std::vector<std::string> args{self, "serve", "--port", "0", "--data-plane", c.data_plane, "--max-message-mb",
                                  std::to_string(c.max_message_mb)};
    args.insert(args.end(), c.security_args.begin(), c.security_args.end());
    servers.push_back(Child::start(args, {"TF_CONFIG=" + task.to_json()}, dir, "ps" + std::to_string(i)));
  }
  for (int i = 0; i < c.servers; ++i) {
    Child& ps = servers[static_cast<std::size_t>(i)];
    const int port = ps.wait_for_output("serving on", std::chrono::seconds(30)) ? serving_port(ps.err()) : 0;
    if (port <= 0) {
      std::fprintf(stderr, "twinps bench ps: ps:%d did not start: %s\n", i, ps.err().c_str());
      return kExitFailed;
    }
    addresses[TaskId::ps(i)] = "127.0.0.1:" + std::to_string(port);
  }
  const std::string cluster_json = cluster_of().to_json();
  if (Status st = create_keys(c, net::address_map(addresses)); !st.ok()) {
    std::fprintf(stderr, "twinps bench ps: creating the keys failed: %s\n", describe(st).c_str());
    return kExitFailed;
  }

  // Generators connect and warm up until the common start, then count.
  const std::int64_t start_ns = steady_now_ns() + static_cast<std::int64_t>((1.0 + c.warmup) * 1e9);
  std::vector<Child> generators;
  for (int w = 0; w < c.workers; ++w) {
    std::vector<std::string> args{self};
    args.insert(args.end(), kThisCommand.begin(), kThisCommand.end());
    const std::vector<std::string> rest{
         "--load-generator", "--worker-index", std::to_string(w), "--tf-config", cluster_json,
         "--start-at-ns", std::to_string(start_ns), "--servers", std::to_string(c.servers), "--workers",
         std::to_string(c.workers), "--keys", std::to_string(c.keys), "--values-per-key",
         std::to_string(c.values_per_key), "--rows", std::to_string(c.rows), "--pull", c.row_pulls ? "rows" : "dense",
         "--rows-per-pull", std::to_string(c.rows_per_pull), "--mode", c.mode, "--optimizer", c.optimizer,
         "--repeats", std::to_string(c.repeats),
         "--window", std::to_string(c.window), "--data-plane", c.data_plane, "--max-message-mb",
         std::to_string(c.max_message_mb)};
    args.insert(args.end(), rest.begin(), rest.end());
    args.insert(args.end(), c.security_args.begin(), c.security_args.end());
    generators.push_back(Child::start(args, {}, dir, "worker" + std::to_string(w)));
  }
  const auto limit = std::chrono::milliseconds(static_cast<std::int64_t>((c.warmup + c.repeats * c.window) * 1000) + 120000);
  std::vector<double> pairs(static_cast<std::size_t>(c.repeats), 0.0), bytes(pairs.size(), 0.0), calls(pairs.size(), 0.0);
  bool ok = true;
  for (int w = 0; w < c.workers; ++w) {
    auto& g = generators[static_cast<std::size_t>(w)];
    if (!g.wait(limit) || g.exit_code() != 0) {
      std::fprintf(stderr, "twinps bench ps: worker %d failed (exit %d): %s\n", w, g.exit_code(), g.err().c_str());
      ok = false;
      continue;
    }
    try {
      auto j = nlohmann::json::parse(g.out());
      const auto counts = j["pairs"].get<std::vector<double>>();
      for (std::size_t r = 0; r < pairs.size() && r < counts.size(); ++r) {
        pairs[r] += counts[r];
        bytes[r] += counts[r] * j["pair_bytes"].get<double>();
        calls[r] += counts[r] * j["calls_per_pair"].get<double>();
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "twinps bench ps: unreadable output from worker %d: %s\n", w, e.what());
      ok = false;
    }
  }
  for (int i = 0; i < c.servers; ++i) {
    if (!servers[static_cast<std::size_t>(i)].wait(std::chrono::milliseconds(0))) continue;
    std::fprintf(stderr, "twinps bench ps: ps:%d exited early: %s\n", i, servers[static_cast<std::size_t>(i)].err().c_str());
    ok = false;
  }
  if (!ok) return kExitFailed;
  // A window without a single completed pair measured nothing: no rate is reported.
  for (std::size_t r = 0; r < pairs.size(); ++r) {
    if (pairs[r] > 0) continue;
    std::fprintf(stderr, "twinps bench ps: no push->pull pair completed in measurement window %zu of %d (%.1f s): "
                 "the cluster made no progress, so there is no rate to report\n", r + 1, c.repeats, c.window);
    return kExitFailed;
  }
  for (auto* v : {&pairs, &bytes, &calls})
    for (auto& x : *v) x /= c.window;

  if (measured) {
    measured->pairs = summarize(pairs);
    auto g = bytes;
    for (auto& x : g) x /= 1e9;
    measured->gbps = summarize(g);
  }
  if (c.quiet) return kExitOk;
  const StreamsAround streams_after = measure_streams(c);
  const double key_bytes = static_cast<double>(c.values_per_key) * sizeof(float);
  std::printf("twinps bench ps: %d server(s) x %d worker(s) as processes, %d key(s) of %s (%lldx%lld floats), "
              "%s pulls, mode %s, optimizer %s, data plane %s\n",
              c.servers, c.workers, c.keys,
              key_bytes >= (1 << 20) ? format("%.0f MiB", key_bytes / (1 << 20)).c_str()
                                     : format("%.0f KiB", key_bytes / 1024).c_str(),
              static_cast<long long>(c.rows), static_cast<long long>(cols_of(c)),
              c.row_pulls ? format("row (%lld rows)", static_cast<long long>(c.rows_per_pull)).c_str() : "dense",
              c.mode.c_str(), c.optimizer.c_str(), c.data_plane.c_str());
  Table t;
  t.row("push->pull pairs/s", show(summarize(pairs), "%.0f"));
  t.row("GB/s (push+pull bytes)", show(summarize([&] {
          auto g = bytes;
          for (auto& x : g) x /= 1e9;
          return g;
        }()), "%.3f"));
  t.row("goodput GB/s (ps-lite's: one way)", show(summarize([&] {
          auto g = bytes;
          for (auto& x : g) x /= 2e9;
          return g;
        }()), "%.3f"));
  t.row("calls/s", show(summarize(calls), "%.0f"));
  t.row("windows", format("%d x %.1f s (median [min .. max])", c.repeats, c.window));
  const double wire = summarize(bytes).median;
  auto against_stream = [&](const char* name, double before, double after) {
    const double stream = (before + after) / 2;
    t.row(format("one %s stream GB/s, before and after", name),
          format("%.3f  (%.3f before, %.3f after)", stream / 1e9, before / 1e9, after / 1e9));
    t.row(format("push+pull bytes / one %s stream", name), format("%.2fx", wire / stream));
  };
  against_stream("loopback TCP", streams_before.tcp, streams_after.tcp);
  if (streams_before.unix > 0) against_stream("Unix socket", streams_before.unix, streams_after.unix);
  t.row("load average", load_before + " -> " + load_average());
  t.print();
  return kExitOk;
}

std::string hex_token() {
  std::string out;
  for (unsigned char b : net::random_nonce()) out += format("%02x", b);
  return out;
}

// --tls: the same load plain, with TLS on gRPC only (the data plane in clear,
// each connection authenticated by the token handshake), and with TLS on both
// planes; one run, so the ratios compare like with like.
int run_tls_comparison(BenchConfig c) {
  const ScratchDir scratch("bench-ps-tls");
  const std::string& dir = scratch.path();
  auto ca = net::make_throwaway_ca("twinps bench CA");
  auto leaf = ca.ok() ? net::issue_certificate(*ca, {"127.0.0.1", "localhost"}) : StatusOr<net::PemPair>(ca.status());
  if (!leaf.ok()) {
    std::fprintf(stderr, "twinps bench ps: %s\n", describe(leaf.status()).c_str());
    return kExitFailed;
  }
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir + "/" + name) << text;
    return dir + "/" + name;
  };
  const std::vector<std::string> tls_args{"--tls-cert", write("tls.crt", leaf->cert_pem), "--tls-key",
                                          write("tls.key", leaf->key_pem), "--tls-ca", write("ca.pem", ca->cert_pem),
                                          "--token-file", write("token", hex_token())};
  struct Setting {
    const char* name;
    std::vector<std::string> args;
  };
  std::vector<Setting> settings = {{"plain (no token, no TLS)", {}},
                                   {"token + TLS on gRPC, data plane in clear", tls_args},
                                   {"token + TLS on both planes", tls_args}};
  settings[1].args.insert(settings[1].args.end(), {"--data-plane-tls", "off"});
  const std::string load_before = load_average();
  std::vector<Measured> results;
  for (const auto& setting : settings) {
    std::fprintf(stderr, "twinps bench ps --tls: %s ...\n", setting.name);
    BenchConfig run = c;
    run.quiet = true;
    run.security_args = setting.args;
    SecurityFlags flags;
    po::options_description o;
    flags.add_to(o);
    po::variables_map vm;
    std::vector<std::string> argv_text{"bench"};
    argv_text.insert(argv_text.end(), setting.args.begin(), setting.args.end());
    std::vector<char*> argv;
    for (auto& a : argv_text) argv.push_back(a.data());
    po::store(po::parse_command_line(static_cast<int>(argv.size()), argv.data(), o), vm);
    po::notify(vm);
    auto security = flags.security();
    if (!security.ok()) {
      std::fprintf(stderr, "twinps bench ps: %s\n", describe(security.status()).c_str());
      return kExitFailed;
    }
    run.transport.security = *security;
    Measured m;
    if (int rc = run_parent(run, &m); rc != kExitOk) return rc;
    results.push_back(m);
  }
  const double key_bytes = static_cast<double>(c.values_per_key) * sizeof(float);
  std::printf("twinps bench ps --tls: %d server(s) x %d worker(s), %d key(s) of %s, mode %s, %d x %.1f s windows\n",
              c.servers, c.workers, c.keys,
              key_bytes >= (1 << 20) ? format("%.0f MiB", key_bytes / (1 << 20)).c_str()
                                     : format("%.0f KiB", key_bytes / 1024).c_str(),
              c.mode.c_str(), c.repeats, c.window);
  Table t;
  for (std::size_t i = 0; i < settings.size(); ++i) {
    const double ratio = results[0].pairs.median > 0 ? results[i].pairs.median / results[0].pairs.median : 0;
    t.row(settings[i].name, show(results[i].pairs, "%.0f") + " pairs/s, " + format("%.3f", results[i].gbps.median) +
                                 " GB/s" + (i ? format("  (%.0f %% of plain)", 100 * ratio) : std::string()));
  }
  t.row("load average", load_before + " -> " + load_average());
  t.print();
  return kExitOk;
}

}  // namespace

int run_bench_ps(int argc, char** argv) {
  BenchConfig c;
  std::string tf_config;
  int worker_index = -1;
  std::int64_t start_ns = 0;
  std::string pull = "dense";
  po::options_description opts("twinps bench ps options");
  opts.add_options()("help,h", "show this help")
      ("servers", value_or(&c.servers, 1)->notifier(at_least(1)), "parameter-server processes")
      ("workers", value_or(&c.workers, 1)->notifier(at_least(1)), "load-generator processes (one worker task each)")
      ("keys", value_or(&c.keys, 0)->notifier(at_least(0)),
       "keys (variables), spread round-robin over the servers (0: one per server)")
      ("values-per-key", value_or(&c.values_per_key, std::int64_t{262144})->notifier(at_least(std::int64_t{1})),
       "float32 values per key (262144 = 1 MiB)")
      ("rows", value_or(&c.rows, std::int64_t{1})->notifier(at_least(std::int64_t{1})),
       "rows per key (values-per-key must be a multiple)")
      ("pull", value_or(&pull, std::string("dense"))->notifier(one_of({"dense", "rows"})),
       "dense (whole keys) or rows (some rows of each key, sparse pushes)")
      ("rows-per-pull", value_or(&c.rows_per_pull, std::int64_t{0})->notifier(at_least(std::int64_t{0})),
       "rows pulled per key with --pull rows (0: rows/8)")
      ("mode", value_or(&c.mode, std::string("pipelined"))->notifier(one_of({"pipelined", "sequential", "push-then-pull", "push-pull"})),
       "per key and iteration: pipelined (push and pull in flight together), sequential (push, wait, pull, "
       "wait: one message in flight per worker), push-then-pull (every key's push, wait, every key's pull, "
       "wait: ps-lite's PUSH_THEN_PULL) or push-pull (one push that carries the pull)")
      ("optimizer", value_or(&c.optimizer, std::string("sgd"))->notifier(one_of({"none", "sgd", "adam"})),
       "what a push does on the ps: sgd or adam (the optimizer's apply), none (store the values, as a key-value "
       "store does)")
      ("repeats", value_or(&c.repeats, 5)->notifier(at_least(1)), "measurement windows")
      ("window", value_or(&c.window, 2.0)->notifier(positive()), "seconds per window")
      ("warmup", value_or(&c.warmup, 1.0)->notifier(at_least(0.0)), "seconds of load before the first window")
      ("data-plane", value_or(&c.data_plane, std::string("tcp"))->notifier(one_of_data_planes()),
       kDataPlaneHelp)
      ("max-message-mb", value_or(&c.max_message_mb, std::size_t{512})->notifier(in_range<std::size_t>(1, 2047)),
       "largest message, MiB")
      ("tls", "measure the cost of TLS: the same load plain, with TLS on gRPC only (data plane in clear, "
              "token-authenticated) and on both planes, with a throwaway CA")
      ("load-generator", "internal: run as one load generator")
      ("worker-index", po::value(&worker_index), "internal: this generator's worker index")
      ("tf-config", po::value(&tf_config), "internal: the cluster")
      ("start-at-ns", po::value(&start_ns), "internal: CLOCK_MONOTONIC ns of the first window");
  SecurityFlags security_flags;  // a generator gets the servers' token and TLS material
  security_flags.add_to(opts);
  po::variables_map vm;
  if (int rc = parse(argc, argv,
                     "usage: twinps bench ps [--servers S] [--workers W] [--keys K] [--values-per-key N] ...\n"
                     "Push/pull throughput against `twinps serve --role ps` processes on loopback, load from\n"
                     "separate worker processes; each pair pushes a key's values and pulls them back.",
                     opts, vm);
      rc >= 0)
    return rc;
  if (!apply_data_plane("bench ps", c.data_plane, &c.transport)) return kExitBadInput;
  if (c.keys == 0) c.keys = c.servers;
  c.row_pulls = pull == "rows";
  if (c.rows_per_pull == 0) c.rows_per_pull = std::max<std::int64_t>(c.rows / 8, 1);
  if (c.values_per_key % c.rows != 0) {
    std::fprintf(stderr, "twinps bench ps: --values-per-key (%lld) must be a multiple of --rows (%lld)\n",
                 static_cast<long long>(c.values_per_key), static_cast<long long>(c.rows));
    return kExitBadInput;
  }
  if (c.rows_per_pull > c.rows) {
    std::fprintf(stderr, "twinps bench ps: --rows-per-pull (%lld) must not exceed --rows (%lld)\n",
                 static_cast<long long>(c.rows_per_pull), static_cast<long long>(c.rows));
    return kExitBadInput;
  }
  // Large tensors: keep freed buffers mapped (net/allocator_tuning.h), in every process of the bench.
  net::tune_allocator_for_large_tensors();
  if (auto security = security_flags.security(); security.ok()) {
    c.transport.security = *security;
    c.security_args = security_flags.to_args();  // the servers and generators get the same
  } else {
    std::fprintf(stderr, "twinps bench ps: %s\n", std::string(security.status().message()).c_str());
    return kExitBadInput;
  }
  if (vm.count("load-generator")) return run_load_generator(c, worker_index, tf_config, start_ns);
  if (vm.count("tls")) return run_tls_comparison(c);
  return run_parent(c);
}

}  // namespace twinps::cli
