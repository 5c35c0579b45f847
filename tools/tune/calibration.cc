#include "tools/tune/calibration.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <thread>
#include <tuple>

#include <Eigen/Dense>
#include <google/protobuf/text_format.h>

#include "core/model/graph.h"
#include "core/model/layers.h"
#include "core/models/synthetic/synthetic.h"
#include "core/runtime/block_on.h"
#include "core/variables/sharded_variable.h"
#include "core/worker/parameter_client.h"
#include "net/grpc_transport.h"
#include "sim/cost_curve.h"
#include "sim/tuner.h"
#include "sim/workload.h"
#include "tools/cli.h"
#include "tools/data_plane_flag.h"
#include "tools/process_cluster.h"
#include "tools/tune/busy_neighbours.h"
#include "tools/tune/input_kernels.h"
#include "tools/tune/kernel_fit.h"
#include "tools/tune/ps_wake.h"
#include "tools/tune/real_run.h"
#include "tools/tune/speed_probe.h"

namespace twinps::cli {

namespace {

// Field `field` (0: on a core, 1: waiting for one) of every thread's /proc
// schedstat, summed, in seconds.
double schedstat_seconds(int pid, int field) {
  double ns = 0;
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::ifstream in(task.path() / "schedstat");
    double values[2] = {0, 0};
    if (in >> values[0] >> values[1]) ns += values[field];
  }
  return ns * 1e-9;
}

// Times any thread of the process went to sleep (voluntary context
// switches, from every thread's /proc status).
double process_sleeps(int pid) {
  double sleeps = 0;
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::ifstream in(task.path() / "status");
    for (std::string line; std::getline(in, line);)
      if (line.rfind("voluntary_ctxt_switches:", 0) == 0) sleeps += std::strtod(line.c_str() + 24, nullptr);
  }
  return sleeps;
}

}  // namespace

double process_cpu_seconds(int pid) { return schedstat_seconds(pid, 0); }

double process_run_delay_seconds(int pid) { return schedstat_seconds(pid, 1); }

std::string describe_machine() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, model;
  while (std::getline(cpuinfo, line))
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  return format("%s, %s, %ld cores, %s, load average %s", host, model.c_str(), ::sysconf(_SC_NPROCESSORS_ONLN), utc_now().c_str(),
                load_average().c_str());
}

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }


// ---------------------------------------------------------------- calls

// What one kind of call costs: the caller's CPU, the ps's CPU, the round trip.
struct CallCost {
  double caller_s = 0, ps_s = 0, rtt_s = 0;
};

// Each side's median over several measurements of one call.
CallCost median_cost(const std::vector<CallCost>& passes) {
  std::vector<double> caller, ps, rtt;
  for (const CallCost& c : passes) {
    caller.push_back(c.caller_s);
    ps.push_back(c.ps_s);
    rtt.push_back(c.rtt_s);
  }
  return {median(caller), median(ps), median(rtt)};
}

// One shard of one variable on one ps.
VariableLayout layout(const std::string& name, ShardId id, int ps, std::int64_t rows, std::int64_t cols) {
  VariableLayout v;
  v.name = name;
  v.shape = {rows, cols};
  v.shards.push_back(ShardPlacement{id, ps, 0, rows});
  return v;
}

ShardState shard(const VariableLayout& v) {
  ShardState s;
  s.spec = ShardSpec{v.shards[0].id, v.name, VariableKind::kTrainable, v.rows(), v.cols()};
  s.value = Matrix::Constant(v.rows(), v.cols(), 0.5f);
  return s;
}

// This process as a worker would call the parameter servers: a
// ParameterClient over the data plane, driven from this thread (the data
// plane's reads and writes run on it), so its thread CPU time is the
// caller's side of every call.
class Caller {
 public:
  Caller(const CalibrationOptions& o, ProcessCluster& cluster, std::vector<double> ps_idle_per_s)
      : o_(o), cluster_(cluster), ps_idle_per_s_(std::move(ps_idle_per_s)) {}

  Status connect() {
    net::GrpcTransportOptions t;
    if (!apply_data_plane("calibrate", o_.data_plane, &t)) return absl::InvalidArgumentError("bad data plane");
    t.resolve = net::address_map(cluster_.addresses());
    t.max_message_bytes = std::size_t{512} << 20;
    auto transport = net::GrpcTransport::create(TaskId::chief(), ex_, t);
    if (!transport.ok()) return transport.status();
    transport_ = std::move(*transport);
    runtime_ = std::make_unique<Runtime>(Runtime{TaskId::worker(0), 1, ex_, *transport_, trace_, RandomStream(1), nullptr});
    client_ = std::make_unique<ParameterClient>(*runtime_, Fence{}, CancelToken{}, 60 * kSecond, request_ids_);
    return absl::OkStatus();
  }

  Status create(int ps, OptimizerConfig optimizer, std::vector<ShardState> shards) {
    CreateShardsRequest create;
    create.optimizer = optimizer;
    create.shards = std::move(shards);
    CallOptions options{ex_.now() + 120 * kSecond, {}, 0};
    auto f = call_async(ex_, *transport_, TaskId::ps(ps), Request(std::move(create)), std::move(options));
    auto r = block_on(ex_, [](Future<StatusOr<Response>> f) -> Task<StatusOr<Response>> { co_return co_await f; }(
                               std::move(f)));
    if (!r) return absl::DeadlineExceededError("no answer from ps:" + std::to_string(ps));
    return r->status();
  }

  Status pull(const ParameterClient::PullBatch& batch) {
    auto r = block_on(ex_, client_->pull(batch));
    if (!r) return absl::DeadlineExceededError("a pull got no answer");
    return r->status();
  }
  // Pulls `batch` again and again until `stop`, counting the calls, and
  // sleeping `pause` after each (none: back to back).
  Status pull_until(const ParameterClient::PullBatch& batch, const std::atomic<bool>& stop,
                    std::atomic<std::int64_t>& calls, std::chrono::microseconds pause) {
    while (!stop.load()) {
      if (Status s = pull(batch); !s.ok()) return s;
      ++calls;
      if (pause.count() > 0) std::this_thread::sleep_for(pause);
    }
    return absl::OkStatus();
  }
  // A push takes its batch, as a worker gives up its gradients: timed with
  // a copy made by `measure`'s `prepare`, outside the caller's CPU.
  Status push(ParameterClient::PushBatch batch) {
    auto r = block_on(ex_, client_->push(std::move(batch)));
    if (!r) return absl::DeadlineExceededError("a push got no answer");
    return *r;
  }

  // Times `call` (against ps `ps`): `repeats` batches of about
  // `seconds_per_batch`; per call, the median of the batches. `prepare`, if
  // given, runs before each call and its CPU is not the caller's (a copy of
  // a batch a push then takes).
  StatusOr<CallCost> measure(const std::string& name, int ps, const std::function<Status()>& call,
                             const std::function<void()>& prepare) {
    for (int i = 0; i < 3; ++i) {  // connections, first-touch allocations
      if (prepare) prepare();
      if (Status s = call(); !s.ok()) return s;
    }
    const int pid = cluster_.pid(TaskId::ps(ps));
    std::vector<double> callers, pss, rtts;
    for (int b = 0; b < o_.repeats; ++b) {
      std::vector<double> batch;
      double prepared_cpu = 0;
      const double ps0 = process_cpu_seconds(pid), me0 = thread_cpu_seconds();
      const auto t0 = Clock::now();
      while (batch.size() < 5 || seconds_since(t0) < o_.seconds_per_batch) {
        if (prepare) {
          const double p0 = thread_cpu_seconds();
          prepare();
          prepared_cpu += thread_cpu_seconds() - p0;
        }
        const auto c0 = Clock::now();
        if (Status s = call(); !s.ok()) return s;
        batch.push_back(seconds_since(c0));
      }
      const double elapsed = seconds_since(t0);
      const double n = static_cast<double>(batch.size());
      callers.push_back((thread_cpu_seconds() - me0 - prepared_cpu) / n);
      // The ps's idle CPU over the whole window, prepare's time included.
      pss.push_back(std::max(0.0, process_cpu_seconds(pid) - ps0 - ps_idle_per_s_[static_cast<std::size_t>(ps)] * elapsed) / n);
      rtts.push_back(median(batch));
    }
    CallCost c{median(callers), median(pss), median(rtts)};
    if (o_.verbose)
      std::fprintf(stderr, "twinps calibrate: %-30s caller %9.1f us, ps %9.1f us, round trip %9.1f us\n", name.c_str(),
                   c.caller_s * 1e6, c.ps_s * 1e6, c.rtt_s * 1e6);
    return c;
  }

 private:
  const CalibrationOptions& o_;
  ProcessCluster& cluster_;
  std::vector<double> ps_idle_per_s_;
  net::AsioExecutor ex_;
  NullTraceSink trace_;
  std::unique_ptr<net::GrpcTransport> transport_;
  std::unique_ptr<Runtime> runtime_;
  std::uint64_t request_ids_ = 0;
  std::unique_ptr<ParameterClient> client_;
};

// `callers` callers (each its own ParameterClient and thread) pulling
// `batch` from ps 0, each pausing `pause` after every call (none: as fast as
// they can), for `repeats` windows of `seconds_per_batch` (and at least 40
// pauses): ps 0's CPU and sleeps per call, less what it spends and sleeps
// idle (`idle_cpu_per_s`; its sleeps measured here first), and the wall
// time between calls.
StatusOr<PsPerCall> ps_per_call(const CalibrationOptions& o, ProcessCluster& cluster,
                                const std::vector<double>& idle_cpu_per_s, int callers,
                                const ParameterClient::PullBatch& batch,
                                std::chrono::microseconds pause = std::chrono::microseconds(0)) {
  const int pid = cluster.pid(TaskId::ps(0));
  const double idle_sleeps0 = process_sleeps(pid);
  const auto idle0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const double idle_sleeps_per_s = (process_sleeps(pid) - idle_sleeps0) / seconds_since(idle0);
  std::vector<std::unique_ptr<Caller>> each;
  for (int c = 0; c < callers; ++c) {
    each.push_back(std::make_unique<Caller>(o, cluster, idle_cpu_per_s));
    if (Status s = each.back()->connect(); !s.ok()) return s;
    for (int i = 0; i < 3; ++i)  // connections, first-touch allocations
      if (Status s = each.back()->pull(batch); !s.ok()) return s;
  }
  std::atomic<bool> stop{false};
  std::atomic<std::int64_t> calls{0};
  std::vector<Status> results(static_cast<std::size_t>(callers));
  std::vector<std::thread> threads;
  for (std::size_t c = 0; c < each.size(); ++c)
    threads.emplace_back([&, c] { results[c] = each[c]->pull_until(batch, stop, calls, pause); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // every caller under way
  const double cpu0 = process_cpu_seconds(pid), sleeps0 = process_sleeps(pid);
  const std::int64_t calls0 = calls.load();
  const auto t0 = Clock::now();
  const double window_s = std::max(o.seconds_per_batch * o.repeats, 40 * std::chrono::duration<double>(pause).count());
  std::this_thread::sleep_for(std::chrono::duration<double>(window_s));
  const double cpu = process_cpu_seconds(pid) - cpu0, sleeps = process_sleeps(pid) - sleeps0;
  const double n = static_cast<double>(calls.load() - calls0), elapsed = seconds_since(t0);
  stop = true;
  for (auto& t : threads) t.join();
  for (const Status& s : results)
    if (!s.ok()) return s;
  if (n < 1) return absl::DeadlineExceededError("no call answered while measuring the ps per call");
  return PsPerCall{std::max(0.0, cpu - idle_cpu_per_s[0] * elapsed) / n * 1e6,
                   std::max(0.0, sleeps - idle_sleeps_per_s * elapsed) / n, elapsed / n * 1e6};
}

// Curve points: a message of `bytes` cost `us` beyond its intercept.
using Curve = sim::CostCurve;

// Into a profile's curve (a bytes_curve of a MessageCpu, the ps or an
// apply; an overlap).
void add_curve(google::protobuf::RepeatedPtrField<scenario::BytesCost>* points, const Curve& c) {
  double last = 0;
  for (const auto& [bytes, us] : c) {
    auto* p = points->Add();
    p->set_bytes(bytes);
    last = std::max(last, us);  // never cheaper for more bytes
    p->set_us(last);
  }
}

struct CallResults {
  std::string table;
};

// Row widths (floats) the per-row prices are measured at: one cache line,
// four, and a row of one float (a wide model's weight per id: its id and its
// value), where the per-row term stands alone. The caller's per-row prices
// are measured at the first.
constexpr std::int64_t kRowWidths[] = {16, 64, 1};
// Dense applies are measured from this size: below it, the apply is lost in
// the noise of the call around it.
constexpr std::int64_t kApplyFromBytes = 64 * 1024;
// The items-by-id probe: kItemRows rows at random places in a table of
// 8 MiB (64 x 2,048 rows of 16 floats), beyond the caches as an
// embedding's, as one shard and as 64.
constexpr int kItemShards = 64;
constexpr std::int64_t kItemShardRows = 2048;
constexpr std::int64_t kItemRows = 256;

// `ids` (ascending) of a table cut into shards of `shard_rows` rows: each
// shard's ids, local to it, by shard (shards with none left out).
std::map<std::size_t, RowIds> split_rows(const RowIds& ids, std::int64_t shard_rows) {
  std::map<std::size_t, RowIds> out;
  for (std::int64_t id : ids) out[static_cast<std::size_t>(id / shard_rows)].push_back(id % shard_rows);
  return out;
}

struct RowTables {
  std::int64_t width = 0;
  std::int64_t rows = 0;
  std::vector<VariableLayout> by_optimizer;  // on ps 0, 1, 2: SGD, Adagrad, RMSprop
};

// Sets of about `rows` distinct ids drawn uniformly from a `table_rows`
// table, enough of them to cover the table but at most 512: a call that
// cycles through them reads rows no recent call left in a core's cache, as
// an embedding's lookups do. (The 256-row probe of 16 floats covers a
// quarter of its table, 8 MiB of rows: more than a core's cache, less than
// the shared one.)
// (The same ids every call priced a 2,048-row pull at 61 us of the ps's CPU,
// against 100 us with rows from memory.)
struct RowSets {
  std::vector<RowIds> ids;
  double mean_rows = 0;
};
RowSets draw_row_sets(std::int64_t rows, std::int64_t table_rows) {
  const std::int64_t count = std::clamp<std::int64_t>((table_rows + rows - 1) / rows, 1, 512);
  std::mt19937_64 random(static_cast<std::uint64_t>(rows * 1000003 + table_rows));
  RowSets out;
  for (std::int64_t s = 0; s < count; ++s) {
    RowIds ids(static_cast<std::size_t>(rows));
    for (auto& id : ids) id = static_cast<std::int64_t>(random() % static_cast<std::uint64_t>(table_rows));
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    out.mean_rows += static_cast<double>(ids.size()) / static_cast<double>(count);
    out.ids.push_back(std::move(ids));
  }
  return out;
}

// A per-row price a + b x (KiB of the row's values), fitted by least
// squares to the prices measured at every width; neither term negative.
// (Through two widths alone, 16 and 64 floats, the split between the terms
// followed each width's noise: three calibrations of one hour priced a row
// of one float at 0.085, 0.013 and 0.020 us on the ps.)
struct RowPrice {
  double per_row_us = 0;
  double per_kib_us = 0;
};
RowPrice fit_row_price(const std::vector<double>& row_kib, const std::vector<double>& us_per_row) {
  std::vector<std::vector<double>> x;
  for (double kib : row_kib) x.push_back({1.0, kib});
  const std::vector<double> fit = nonnegative_least_squares(x, us_per_row);
  return {fit[0], fit[1]};
}

// What an item that names rows by id costs beyond a dense item (per item, us):
// the ps's, pulled and pushed by optimizer (SGD, Adagrad, RMSprop), and the
// caller's, pulled and pushed.
struct SparseItemPrices {
  double ps_pulled_us = 0;
  double ps_pushed_us[3] = {};
  double caller_pulled_us = 0, caller_pushed_us = 0;
};

// The data plane's costs on both sides: ps_service and messages.data_*.
// Sets `row_reference_us` to the row probe's speed in the spells the row
// prices were measured in.
Status measure_calls(const CalibrationOptions& o, scenario::CostProfile& p, double* row_reference_us,
                     std::string* report) {
  // Four ps, one per optimizer (a store runs one); ps:0 (SGD) serves every other probe.
  const OptimizerConfig::Kind kinds[] = {OptimizerConfig::Kind::kSgd, OptimizerConfig::Kind::kAdagrad,
                                         OptimizerConfig::Kind::kRmsprop, OptimizerConfig::Kind::kAdam};
  auto cluster = ProcessCluster::start(1, 4, {"--data-plane", o.data_plane, "--max-message-mb", "512"},
                                       {"--data-plane", o.data_plane}, o.work_dir);
  if (!cluster.ok()) return cluster.status();
  // What the idle servers burn anyway (gRPC's pollers, their tick), to subtract.
  std::vector<double> idle0, idle;
  for (int i = 0; i < 4; ++i) idle0.push_back(process_cpu_seconds((*cluster)->pid(TaskId::ps(i))));
  const auto t0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  for (int i = 0; i < 4; ++i)
    idle.push_back((process_cpu_seconds((*cluster)->pid(TaskId::ps(i))) - idle0[static_cast<std::size_t>(i)]) /
                   seconds_since(t0));
  Caller caller(o, **cluster, idle);
  if (Status s = caller.connect(); !s.ok()) return s;

  // The shards.
  ShardId next = 1;
  std::vector<std::vector<ShardState>> shards(4);
  auto make = [&](const std::string& name, int ps, std::int64_t rows, std::int64_t cols) {
    VariableLayout v = layout(name, next++, ps, rows, cols);
    shards[static_cast<std::size_t>(ps)].push_back(shard(v));
    return v;
  };
  const VariableLayout tiny = make("tiny", 0, 1, 1);
  std::vector<std::int64_t> sizes;  // bytes, up to the largest tensor
  for (std::int64_t s = 4096; s < static_cast<std::int64_t>(o.max_bytes); s *= 4) sizes.push_back(s);
  sizes.push_back(static_cast<std::int64_t>(o.max_bytes));
  std::vector<VariableLayout> dense;
  for (std::int64_t s : sizes) dense.push_back(make("dense_" + std::to_string(s), 0, 1, s / 4));
  // Each other optimizer's variables of the same sizes, on its own ps.
  std::vector<std::vector<VariableLayout>> dense_by_optimizer(4);
  for (int k = 1; k < 4; ++k)
    for (std::int64_t s : sizes)
      dense_by_optimizer[static_cast<std::size_t>(k)].push_back(make(format("opt_%d_%lld", k, static_cast<long long>(s)), k, 1, s / 4));
  // Row tables, one per optimizer (ps k has optimizer k) and row width, as
  // large as the largest tensor: rows gathered and scattered at random places
  // in a table that does not fit the caches cost what a real embedding's do.
  std::vector<RowTables> row_tables;
  for (std::int64_t width : kRowWidths) {
    RowTables t;
    t.width = width;
    t.rows = std::max<std::int64_t>(16384, static_cast<std::int64_t>(o.max_bytes) / (4 * width));
    for (int k = 0; k < 3; ++k)
      t.by_optimizer.push_back(make(format("table_%lld_%d", static_cast<long long>(width), k), k, t.rows, width));
    row_tables.push_back(std::move(t));
  }
  std::vector<VariableLayout> items;
  for (int i = 0; i < 64; ++i) items.push_back(make("item_" + std::to_string(i), 0, 1, 1));
  // Per optimizer (SGD, Adagrad, RMSprop on ps 0, 1, 2) one table of
  // kItemShards x kItemShardRows rows, 16 floats wide, as one shard and as
  // kItemShards: what an embedding of many shards asks of a ps.
  std::vector<VariableLayout> item_table;
  std::vector<std::vector<VariableLayout>> item_shards(3);
  for (int k = 0; k < 3; ++k) {
    item_table.push_back(make(format("item_table_%d", k), k, kItemShards * kItemShardRows, 16));
    for (int i = 0; i < kItemShards; ++i)
      item_shards[static_cast<std::size_t>(k)].push_back(make(format("item_shard_%d_%d", k, i), k, kItemShardRows, 16));
  }
  const RowSets item_rows = draw_row_sets(kItemRows, kItemShards * kItemShardRows);
  for (int ps = 0; ps < 4; ++ps) {
    OptimizerConfig opt;
    opt.kind = kinds[ps];
    if (Status s = caller.create(ps, opt, std::move(shards[static_cast<std::size_t>(ps)])); !s.ok()) return s;
  }

  auto pull_dense = [&](const VariableLayout& v) {
    ParameterClient::PullBatch b;
    b.dense(v);
    return b;
  };
  auto push_dense = [&](const VariableLayout& v) {
    ParameterClient::PushBatch b;
    b.gradient(v, Matrix::Constant(v.rows(), v.cols(), 1e-3f));
    return b;
  };
  std::string table_text = "calls over data plane " + o.data_plane +
                           " (a ParameterClient in this process, as a worker, one call at a time):\n";
  auto run = [&](const std::string& name, int ps, std::function<Status()> call,
                 std::function<void()> prepare = {}) -> StatusOr<CallCost> {
    auto c = caller.measure(name, ps, call, prepare);
    if (c.ok())
      table_text += format("  %-32s caller %9.1f us  ps %9.1f us  round trip %9.1f us\n", name.c_str(),
                           c->caller_s * 1e6, c->ps_s * 1e6, c->rtt_s * 1e6);
    return c;
  };

  const auto tiny_pull = pull_dense(tiny);
  // The one-float call alone, and beside a process computing the gradient
  // kernel on every core: no core is idle when either side is woken, as on
  // a host whose cores its tasks keep busy (tools/tune/busy_neighbours.h).
  // Their fixed prices, three turns of the two, each side keeping the
  // median of its three: measured once each, one calibration of three found
  // the busy call 1.8x the call alone where the other two found it 0.74 and
  // 1.0x (2026-12-02).
  constexpr int kTurns = 3;
  const auto pull_tiny = [&] { return caller.pull(tiny_pull); };
  std::vector<CallCost> alone_turns, busy_turns;
  for (int turn = 0; turn < kTurns; ++turn) {
    const std::string again = turn == 0 ? "" : format(", turn %d", turn + 1);
    auto alone_call = run("pull 1 float" + again, 0, pull_tiny);
    if (!alone_call.ok()) return alone_call.status();
    alone_turns.push_back(*alone_call);
    auto neighbours = BusyNeighbours::start(120, o.work_dir);  // stop at the end of the turn
    if (!neighbours.ok()) return neighbours.status();
    auto busy_call = run("pull 1 float, no core idle" + again, 0, pull_tiny);
    if (!busy_call.ok()) return busy_call.status();
    busy_turns.push_back(*busy_call);
  }
  const CallCost base = median_cost(alone_turns);
  const CallCost busy_host = median_cost(busy_turns);
  // The same call from one caller and from two at once: the price of a
  // request that finds the ps awake.
  auto alone = ps_per_call(o, **cluster, idle, 1, tiny_pull);
  if (!alone.ok()) return alone.status();
  auto two_callers = ps_per_call(o, **cluster, idle, 2, tiny_pull);
  if (!two_callers.ok()) return two_callers.status();
  double woke_share = 1;
  const std::optional<double> awake_us = awake_price_us(*alone, *two_callers, &woke_share);
  // One caller pausing between calls: the price of a request by how long
  // the ps had idled (PsService.per_request_by_idle).
  std::vector<PsPerCall> paced = {*alone};
  for (int pause_us : {100, 300, 1000, 3000, 10000}) {
    auto c = ps_per_call(o, **cluster, idle, 1, tiny_pull, std::chrono::microseconds(pause_us));
    if (!c.ok()) return c.status();
    paced.push_back(*c);
  }
  const MessageShape tiny_request = message_shape(Request(PullRequest{{PullItem{tiny.shards[0].id, true, {}}}}));

  // Dense pulls and pushes over sizes: the bytes curves and every
  // optimizer's apply from 64 KiB (below, the apply is lost in the call's
  // noise). An apply reads and writes the variable and its slots once, so
  // beyond the caches it runs at memory speed: priced by its 1 MiB rate,
  // RMSprop on a 32 MiB variable was charged 0.66 of the ps's measured CPU.
  // Three passes, the second in reverse order, so that every size is
  // measured at three moments seconds apart; each side keeps the median of
  // its three medians. A transient state of the machine (this VM's speed
  // drifts by tens of percent within minutes) then spoils one pass of a
  // point, not the point: in one calibration a 256 KiB pull cost the ps
  // 843 us where a push of the same size cost it 114 us. (Two passes and
  // the lower of the two was biased low: the passes of one calibration
  // differed by a median of 15 % on the caller and 8 % on the ps, and the
  // grid was predicted too fast by a median of 3-6 %.)
  constexpr int kPasses = 3;
  std::vector<std::vector<CallCost>> pull_passes(sizes.size());
  std::vector<std::vector<std::vector<CallCost>>> push_passes(4, std::vector<std::vector<CallCost>>(sizes.size()));
  for (int pass = 0; pass < kPasses; ++pass) {
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      const std::size_t i = pass == 1 ? sizes.size() - 1 - k : k;
      const double kib = static_cast<double>(sizes[i]) / 1024;
      const std::string again = pass == 0 ? "" : format(", pass %d", pass + 1);
      const auto pb = pull_dense(dense[i]);
      auto pulled = run(format("pull dense %.0f KiB%s", kib, again.c_str()), 0, [&] { return caller.pull(pb); });
      if (!pulled.ok()) return pulled.status();
      pull_passes[i].push_back(*pulled);
      for (int k = 0; k < 4; ++k) {
        if (k > 0 && sizes[i] < kApplyFromBytes) continue;
        const auto sb = push_dense(k == 0 ? dense[i] : dense_by_optimizer[static_cast<std::size_t>(k)][i]);
        ParameterClient::PushBatch next;
        auto pushed = run(format("push dense %.0f KiB (%s)%s", kib, optimizer_name(kinds[k]).c_str(), again.c_str()),
                          k, [&] { return caller.push(std::move(next)); }, [&] { next = sb; });
        if (!pushed.ok()) return pushed.status();
        push_passes[static_cast<std::size_t>(k)][i].push_back(*pushed);
      }
    }
  }
  std::vector<CallCost> pulls;
  for (const auto& passes : pull_passes) pulls.push_back(median_cost(passes));
  std::vector<std::vector<CallCost>> pushes(4, std::vector<CallCost>(sizes.size()));  // by optimizer, size
  for (std::size_t k = 0; k < 4; ++k)
    for (std::size_t i = 0; i < sizes.size(); ++i)
      if (!push_passes[k][i].empty()) pushes[k][i] = median_cost(push_passes[k][i]);
  Curve ps_curve, receive_curve, send_curve;
  // How much of a call's CPU on both sides its round trip did not wait for:
  // over a stream the two ends copy a large message at once. Beyond a
  // one-float call's (whose sides take turns), by the one large message.
  Curve request_overlap, reply_overlap;
  auto overlap_us = [&](const CallCost& c) {
    return std::max(0.0, (c.caller_s + c.ps_s - c.rtt_s - (base.caller_s + base.ps_s - base.rtt_s)) * 1e6);
  };
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const CallCost& pulled = pulls[i];
    const CallCost& pushed = pushes[0][i];
    // Request + reply bytes as the simulator counts them (wire_size).
    const double bytes = static_cast<double>(sizes[i]) + 2.0 * static_cast<double>(tiny_request.bytes) + 16;
    ps_curve.emplace_back(bytes, std::max(0.0, (pulled.ps_s - base.ps_s) * 1e6));
    receive_curve.emplace_back(bytes, std::max(0.0, (pulled.caller_s - base.caller_s) * 1e6));
    send_curve.emplace_back(bytes, std::max(0.0, (pushed.caller_s - base.caller_s) * 1e6));
    const double one_way = static_cast<double>(sizes[i] + tiny_request.bytes);
    request_overlap.emplace_back(one_way, overlap_us(pushed));
    reply_overlap.emplace_back(one_way, overlap_us(pulled));
  }
  // An apply: a push's CPU on the ps beyond a pull of as many bytes.
  std::map<int, Curve> apply_curve;  // by optimizer: (bytes pushed, us), never cheaper for more bytes
  std::map<int, double> apply_per_kib;  // the rate at 1 MiB, for the report
  for (int k = 0; k < 4; ++k) {
    Curve& c = apply_curve[k];
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      if (sizes[i] < kApplyFromBytes) continue;
      const double us = (pushes[static_cast<std::size_t>(k)][i].ps_s - pulls[i].ps_s) * 1e6;
      c.emplace_back(static_cast<double>(sizes[i] + tiny_request.bytes), std::max(c.empty() ? 0.0 : c.back().second, us));
    }
    apply_per_kib[k] = sim::curve_cost(c, 1 << 20) / 1024;
  }
  // Many shards in one call: per item.
  double ps_item = 0, caller_item = 0;
  {
    ParameterClient::PullBatch all;
    for (const auto& v : items) all.dense(v);
    auto many = run("pull 64 one-float shards", 0, [&] { return caller.pull(all); });
    if (!many.ok()) return many.status();
    ps_item = std::max(0.0, (many->ps_s - base.ps_s) * 1e6 / 63);
    caller_item = std::max(0.0, (many->caller_s - base.caller_s) * 1e6 / 63);
  }

  // Rows: pulls of rows and sparse pushes (SGD, Adagrad, RMSprop) at each
  // width. Per row and per KiB of a row's values, fitted over the widths: a
  // row's cache lines grow with its width.
  auto interpolate = [](const Curve& c, double bytes) { return sim::curve_cost(c, bytes); };  // in c's units
  std::vector<double> receive_row, send_row;
  std::vector<double> ps_row_by_width, row_kib_by_width;
  std::map<int, std::vector<double>> apply_row_by_width;  // by optimizer
  // The row probe goes round with them, once before each row count: the
  // reference a later run's probe is compared with (the median).
  std::vector<double> row_probe_us;
  for (const RowTables& t : row_tables) {
    std::vector<double> ps_row;
    std::map<int, std::vector<double>> apply_row;  // us per row pushed beyond a pull's and the dense apply's
    const double row_kib = static_cast<double>(t.width) * 4 / 1024;
    for (std::int64_t rows : {256, 2048, 16384}) {
      row_probe_us.push_back(row_cpu_us(o.seconds_per_batch));
      const RowSets sets = draw_row_sets(rows, t.rows);
      const double n = sets.mean_rows;
      std::vector<ParameterClient::PullBatch> pulls_by_id;
      for (const RowIds& ids : sets.ids) pulls_by_id.emplace_back().rows(t.by_optimizer[0], ids);
      std::size_t next_set = 0;
      auto pulled = run(format("pull %.0f rows of %lld floats", n, static_cast<long long>(t.width)), 0,
                        [&] { return caller.pull(pulls_by_id[next_set++ % pulls_by_id.size()]); });
      if (!pulled.ok()) return pulled.status();
      const double bytes = n * (static_cast<double>(t.width) * 4 + 8);
      ps_row.push_back(((pulled->ps_s - base.ps_s) * 1e6 - interpolate(ps_curve, bytes)) / n);
      // Not Adam (k = 3): without lazy_adam, a sparse push decays the slots of
      // every row of the shard, a cost of the shard's size that no per-row
      // price describes (docs/fidelity.md).
      for (int k = 0; k < 3; ++k) {
        std::vector<ParameterClient::PushBatch> pushes_by_id;
        ParameterClient::PushBatch next;
        for (const RowIds& ids : sets.ids) {
          ParameterClient::PushBatch b;
          b.gradient_rows(t.by_optimizer[static_cast<std::size_t>(k)], ids,
                          Matrix::Constant(static_cast<Eigen::Index>(ids.size()), t.width, 1e-3f));
          pushes_by_id.push_back(std::move(b));
        }
        next_set = 0;
        auto pushed = run(format("push %.0f rows of %lld floats (%s)", n, static_cast<long long>(t.width),
                                 optimizer_name(kinds[k]).c_str()),
                          k, [&] { return caller.push(std::move(next)); },
                          [&] { next = pushes_by_id[next_set++ % pushes_by_id.size()]; });
        if (!pushed.ok()) return pushed.status();
        // The simulator charges the dense apply on a push's bytes (values and
        // ids) as well: what is left per row is the scatter's own.
        apply_row[k].push_back(((pushed->ps_s - pulled->ps_s) * 1e6 - interpolate(apply_curve[k], bytes)) / n);
        if (k == 0 && t.width == kRowWidths[0])
          send_row.push_back(((pushed->caller_s - base.caller_s) * 1e6 - interpolate(send_curve, bytes)) / n);
      }
      if (t.width == kRowWidths[0])
        receive_row.push_back(((pulled->caller_s - base.caller_s) * 1e6 - interpolate(receive_curve, bytes)) / n);
    }
    ps_row_by_width.push_back(median(ps_row));
    row_kib_by_width.push_back(row_kib);
    for (auto& [k, v] : apply_row) apply_row_by_width[k].push_back(median(v));
  }
  const RowPrice ps_row_price = fit_row_price(row_kib_by_width, ps_row_by_width);
  std::map<int, RowPrice> apply_row_price;
  for (const auto& [k, v] : apply_row_by_width) apply_row_price[k] = fit_row_price(row_kib_by_width, v);

  // Items by id: the same rows of one table pulled (SGD's ps: a pull by id
  // is the same on every ps) and pushed under each optimizer, from the table
  // as one shard and from the same table cut into kItemShards shards (an
  // item each); what the added items cost beyond a dense item's price. The
  // rows, their bytes and the table's size are the same both ways, so only
  // what splitting adds is left. Until 2026-12-02 this was one row of each
  // of 64 tiny tables against one row of one, back to back: those items
  // stayed in the caches, took the allocator's fastest path and were priced
  // at 0.1-0.3 us, where cutting ctr's tables from 1 into 4 shards cost its
  // ps about 2.8 us an added item (docs/fidelity.md).
  // Each row set by shard, once for every call below, and the items a
  // sharded call carries (a shard the set misses is not asked for).
  std::vector<std::map<std::size_t, RowIds>> item_splits;
  double sharded_items = 0;  // the mean
  for (const RowIds& ids : item_rows.ids) {
    item_splits.push_back(split_rows(ids, kItemShardRows));
    sharded_items += static_cast<double>(item_splits.back().size()) / static_cast<double>(item_rows.ids.size());
  }
  auto per_added_item = [&](int k, bool push) -> StatusOr<CallCost> {
    const std::size_t opt = static_cast<std::size_t>(k);
    std::vector<CallCost> costs;
    for (const bool sharded : {false, true}) {
      std::vector<ParameterClient::PullBatch> pulls;
      std::vector<ParameterClient::PushBatch> pushes;
      for (std::size_t set = 0; set < item_rows.ids.size(); ++set) {
        auto add = [&](const VariableLayout& v, const RowIds& rows) {
          if (push) pushes.back().gradient_rows(v, rows, Matrix::Constant(static_cast<Eigen::Index>(rows.size()), 16, 1e-3f));
          else pulls.back().rows(v, rows);
        };
        if (push) pushes.emplace_back();
        else pulls.emplace_back();
        if (!sharded) add(item_table[opt], item_rows.ids[set]);
        else
          for (const auto& [shard, rows] : item_splits[set]) add(item_shards[opt][shard], rows);
      }
      std::size_t next_set = 0;
      ParameterClient::PushBatch next;
      const std::string what = format("%s %.0f rows of %s (%s)", push ? "push" : "pull", item_rows.mean_rows,
                                      sharded ? format("%d shards", kItemShards).c_str() : "1 shard",
                                      optimizer_name(kinds[k]).c_str());
      auto c = push ? run(what, k, [&] { return caller.push(std::move(next)); },
                          [&] { next = pushes[next_set++ % pushes.size()]; })
                    : run(what, k, [&] { return caller.pull(pulls[next_set++ % pulls.size()]); });
      if (!c.ok()) return c.status();
      costs.push_back(*c);
    }
    const double n = sharded_items - 1;
    return CallCost{(costs[1].caller_s - costs[0].caller_s) / n, (costs[1].ps_s - costs[0].ps_s) / n, 0};
  };
  SparseItemPrices sparse_item;
  auto pulled_item = per_added_item(0, false);
  if (!pulled_item.ok()) return pulled_item.status();
  sparse_item.ps_pulled_us = pulled_item->ps_s * 1e6 - ps_item;
  sparse_item.caller_pulled_us = pulled_item->caller_s * 1e6 - caller_item;
  for (int k = 0; k < 3; ++k) {
    auto pushed_item = per_added_item(k, true);
    if (!pushed_item.ok()) return pushed_item.status();
    sparse_item.ps_pushed_us[k] = pushed_item->ps_s * 1e6 - ps_item;
    sparse_item.caller_pushed_us += (pushed_item->caller_s * 1e6 - caller_item) / 3;
  }

  // Into the profile. The caller's per-message cost is split evenly between
  // sending the request and receiving the reply.
  auto* ps = p.mutable_ps_service();
  ps->set_per_request_us(std::max(base.ps_s * 1e6, 0.1));
  ps->set_per_request_on_busy_host_us(std::max(busy_host.ps_s * 1e6, 0.1));
  if (awake_us) ps->set_per_request_when_awake_us(*awake_us);
  const Curve by_idle = idle_price_curve(paced, ps->per_request_us());
  ps->clear_per_request_by_idle();
  for (const auto& [idle_us, us] : by_idle) {
    auto* point = ps->add_per_request_by_idle();
    point->set_interval_us(idle_us);
    point->set_us(us);
  }
  ps->set_per_kib_us(0);
  ps->set_per_row_us(ps_row_price.per_row_us);
  ps->set_per_row_kib_us(ps_row_price.per_kib_us);
  ps->set_per_item_us(ps_item);
  ps->set_per_item_by_id_us(std::max(0.0, sparse_item.ps_pulled_us));
  ps->set_threads(1);  // a ps applies requests on its one executor thread
  add_curve(ps->mutable_bytes_curve(), ps_curve);
  for (int k = 0; k < 4; ++k) {
    auto* a = ps->add_apply();
    a->set_optimizer(static_cast<scenario::Optimizer::Kind>(static_cast<int>(kinds[k])));
    a->set_per_kib_us(apply_per_kib[k]);
    add_curve(a->mutable_bytes_curve(), apply_curve[k]);
    if (apply_row_price.count(k)) {
      a->set_per_row_pushed_us(apply_row_price[k].per_row_us);
      a->set_per_row_pushed_kib_us(apply_row_price[k].per_kib_us);
      a->set_per_item_pushed_by_id_us(std::max(0.0, sparse_item.ps_pushed_us[k] - ps->per_item_by_id_us()));
    }
  }
  auto* m = p.mutable_messages();
  auto* send = m->mutable_data_send();
  auto* receive = m->mutable_data_receive();
  send->set_per_message_us(base.caller_s * 1e6 / 2);
  receive->set_per_message_us(base.caller_s * 1e6 / 2);
  send->set_per_message_on_busy_host_us(busy_host.caller_s * 1e6 / 2);
  receive->set_per_message_on_busy_host_us(busy_host.caller_s * 1e6 / 2);
  send->set_per_item_us(caller_item / 2);
  receive->set_per_item_us(caller_item / 2);
  // A push's item by id is the caller's on sending; a pull's, on sending its
  // ids and on receiving its rows.
  send->set_per_item_by_id_us(std::max(0.0, sparse_item.caller_pushed_us));
  receive->set_per_item_by_id_us(std::max(0.0, sparse_item.caller_pulled_us - send->per_item_by_id_us()));
  send->set_per_row_us(std::max(0.0, median(send_row)));
  receive->set_per_row_us(std::max(0.0, median(receive_row)));
  add_curve(send->mutable_bytes_curve(), send_curve);
  add_curve(receive->mutable_bytes_curve(), receive_curve);
  add_curve(m->mutable_data_request_overlap(), request_overlap);
  add_curve(m->mutable_data_reply_overlap(), reply_overlap);
  *row_reference_us = median(row_probe_us);

  *report += table_text;
  *report += format("  ps: %.2f us per request, %.3f us per item, %.4f us per row id + %.4f us per KiB of its values; "
                    "bytes curve up to %.0f KiB; apply per KiB pushed at 1 MiB (a curve from 64 KiB): SGD %.3f, Adagrad %.3f, RMSprop %.3f, Adam %.3f "
                    "us; per row pushed (rows at random places in tables of %.0f KiB): SGD %.4f + %.4f, Adagrad %.4f "
                    "+ %.4f, RMSprop %.4f + %.4f us per KiB (ps idle CPU %.1f%% subtracted)\n",
                    ps->per_request_us(), ps_item, ps->per_row_us(), ps->per_row_kib_us(), o.max_bytes / 1024,
                    apply_per_kib[0], apply_per_kib[1], apply_per_kib[2], apply_per_kib[3], o.max_bytes / 1024,
                    apply_row_price[0].per_row_us, apply_row_price[0].per_kib_us, apply_row_price[1].per_row_us,
                    apply_row_price[1].per_kib_us, apply_row_price[2].per_row_us, apply_row_price[2].per_kib_us,
                    idle[0] * 100);
  std::sort(row_probe_us.begin(), row_probe_us.end());
  std::string probes;
  for (double us : row_probe_us) probes += format("%s%.4f", probes.empty() ? "" : " ", us);
  *report += format("  the speed probe's rows between the row measurements: %s us a row (the median is the profile's "
                    "speed)\n",
                    probes.c_str());
  *report += format("  caller: %.2f us per call, %.3f us per item, %.4f us per row sent, %.4f us per row received\n",
                    base.caller_s * 1e6, caller_item, send->per_row_us(), receive->per_row_us());
  *report += format("  an item by id beyond a dense item: ps %.3f us pulled, %.3f / %.3f / %.3f us pushed (SGD / "
                    "Adagrad / RMSprop); caller %.3f us pulled, %.3f us pushed\n",
                    sparse_item.ps_pulled_us, sparse_item.ps_pushed_us[0], sparse_item.ps_pushed_us[1],
                    sparse_item.ps_pushed_us[2], sparse_item.caller_pulled_us, sparse_item.caller_pushed_us);
  *report += format("  on a busy host (a process computing on every core): caller %.2f us, ps %.2f us per "
                    "one-float call\n",
                    busy_host.caller_s * 1e6, busy_host.ps_s * 1e6);
  *report += format("  the ps per one-float call, one caller: %.2f us, %.2f sleeps; two callers at once: %.2f us, %.2f "
                    "sleeps -> %.0f%% of requests woke it; %s\n",
                    alone->ps_us, alone->sleeps, two_callers->ps_us, two_callers->sleeps, woke_share * 100,
                    awake_us ? format("%.2f us a request that found it awake", *awake_us).c_str()
                             : "too few found it awake to price them (per_request_when_awake_us not set)");
  std::string paced_text;
  for (const PsPerCall& c : paced)
    paced_text += format("\n    a call every %8.1f us: ps %6.2f us, %.2f sleeps", c.period_us, c.ps_us, c.sleeps);
  std::string curve_text;
  for (const auto& [idle_us, us] : by_idle) curve_text += format(" (%.0f, %.2f)", idle_us, us);
  *report += format("  the ps per one-float call from one caller pausing between calls:%s\n"
                    "    -> a request's price by the ps's idle time before it (us, us):%s\n",
                    paced_text.c_str(), curve_text.c_str());
  *report += format("  both ends at once (CPU on both sides less the round trip) at %.0f KiB: a push's request %.1f us, "
                    "a pull's reply %.1f us\n",
                    o.max_bytes / 1024, request_overlap.back().second, reply_overlap.back().second);
  return absl::OkStatus();
}

// ---------------------------------------------------------------- compute


// A core's own cache in bytes: the largest cache level the kernel reports as
// not shared by all of the machine's cores (sysfs), or 1 MiB if it reports none.
double core_cache_bytes() {
  const long cores = std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN));
  double best = 0;
  for (int index = 0; index < 8; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index);
    std::ifstream size_file(dir + "/size"), shared_file(dir + "/shared_cpu_list"), type_file(dir + "/type");
    std::string size, shared, type;
    if (!(size_file >> size) || !(type_file >> type) || type == "Instruction") continue;
    std::getline(shared_file, shared);
    // "0-1" on a 2-core machine: shared by every core, not a core's own.
    const bool shared_by_all = cores > 1 && shared == "0-" + std::to_string(cores - 1);
    if (shared_by_all) continue;
    double bytes = std::atof(size.c_str());
    if (size.back() == 'K') bytes *= 1024;
    if (size.back() == 'M') bytes *= 1024 * 1024;
    best = std::max(best, bytes);
  }
  return best > 0 ? best : 1 << 20;
}

// The kernel's scheduler tick in microseconds: the resolution of the coarse
// clocks is one jiffy (1 / CONFIG_HZ); 4 ms (HZ 250) if it cannot be read.
double kernel_tick_us() {
  timespec res{};
  if (::clock_getres(CLOCK_MONOTONIC_COARSE, &res) != 0) return 4000;
  const double us = static_cast<double>(res.tv_sec) * 1e6 + static_cast<double>(res.tv_nsec) / 1e3;
  return us > 0 ? us : 4000;
}

// The "gradient" kernel's price: per call, per GFLOP, per GiB of values, per
// input element, and per GFLOP per doubling of its operands (weights and
// input) beyond a core's cache, over shapes and batches with weights up to
// the largest tensor.
void measure_compute(const CalibrationOptions& o, scenario::CostProfile& p, std::string* report) {
  struct Shape {
    int batch;
    std::int64_t rows, cols;
  };
  std::vector<Shape> shapes = {{32, 1, 1},      {32, 16, 16},    {32, 64, 64},     {32, 1024, 16},  {32, 256, 256},
                               {32, 2048, 64},  {64, 512, 512},  {128, 1024, 64},  {32, 8192, 16},  {256, 512, 512},
                               {16, 2048, 1024}, {128, 1024, 1024},
                               // Narrow variables under large batches: the batch x rows input outweighs the FLOPs.
                               {512, 2048, 4}, {2048, 512, 8}, {256, 8192, 2}};
  // Weights beyond the cache, up to the largest tensor: a quarter, half and
  // all of it, 2048 rows wide or 1024, the smaller the batch the larger they are.
  const auto largest = static_cast<std::int64_t>(o.max_bytes) / 4;  // floats
  shapes.push_back({256, 1024, std::max<std::int64_t>(1, largest / 4 / 1024)});
  shapes.push_back({128, 2048, std::max<std::int64_t>(1, largest / 2 / 2048)});
  shapes.push_back({64, 2048, std::max<std::int64_t>(1, largest / 2048)});
  const double cache = core_cache_bytes();
  std::vector<std::vector<double>> x;
  std::vector<double> y;
  *report += format("compute (synthetic::compute_gradient, the kernel kind \"gradient\"; a core's own cache %.0f KiB):\n",
                    cache / 1024);
  // The repeats go round the shapes, not shape after shape: this VM slows by
  // a quarter (at times by half) for seconds at a time, and a slow spell then
  // costs each shape one repeat, which its median drops, instead of all of
  // one shape's (a 2048 x 2048 shape measured 28 % slow that way once, and
  // the fit's price per doubling beyond the cache moved 28-fold between
  // calibrations).
  std::vector<Matrix> weights;
  for (const auto& s : shapes) weights.push_back(Matrix::Constant(s.rows, s.cols, 0.01f));
  std::vector<std::vector<double>> per_call(shapes.size());
  for (int b = 0; b < o.repeats; ++b)
    for (std::size_t i = 0; i < shapes.size(); ++i)
      per_call[i].push_back(gradient_cpu_seconds(weights[i], shapes[i].batch, o.seconds_per_batch / 2));
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const Shape& s = shapes[i];
    const double bytes = 4.0 * static_cast<double>(s.rows * s.cols);
    const double gflop = 4.0 * s.batch * static_cast<double>(s.rows * s.cols) / 1e9;
    const double ginputs = static_cast<double>(s.batch) * static_cast<double>(s.rows) / 1e9;
    const double operands = bytes + 4.0 * static_cast<double>(s.batch) * static_cast<double>(s.rows);  // weights and input
    const double doublings = operands > cache ? std::log2(operands / cache) : 0.0;
    const double t = median(per_call[i]);
    x.push_back({1.0, gflop, bytes / (1 << 30), ginputs, gflop * doublings});
    y.push_back(t);
    *report += format("  batch %4d, %5lld x %-5lld %9.5f GFLOP: %10.1f us\n", s.batch, static_cast<long long>(s.rows),
                      static_cast<long long>(s.cols), gflop, t * 1e6);
  }
  const auto fit = nonnegative_least_squares(x, y);
  auto* k = p.mutable_compute()->add_kernel();
  k->set_kind(synthetic::kGradientKernel);
  k->set_per_call_us(fit[0] * 1e6);
  k->set_per_gflop_s(fit[1]);
  k->set_per_gib_s(fit[2]);
  k->set_per_ginput_s(fit[3]);
  k->set_per_gflop_per_doubling_s(fit[4]);
  k->set_cache_bytes(cache);
  // Steps that list no kernels: the GFLOP price alone.
  p.mutable_compute()->set_per_gflop_s(std::max(fit[1], 1e-6));
  *report += format("  fit: %.2f us per call + %.4f s per GFLOP + %.4f s per GiB + %.4f s per G input elements + %.4f s "
                    "per GFLOP per doubling of the operands beyond %.0f KiB\n",
                    fit[0] * 1e6, fit[1], fit[2], fit[3], fit[4], cache / 1024);
}

// ---------------------------------------------------------------- a model spec's layers

// A dense layer (model::DenseLayer, ReLU, with bias) of `in` x `units` on
// `batch` records: a forward and a backward pass, with the input's gradient
// (a layer reading another's output) or without (a first layer, reading
// the features).
struct DenseSubject {
  std::string name;
  model::DenseLayer layer;
  Matrix input, kernel, bias, out, dout, dinput;
  std::vector<Matrix> dparams;
  model::Saved saved;
  bool input_gradient;
  DenseSubject(int batch, Eigen::Index in, Eigen::Index units, bool input_gradient)
      : name(format("dense %d x %lld -> %lld%s", batch, static_cast<long long>(in), static_cast<long long>(units),
                    input_gradient ? "" : ", no dx")),
        layer(in, units, model::Activation::kRelu, true),
        input(Matrix::Random(batch, in)),
        kernel(Matrix::Random(in, units) * 0.1f),
        bias(Matrix::Zero(units, 1)),  // a vector of `units`: one column (param_shapes)
        dout(Matrix::Random(batch, units)),
        dinput(batch, in),
        dparams(2),
        input_gradient(input_gradient) {}
  void run() {
    const Matrix* inputs[] = {&input};
    const Matrix* params[] = {&kernel, &bias};
    layer.forward(inputs, params, out, saved, model::ForwardMode{});
    dinput.setZero();
    Matrix* dinputs[] = {input_gradient ? &dinput : nullptr};
    layer.backward(inputs, params, out, dout, saved, dinputs, dparams);
  }
  KernelWork work() const {  // as model::ModelGraph::train_kernels describes it
    const auto batch = input.rows();
    double flops = layer.forward_flops(batch) + layer.backward_flops(batch);
    if (!input_gradient) flops -= 2.0 * static_cast<double>(input.size() * kernel.cols());
    return {"dense", flops, 4.0 * static_cast<double>(kernel.size() + bias.size()), static_cast<double>(input.size())};
  }
};

// An embedding (model::EmbeddingLayer, SUM) of `dim` looked up by `batch`
// records of `per_record` ids drawn uniformly from `vocabulary`: planning
// the distinct rows, the forward and the backward pass.
struct EmbeddingSubject {
  std::string name;
  model::EmbeddingLayer layer;
  model::IdBags bags;
  Matrix rows, out, dout, drows;
  EmbeddingSubject(int batch, int per_record, Eigen::Index dim, std::int64_t vocabulary)
      : name(format("embedding %d x %d ids of %lld, dim %lld", batch, per_record, static_cast<long long>(vocabulary),
                    static_cast<long long>(dim))),
        layer(dim, model::Combiner::kSum),
        dout(Matrix::Random(batch, dim)) {
    RandomStream random(static_cast<std::uint64_t>(vocabulary) * 31 + static_cast<std::uint64_t>(batch));
    for (int r = 0; r < batch; ++r) {
      for (int k = 0; k < per_record; ++k)
        bags.ids.push_back(static_cast<std::int64_t>(random.next_u64() % static_cast<std::uint64_t>(vocabulary)));
      bags.offsets.push_back(static_cast<std::int64_t>(bags.ids.size()));
    }
    rows = Matrix::Random(static_cast<Eigen::Index>(model::EmbeddingLayer::plan(bags).rows.size()), dim);
  }
  void run() {
    const auto lookup = model::EmbeddingLayer::plan(bags);
    layer.forward(bags, lookup, rows, out);
    layer.backward(bags, lookup, dout, drows);
  }
  KernelWork work() const {
    const auto ids = static_cast<double>(bags.ids.size());
    return {model::kEmbeddingKernel, layer.forward_flops(ids) + layer.backward_flops(ids),
            4.0 * ids * static_cast<double>(layer.output_width()), ids};
  }
};

// The layer kinds a model spec's step is priced by (model::ModelGraph::
// train_kernels): "dense" and "embedding", over shapes of the examples'
// layers and beyond them. Kinds without a price (concatenate, add, the
// loss) are charged at the GFLOP price.
void measure_layer_kernels(const CalibrationOptions& o, scenario::CostProfile& p, std::string* report) {
  std::vector<DenseSubject> dense;
  for (auto [batch, in, units, dx] : std::vector<std::tuple<int, int, int, bool>>{{8, 16, 16, true},
                                                                                  {32, 64, 1, true},
                                                                                  {64, 784, 256, false},
                                                                                  {64, 256, 128, true},
                                                                                  {64, 128, 10, true},
                                                                                  {256, 13, 1, false},
                                                                                  {256, 221, 128, true},
                                                                                  {256, 64, 1, true},
                                                                                  {128, 512, 512, false},
                                                                                  {128, 512, 512, true},
                                                                                  {512, 64, 64, true},
                                                                                  {1024, 256, 32, false}})
    dense.emplace_back(batch, in, units, dx);
  measure_kernel_kind("dense", o.repeats, o.seconds_per_batch / 4, dense, p, report);
  std::vector<EmbeddingSubject> embeddings;
  for (auto [batch, per_record, dim, vocabulary] :
       std::vector<std::tuple<int, int, int, std::int64_t>>{{256, 1, 1, 10},
                                                            {256, 1, 8, 100000},
                                                            {256, 1, 1, 1000000},
                                                            {64, 4, 16, 1000},
                                                            {1024, 1, 64, 1000000},
                                                            {512, 8, 8, 10000},
                                                            {32, 1, 2, 4}})
    embeddings.emplace_back(batch, per_record, dim, vocabulary);
  measure_kernel_kind(model::kEmbeddingKernel, o.repeats, o.seconds_per_batch / 4, embeddings, p, report);
}

// ---------------------------------------------------------------- assembly

// Thread CPU seconds per call of `copy`, over about `seconds` of calls.
template <typename Copy>
double copy_cpu_seconds(double seconds, Copy copy) {
  double sink = 0;
  const double t = cpu_seconds_per_call(seconds, [&] { sink += copy(); });
  return std::isfinite(sink) ? t : 0;  // reading the result keeps the copy from being optimised away
}

// A worker's copies of a dense variable of several shards (MessageCosts.
// data_assembly), at the calls' sizes up to the largest tensor: a read's two
// shards concatenated into one matrix, and a gradient cut into two shards,
// each result freed as a step frees it. The curve is the mean of the two
// (the simulator charges one price for both). The repeats go round the sizes,
// as the compute kernels' do, and each size keeps its median.
void measure_assembly(const CalibrationOptions& o, scenario::CostProfile& p, std::string* report) {
  constexpr std::int64_t kCols = 16;  // a 64-byte row
  std::vector<std::int64_t> sizes;
  for (std::int64_t s = 4096; s < static_cast<std::int64_t>(o.max_bytes); s *= 4) sizes.push_back(s);
  sizes.push_back(static_cast<std::int64_t>(o.max_bytes));
  struct Subject {
    VariableLayout layout;
    Matrix whole;
    std::vector<Matrix> shards;
  };
  std::vector<Subject> subjects;
  for (std::int64_t s : sizes) {
    const std::int64_t rows = std::max<std::int64_t>(2, s / (4 * kCols));
    Subject subject{VariableLayout{"copy", {rows, kCols}, VariableKind::kTrainable,
                                   {{1, 0, 0, rows / 2}, {2, 1, rows / 2, rows - rows / 2}}},
                    Matrix::Constant(rows, kCols, 1e-3f), {}};
    subject.shards = *split_dense(subject.layout, subject.whole);
    subjects.push_back(std::move(subject));
  }
  std::vector<std::vector<double>> concat(sizes.size()), split(sizes.size());
  const double seconds = o.seconds_per_batch / 2;
  for (int b = 0; b < o.repeats; ++b)
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      const Subject& s = subjects[i];
      concat[i].push_back(copy_cpu_seconds(seconds, [&] { return (*concat_shards(s.layout, s.shards))(0, 0); }));
      split[i].push_back(copy_cpu_seconds(seconds, [&] { return (*split_dense(s.layout, s.whole)).back()(0, 0); }));
    }
  *report += "a worker's copies of a variable of two shards (concat_shards of a read, split_dense of a gradient):\n";
  auto* curve = p.mutable_messages()->mutable_data_assembly();
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const double concat_us = median(concat[i]) * 1e6, split_us = median(split[i]) * 1e6;
    auto* point = curve->Add();
    point->set_bytes(4.0 * static_cast<double>(subjects[i].whole.size()));
    point->set_us((concat_us + split_us) / 2);
    *report += format("  %8.0f KiB: concat %9.1f us, split %9.1f us\n", point->bytes() / 1024, concat_us, split_us);
  }
}

// ---------------------------------------------------------------- job durations

// Half the distance between the 16th and 84th percentiles of the logs of
// `times`: a log-normal's sigma, which the odd call an interrupt stretched
// does not move.
double log_spread(std::vector<double> times) {
  std::sort(times.begin(), times.end());
  const auto at = [&](double q) { return times[static_cast<std::size_t>(q * static_cast<double>(times.size() - 1))]; };
  return (std::log(at(0.84)) - std::log(at(0.16))) / 2;
}

// How much one CPU job's time varies around its price (Hosts.
// duration_spread): compute_gradient calls of about 0.07, 1 and 4 ms here,
// each timed alone on this thread's CPU clock while every other core runs
// the same kernel (a busy host, where the simulator needs it: caches and
// memory bandwidth are shared there), going round the three so that a slow
// spell reaches all of them; the median of their three spreads. The
// simulator draws each job's time with it: with exact prices a busy
// simulated host can fall into step with its ticks and slices
// (docs/fidelity.md, "Jobs whose time varies, measured").
void measure_duration_spread(const CalibrationOptions& o, scenario::CostProfile& p, std::string* report) {
  struct Shape {
    int batch;
    std::int64_t rows, cols;
  };
  const std::vector<Shape> shapes = {{32, 256, 64}, {64, 512, 256}, {32, 1024, 1024}};
  std::vector<Matrix> weights;
  for (const auto& s : shapes) weights.push_back(Matrix::Constant(s.rows, s.cols, 0.01f));
  std::vector<std::vector<double>> times(shapes.size());
  const double seconds = std::max(0.75, o.seconds_per_batch * o.repeats);
  std::atomic<bool> stop{false};
  std::vector<std::jthread> others;
  const long cores = std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN));
  for (long c = 1; c < cores; ++c)
    others.emplace_back([&stop, w = weights[1], batch = shapes[1].batch] {
      float sink = 0;
      while (!stop.load(std::memory_order_relaxed)) sink += synthetic::compute_gradient(w, batch)(0, 0);
      return sink;
    });
  double sink = 0;
  const auto t0 = Clock::now();
  while (times[0].size() < 30 || seconds_since(t0) < seconds)
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      const double cpu0 = thread_cpu_seconds();
      sink += synthetic::compute_gradient(weights[i], shapes[i].batch)(0, 0);
      times[i].push_back(thread_cpu_seconds() - cpu0);
    }
  stop = true;
  others.clear();  // joins them
  std::vector<double> spreads;
  *report += format("job durations (synthetic::compute_gradient, each call timed alone, %ld other cores running it):\n", cores - 1);
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    spreads.push_back(log_spread(times[i]));
    *report += format("  batch %4d, %5lld x %-5lld %6zu calls: median %8.1f us, log spread %.3f\n", shapes[i].batch,
                      static_cast<long long>(shapes[i].rows), static_cast<long long>(shapes[i].cols), times[i].size(),
                      median(times[i]) * 1e6, spreads.back());
  }
  const double spread = std::isfinite(sink) ? median(spreads) : 0;
  p.mutable_hosts()->set_duration_spread(std::clamp(spread, 0.0, 1.0));
  *report += format("  hosts.duration_spread %.3f (the median)\n", p.hosts().duration_spread());
}

// ---------------------------------------------------------------- control plane

// One control cluster's figures, per step: its time and each role's CPU.
struct ControlStep {
  double interval_us = 0, chief_us = 0, worker_us = 0, ps_us = 0;
};

StatusOr<ControlStep> run_control_cluster(const CalibrationOptions& o, std::int64_t n, const std::string& work_dir) {
  RealRunOptions r;
  r.model.set_batch_size(64);
  auto* v = r.model.add_variable();
  v->set_name("w");
  v->add_shape(n);
  v->add_shape(n);
  r.workers = 1;
  r.ps = 1;
  r.warmup = 10;
  r.seconds = std::max(0.25, 1.5 * o.seconds_per_batch * o.repeats);  // about 1.1 s by default
  r.data_plane = o.data_plane;
  r.measure_cpu = true;
  r.work_dir = work_dir;
  std::filesystem::create_directories(r.work_dir);
  auto result = run_real(r);
  if (!result.ok()) return result.status();
  const double steps = static_cast<double>(result->measured_steps) / 1e6;  // per us
  return ControlStep{result->seconds / steps, result->cpu_s.at(TaskId::chief()) / steps,
                     result->cpu_s.at(TaskId::worker(0)) / steps, result->cpu_s.at(TaskId::ps(0)) / steps};
}

// The fastest of those clusters again with a process computing the gradient
// kernel on every core (tools/tune/busy_neighbours.h), so that no core is
// idle when a message wakes its task: half the coordinator's CPU a step is
// then a side's price on a busy host (MessageCosts.control_on_busy_host_us).
// On this VM the tutorial on one worker used 1.73 ms a step alone and
// 0.95 ms beside spinners on every core (2026-12-01); with more workers,
// whose cores are seldom idle, they changed 4-8 %.
Status measure_control_on_busy_host(const CalibrationOptions& o, std::int64_t n, scenario::CostProfile& p,
                                    std::string* report) {
  constexpr int kRounds = 2;
  auto neighbours = BusyNeighbours::start(120, o.work_dir);  // outlives the two runs; bounded if this process dies
  if (!neighbours.ok()) return neighbours.status();
  ControlStep mean;
  for (int round = 0; round < kRounds; ++round) {
    auto step = run_control_cluster(o, n, format("%s/control-busy-%d", o.work_dir.c_str(), round));
    if (!step.ok()) return step.status();
    mean.interval_us += step->interval_us / kRounds;
    mean.chief_us += step->chief_us / kRounds;
    mean.worker_us += step->worker_us / kRounds;
    mean.ps_us += step->ps_us / kRounds;
  }
  p.mutable_messages()->set_control_on_busy_host_us(mean.chief_us / 2);
  *report += format("  with a process computing on every core (no core idle): %lld x %lld %8.1f us a step "
                    "(%6.0f steps/s): coordinator %7.1f us, worker %8.1f us, ps %7.1f us -> %.1f us a message side on "
                    "a busy host\n",
                    static_cast<long long>(n), static_cast<long long>(n), mean.interval_us, 1e6 / mean.interval_us,
                    mean.chief_us, mean.worker_us, mean.ps_us, mean.chief_us / 2);
  return absl::OkStatus();
}

// Real one-worker, one-ps clusters training one n x n variable at batch 64,
// n from 64 to 2048: steps of about 0.5 to 45 ms, which the grid's models'
// span. The coordinator does nothing but the control plane, a closure sent
// and its result received per step, so half its CPU per step is a message
// side's price at that step's interval (MessageCosts.control_by_interval).
// It grows with the interval: a busy process finds its next message already
// there, one that slept is woken for each, and a longer sleep costs more to
// wake from (0.19 ms a step at 1,400 steps/s, 0.45 at 255, 1.2 at 22 here,
// 2026-11-30). One price at one pace was off by 2x on the grid's slower or
// faster rows. Twice round the sizes, so that a slow spell reaches more than
// one; each size the mean of its two.
Status measure_control(const CalibrationOptions& o, scenario::CostProfile& p, std::string* report) {
  const std::int64_t sizes[] = {64, 128, 256, 512, 1024, 2048};
  constexpr std::size_t kSizes = std::size(sizes);
  constexpr int kRounds = 2;
  std::vector<double> interval_us(kSizes), chief_us(kSizes), worker_us(kSizes), ps_us(kSizes);  // means
  for (int round = 0; round < kRounds; ++round) {
    for (std::size_t i = 0; i < kSizes; ++i) {
      auto step = run_control_cluster(o, sizes[i], format("%s/control%zu-%d", o.work_dir.c_str(), i, round));
      if (!step.ok()) return step.status();
      interval_us[i] += step->interval_us / kRounds;
      chief_us[i] += step->chief_us / kRounds;
      worker_us[i] += step->worker_us / kRounds;
      ps_us[i] += step->ps_us / kRounds;
    }
  }
  // By interval: the sizes' steps take longer as they grow, but a slow spell
  // can reorder two neighbours.
  std::vector<std::size_t> order(kSizes);
  for (std::size_t i = 0; i < kSizes; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return interval_us[a] < interval_us[b]; });
  std::vector<double> side_us;
  for (std::size_t i : order) side_us.push_back(chief_us[i] / 2);
  side_us = sim::nondecreasing(side_us);
  auto* m = p.mutable_messages();
  m->mutable_control_send()->set_per_message_us(0);
  m->mutable_control_receive()->set_per_message_us(0);
  m->clear_control_by_interval();
  *report += "control plane: one n x n variable, batch 64, 1 worker, 1 ps (the mean of 2 clusters each; CPU per step):\n";
  double previous = -1;
  for (std::size_t k = 0; k < kSizes; ++k) {
    const std::size_t i = order[k];
    *report += format("  %4lld x %-4lld %8.1f us a step (%6.0f steps/s): coordinator %7.1f us, worker %8.1f us, ps %7.1f us"
                      " -> %.1f us a message side\n",
                      static_cast<long long>(sizes[i]), static_cast<long long>(sizes[i]), interval_us[i],
                      1e6 / interval_us[i], chief_us[i], worker_us[i], ps_us[i], side_us[k]);
    if (!(interval_us[i] > previous)) continue;  // two sizes at one interval: the first
    auto* point = m->add_control_by_interval();
    point->set_interval_us(interval_us[i]);
    point->set_us(side_us[k]);
    previous = interval_us[i];
  }
  *report += "  (half the coordinator's a side, 4 sides a step; costs that fall with a longer interval pooled)\n";
  return measure_control_on_busy_host(o, sizes[0], p, report);
}

double largest_variable_bytes(const scenario::SyntheticModel& m) {
  double most = 0;
  for (const auto& v : m.variable()) {
    double e = 4;
    for (auto d : v.shape()) e *= static_cast<double>(d);
    most = std::max(most, e);
  }
  return most;
}

// ---------------------------------------------------------------- a crowded host

// The simulation's CPU per step of `workers` workers and one ps on this
// machine's one host, summed over the tasks, with the profile as it stands.
StatusOr<double> predicted_cpu_per_step(const scenario::SyntheticModel& model, int workers,
                                        const scenario::CostProfile& p) {
  sim::PredictRequest r;
  r.model = model;
  r.workers = workers;
  r.ps = 1;
  r.profile = p;
  r.profile.mutable_hosts()->set_placement(scenario::Hosts::ONE_HOST);
  auto predicted = sim::predict(r);
  if (!predicted.ok()) return predicted.status();
  return predicted->chief_cpu_per_step_s + predicted->worker_cpu_per_step_s + predicted->ps_cpu_per_step_s;
}

// Real clusters of one tiny variable (64 x 64, batch 64) and one ps, with
// 1, 2, 3, 4 and 6 workers: 3 to 8 tasks on this machine's cores. Each step
// is the same work whatever the workers (a closure, a pull, a push, its
// result), and its processes sleep and are woken about as often for it (12-14
// voluntary context switches a step here), but its CPU grows with the tasks:
// 0.50 ms with 3 and 0.71 with 5 (2026-11-30), as each woken process finds
// its caches filled by more others. The CPU a step takes beyond the
// simulation's, less the 1-worker cluster's excess, spread over the message
// jobs the simulation counts in the step, is the price of a message job at
// that many tasks per core (Hosts.crowded_message). The 1-worker cluster is
// where the message prices' own measurements ran (three tasks at most), so it
// is the curve's zero. Three times round the sizes, each the mean of its
// three: a cluster's CPU a step moved by a quarter between runs minutes apart,
// and the price is a difference of two of them.
Status measure_crowding(const CalibrationOptions& o, scenario::CostProfile& p, std::string* report) {
  const int workers[] = {1, 2, 3, 4, 6};
  constexpr std::size_t kSizes = std::size(workers);
  constexpr int kRounds = 3;
  scenario::SyntheticModel model;
  model.set_batch_size(64);
  auto* v = model.add_variable();
  v->set_name("w");
  v->add_shape(64);
  v->add_shape(64);
  std::vector<double> measured_us(kSizes);
  for (int round = 0; round < kRounds; ++round)
    for (std::size_t i = 0; i < kSizes; ++i) {
      RealRunOptions r;
      r.model = model;
      r.workers = workers[i];
      r.ps = 1;
      r.warmup = 10 * workers[i];  // as the control clusters': connections made, allocators warm
      r.seconds = std::max(0.5, 1.5 * o.seconds_per_batch * o.repeats);
      r.data_plane = o.data_plane;
      r.measure_cpu = true;
      r.work_dir = format("%s/crowd%zu-%d", o.work_dir.c_str(), i, round);
      std::filesystem::create_directories(r.work_dir);
      auto run = run_real(r);
      if (!run.ok()) return run.status();
      double cpu_s = 0;
      for (const auto& [task, s] : run->cpu_s) cpu_s += s;
      measured_us[i] += cpu_s / static_cast<double>(run->measured_steps) * 1e6 / kRounds;
    }
  // Message jobs a step, as the simulation counts them: its CPU a step with
  // every message job priced 20 us more, less without, over 20 us. (At 1 us
  // the jobs' drawn durations and the control plane's prices by interval,
  // which move with the schedule, blurred the count by a fifth.)
  constexpr double kProbeUs = 20;
  scenario::CostProfile without = p, probe = p;
  without.mutable_hosts()->clear_crowded_message();
  probe.mutable_hosts()->clear_crowded_message();
  auto* flat = probe.mutable_hosts()->add_crowded_message();
  flat->set_tasks_per_core(1);
  flat->set_us(kProbeUs);
  const double cores = p.hosts().cores();
  *report += format("a crowded host: one 64 x 64 variable, batch 64, 1 ps (CPU a step over all tasks, the mean of %d "
                    "clusters each; %.2f usable cores):\n", kRounds, cores);
  p.mutable_hosts()->clear_crowded_message();
  double base_excess_us = 0;
  for (std::size_t i = 0; i < kSizes; ++i) {
    auto predicted = predicted_cpu_per_step(model, workers[i], without);
    auto priced = predicted.ok() ? predicted_cpu_per_step(model, workers[i], probe) : predicted;
    if (!priced.ok()) return priced.status();
    const double predicted_us = *predicted * 1e6, jobs = (*priced - *predicted) * 1e6 / kProbeUs;
    const double excess_us = measured_us[i] - predicted_us;
    if (i == 0) base_excess_us = excess_us;
    const double price_us = jobs > 0 ? std::max(0.0, (excess_us - base_excess_us) / jobs) : 0;
    const double per_core = (workers[i] + 2) / cores;
    auto* point = p.mutable_hosts()->add_crowded_message();
    point->set_tasks_per_core(per_core);
    point->set_us(price_us);
    *report += format("  %d workers (%.2f tasks a core): %7.1f us a step measured, %7.1f simulated (%.1f message jobs)"
                      " -> %.2f us a message job\n",
                      workers[i], per_core, measured_us[i], predicted_us, jobs, price_us);
  }
  return absl::OkStatus();
}

}  // namespace

StatusOr<Calibration> calibrate(const CalibrationOptions& options) {
  CalibrationOptions o = options;
  if (o.model) o.max_bytes = std::max(largest_variable_bytes(*o.model), 4.0 * (1 << 20));
  Calibration out;
  std::string& report = out.report;
  scenario::CostProfile& p = out.profile;
  p.set_measured_on(describe_machine());
  p.set_data_plane(o.data_plane);

  // The speed probes, three times: before the measurements, between them and
  // after. A single probe was not enough on this VM: the one before the
  // measurements, after the machine had idled, read the kernel basket at
  // 7.4-12.0 ms where the others read 5.5-5.7, and the cores together 1.00x
  // to 1.22x slower than one. The profile keeps the median of the three
  // compute probes (the speed its prices were measured at, which `tune
  // --validate` re-prices against, and the usable cores), and the mean of
  // the round trips before and after: the first round trips after idling
  // wake halted cores and cost more (27 us against 15-18 us here), which is
  // the state of the probe, not of the machine the prices were measured on.
  const int cores = static_cast<int>(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN)));
  const double probe_seconds = std::max(0.9, o.seconds_per_batch * 6);
  const scenario::MachineSpeed before = probe_machine_speed(probe_seconds);

  double row_reference_us = 0;
  if (Status s = measure_calls(o, p, &row_reference_us, &report); !s.ok()) return s;
  measure_compute(o, p, &report);
  measure_layer_kernels(o, p, &report);
  if (Status s = measure_input_kernels(o, p, &report); !s.ok()) return s;
  measure_assembly(o, p, &report);
  measure_duration_spread(o, p, &report);
  const scenario::MachineSpeed between = probe_compute_speed(probe_seconds / 2);
  if (Status s = measure_control(o, p, &report); !s.ok()) return s;
  const scenario::MachineSpeed after = probe_machine_speed(probe_seconds);

  scenario::MachineSpeed& speed = *p.mutable_speed() = calibration_speed(before, between, after);
  speed.set_row_us(row_reference_us);
  report += format("speed: the kernel basket %.1f / %.1f / %.1f us alone before, between and after the measurements "
                   "(the profile keeps the median); rows %.4f / %.4f us a row before and after (%.4f between the row "
                   "measurements, kept); a one-byte round trip between two threads %.2f / %.2f us of CPU and "
                   "%.2f / %.2f us a way of neither thread's CPU before and after (hand-off; the profile keeps the means; "
                   "tools/tune/speed_probe.h)\n",
                   before.compute_us(), between.compute_us(), after.compute_us(), before.row_us(),
                   after.row_us(), speed.row_us(), before.round_trip_us(),
                   after.round_trip_us(), before.hand_off_us(), after.hand_off_us());
  p.mutable_hosts()->set_cores(usable_cores(cores, speed));
  // Linux shares them tick by tick (sim/ticked_cores.h): a woken thread may
  // wait for a core until the next tick while another core idles.
  p.mutable_hosts()->set_scheduler(scenario::Hosts::TICKED);
  p.mutable_hosts()->set_tick_us(kernel_tick_us());
  report += format("cores: %d online; compute_gradient kernels on all at once take %.2fx the CPU time they take alone (shared "
                   "caches, memory bandwidth; %.2f / %.2f / %.2fx, the median): %.2f usable, scheduled tick by tick every "
                   "%.0f us (the kernel's tick)\n",
                   cores, speed.together_slowdown(), before.together_slowdown(), between.together_slowdown(),
                   after.together_slowdown(), p.hosts().cores(), p.hosts().tick_us());
  // Loopback: tasks of one host reach each other through the kernel, not a
  // link. A message's latency is the probe's hand-off: the time from a write
  // until the reader, asleep, runs (no CPU of either side; 0.1 us at least,
  // a hand-off too short to measure). Host links take the same latency and
  // keep their default bandwidth, for scenarios with a host per task.
  const double latency_us = std::max(0.1, p.speed().hand_off_us());
  p.mutable_network()->set_loopback_latency_us(latency_us);
  p.mutable_network()->set_host_latency_us(latency_us);
  report += format("loopback latency: %.2f us a message (the probes' hand-off, mean of both)\n", latency_us);
  p.mutable_compute()->set_per_example_s(0);  // a synthetic step's work is all in its kernels
  p.mutable_compute()->mutable_step_time()->set_constant_s(0);  // every cost above has its cause
  // Last: it compares real clusters with the simulation at the prices above.
  if (Status s = measure_crowding(o, p, &report); !s.ok()) return s;
  report += "load average after: " + load_average() + "\n";
  return out;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}


std::string profile_text(const Calibration& c) {
  std::string out = "# CostProfile (sim/scenario.proto) written by `twinps calibrate`.\n"
                    "# Every timing is a median over repeats; see tools/tune/calibration.h for the method.\n";
  std::istringstream lines(c.report);
  for (std::string line; std::getline(lines, line);) out += "# " + line + "\n";
  std::string body;
  google::protobuf::TextFormat::PrintToString(c.profile, &body);
  return out + body;
}

}  // namespace twinps::cli
