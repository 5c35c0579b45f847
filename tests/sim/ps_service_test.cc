// A parameter server's service queue: first come first served, one request per
// thread at a time, service time from the request, its reply and the rows the
// store updated.
#include "sim/ps_service.h"

#include <gtest/gtest.h>

#include <limits>

#include "inmemory/in_memory_network.h"
#include "inmemory/deterministic_engine.h"
#include "core/ps/ps_node.h"
#include "core/runtime/runtime.h"
#include "sim/hosts.h"
#include "sim/network.h"

namespace twinps::sim {
namespace {

struct PsFixture {
  explicit PsFixture(int threads = 1, NetworkModel* links = nullptr) : net(engine, links) {
    model.per_request = 100 * kMicrosecond;
    model.per_byte_ns = 0;
    model.per_row_ns = 1000;
    model.threads = threads;
    auto inner = net.attach(TaskId::ps(0), ps_ex);
    transport = std::make_unique<PsServiceTransport>(
        TaskId::ps(0), ps_ex, std::move(inner), model, stats, trace,
        [this] { return node ? node->store().stats().rows_updated : 0; }, &pushes, links);
    runtime = std::make_unique<Runtime>(Runtime{TaskId::ps(0), 7, ps_ex, *transport, trace, RandomStream(1), nullptr});
    node = std::make_unique<ParameterServerNode>(*runtime);
    CreateShardsRequest create;
    ShardState s;
    s.spec = ShardSpec{1, "w", VariableKind::kTrainable, 100, 4, /*meta=*/true};
    create.shards = {s};
    EXPECT_TRUE(node->store().create_shards(create).ok());
  }
  // A gradient for rows 0..rows-1 of the meta shard (no values).
  PushRequest push_rows(std::int64_t rows) {
    Update u;
    u.shard = 1;
    u.sparse = true;
    for (std::int64_t r = 0; r < rows; ++r) u.rows.push_back(r);
    u.meta = MetaTensor{rows, 4};
    return PushRequest{{}, {u}, {}};
  }

  DeterministicEngine engine;
  InMemoryNetwork net;
  NodeExecutor ps_ex{engine, engine.add_node()};
  NodeExecutor worker_ex{engine, engine.add_node()};
  std::unique_ptr<Transport> worker = net.attach(TaskId::worker(0), worker_ex);
  PsServiceModel model;
  PsServiceStats stats;
  NullTraceSink trace;
  std::vector<PushRecord> pushes;
  std::unique_ptr<PsServiceTransport> transport;
  std::unique_ptr<Runtime> runtime;
  std::unique_ptr<ParameterServerNode> node;
};

// A model that charges 10 us a request and nothing else, for a test to add
// the prices it checks.
PsServiceModel ten_us_a_request() {
  PsServiceModel m;
  m.per_request = 10 * kMicrosecond;
  m.per_byte_ns = 0;
  m.per_row_ns = 0;
  return m;
}

// The service time formula, by hand: the optimizer's per-row price is paid
// by a push's scattered rows, never by a pull's gathered ones.
TEST(PsServiceModelTest, RowsPushedPayTheOptimizersPerRowApply) {
  PsServiceModel m = ten_us_a_request();
  m.per_row_ns = 5;
  m.apply_per_row_ns = 80;
  EXPECT_EQ(m.service(1000, 0, 100, 1, /*push=*/false), 10 * kMicrosecond + 100 * 5);
  EXPECT_EQ(m.service(1000, 0, 100, 1, /*push=*/true), 10 * kMicrosecond + 100 * (5 + 80));
  EXPECT_EQ(m.service(1000, 0, 0, 1, /*push=*/true), 10 * kMicrosecond);  // a dense push scatters no rows
}

// Items that name rows by id pay per_item_by_id on top of per_item, and a
// sparse gradient pushed the optimizer's apply_per_item_by_id besides, by hand.
TEST(PsServiceModelTest, AnItemByIdPaysItsPriceAndAPushedOneTheOptimizersToo) {
  PsServiceModel m = ten_us_a_request();
  m.per_item_ns = 100;
  m.per_item_by_id_ns = 300;
  m.apply_per_item_by_id_ns = 50;
  // A pull of 4 shards, 3 of them by id: 4 x 100 + 3 x 300.
  EXPECT_EQ(m.service(1000, 0, 0, 4, false, 0, 0, Wake::kIdleCore, 0, 3, 0), 10 * kMicrosecond + 400 + 900);
  // A push of 3 sparse gradients and a dense one: 4 x 100 + 3 x (300 + 50).
  EXPECT_EQ(m.service(1000, 0, 0, 4, true, 0, 0, Wake::kIdleCore, 0, 3, 3), 10 * kMicrosecond + 400 + 1050);
  // Dense items alone pay per_item only.
  EXPECT_EQ(m.service(1000, 0, 0, 4, true), 10 * kMicrosecond + 400);
}

// A request served while no core of the ps's host is idle pays
// per_request_on_busy_host in place of per_request, and the rest as before;
// unset, per_request either way.
TEST(PsServiceModelTest, ARequestOnABusyHostPaysTheBusyHostsFixedPrice) {
  PsServiceModel m = ten_us_a_request();
  m.per_row_ns = 5;
  EXPECT_EQ(m.service(1000, 0, 100, 1, false, 0, 0, Wake::kBusyCore), 10 * kMicrosecond + 500);
  m.per_request_on_busy_host = 4 * kMicrosecond;
  EXPECT_EQ(m.service(1000, 0, 100, 1, false, 0, 0, Wake::kBusyCore), 4 * kMicrosecond + 500);
  EXPECT_EQ(m.service(1000, 0, 100, 1, false, 0, 0, Wake::kIdleCore), 10 * kMicrosecond + 500);
}

// A measured curve, by hand: linear from (0, 0) through its points, and
// beyond the last by the last segment's slope.
TEST(CostCurveTest, InterpolatesFromZeroAndExtendsTheLastSlope) {
  const CostCurve c = {{1024, 1000}, {4096, 7000}};
  EXPECT_DOUBLE_EQ(curve_cost(c, 512), 500);
  EXPECT_DOUBLE_EQ(curve_cost(c, 2048), 1000 + 6000.0 * 1024 / 3072);
  EXPECT_DOUBLE_EQ(curve_cost(c, 8192), 7000 + 6000.0 / 3072 * 4096);  // 15,000
  EXPECT_DOUBLE_EQ(curve_cost({}, 8192), 0);
}

// Held level outside its points (a wake-up's cost settles), linear between.
TEST(CostCurveTest, LevelCurveHoldsItsEndsLevel) {
  const CostCurve c = {{1000, 2000}, {10000, 11000}};
  EXPECT_DOUBLE_EQ(level_curve_cost(c, 0), 2000);
  EXPECT_DOUBLE_EQ(level_curve_cost(c, 500), 2000);
  EXPECT_DOUBLE_EQ(level_curve_cost(c, 4000), 2000 + 9000.0 * 3000 / 9000);  // 5,000
  EXPECT_DOUBLE_EQ(level_curve_cost(c, 1e12), 11000);
  EXPECT_DOUBLE_EQ(level_curve_cost(c, std::numeric_limits<double>::infinity()), 11000);
  EXPECT_DOUBLE_EQ(level_curve_cost({}, 4000), 0);
}

// The curve through noisy measurements of a cost that only grows: points
// that fall are pooled into their mean, by hand.
TEST(CostCurveTest, NondecreasingPoolsPointsThatFall) {
  EXPECT_EQ(nondecreasing({1, 3, 2, 4}), (std::vector<double>{1, 2.5, 2.5, 4}));
  EXPECT_EQ(nondecreasing({5, 1, 3}), (std::vector<double>{3, 3, 3}));  // (5 + 1) / 2 = 3, then 3 >= 3
  EXPECT_EQ(nondecreasing({1, 2, 3}), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(nondecreasing({}), std::vector<double>{});
}

// With an apply curve, a push's apply is priced by its bytes on the curve
// (a large variable's apply streams from memory and costs more per KiB),
// not by the per-byte rate; a pull pays no apply.
TEST(PsServiceModelTest, AnApplyCurveReplacesThePerByteApply) {
  PsServiceModel m = ten_us_a_request();
  m.apply_per_byte_ns = 1;
  m.apply_curve = {{1024, 1000}, {4096, 7000}};
  EXPECT_EQ(m.service(2048, 0, 0, 1, /*push=*/true), 10 * kMicrosecond + 3000);
  EXPECT_EQ(m.service(8192, 0, 0, 1, /*push=*/true), 10 * kMicrosecond + 15000);
  EXPECT_EQ(m.service(8192, 0, 0, 1, /*push=*/false), 10 * kMicrosecond);
  m.apply_curve.clear();
  EXPECT_EQ(m.service(8192, 0, 0, 1, /*push=*/true), 10 * kMicrosecond + 8192);
}

TEST(PsServiceTest, RequestsWaitForTheServerInArrivalOrder) {
  PsFixture f;
  std::vector<std::pair<int, Time>> replies;
  for (int i = 0; i < 3; ++i)
    f.worker->call(TaskId::ps(0), f.push_rows(10 * (i + 1)), {},
                   [&, i](StatusOr<Response> r) {
                     EXPECT_TRUE(r.ok()) << r.status();
                     replies.emplace_back(i, f.engine.now());
                   });
  f.engine.run();
  // 100 us per request + 1 us per row: 110, then 120 more, then 130 more.
  ASSERT_EQ(replies.size(), 3u);
  EXPECT_EQ(replies[0], std::make_pair(0, Time{110 * kMicrosecond}));
  EXPECT_EQ(replies[1], std::make_pair(1, Time{230 * kMicrosecond}));
  EXPECT_EQ(replies[2], std::make_pair(2, Time{360 * kMicrosecond}));
  EXPECT_EQ(f.stats.requests, 3u);
  EXPECT_EQ(f.stats.rows_updated, 60u);
  EXPECT_EQ(f.stats.busy, 360 * kMicrosecond);
  EXPECT_EQ(f.stats.max_queue, 2u) << "requests waiting while one is served";
  EXPECT_EQ(f.stats.max_wait, 230 * kMicrosecond);
  ASSERT_EQ(f.pushes.size(), 3u);
  EXPECT_TRUE(f.pushes[2].applied);
  EXPECT_EQ(f.pushes[2].at, 230 * kMicrosecond) << "applied when its service starts";
}

// Rows read or written by id pay per byte of their values on top of per row
// (their cache lines), and a push's rows the optimizer's per byte as well.
TEST(PsServiceModelTest, RowsPayPerByteOfTheirValues) {
  PsServiceModel m;
  m.per_request = 10 * kMicrosecond;
  m.per_byte_ns = 0;
  m.per_row_ns = 5;
  m.per_row_byte_ns = 2;
  m.apply_per_row_byte_ns = 3;
  EXPECT_EQ(m.service(1000, 0, 100, 1, /*push=*/false, /*row_bytes=*/1600), 10 * kMicrosecond + 100 * 5 + 1600 * 2);
  EXPECT_EQ(m.service(1000, 0, 100, 1, /*push=*/true, 1600, /*pushed_row_bytes=*/1600),
            10 * kMicrosecond + 100 * 5 + 1600 * (2 + 3));
}

// Which values count as rows: a sparse push's (from the request), and the
// items of a pull read by id (from its answer); never a dense shard's.
TEST(RowValuesTest, CountsSparseRowsAndRowsPulledByIdOnly) {
  PushRequest push;
  Update sparse;
  sparse.sparse = true;
  sparse.rows = {3, 9};
  sparse.values = Matrix::Zero(2, 8);  // 64 bytes
  Update dense;
  dense.values = Matrix::Zero(4, 8);
  push.updates = {sparse, dense};
  push.then_pull.items = {PullItem{1, true, {}}, PullItem{2, false, {5, 6, 7}}};
  const RowValues values = row_values(Request(push));
  EXPECT_EQ(values.pushed, 64u);
  PushResponse answer;
  answer.pulled.items.resize(2);
  answer.pulled.items[0].values = Matrix::Zero(10, 8);  // the whole shard: not rows
  answer.pulled.items[1].meta = MetaTensor{3, 8};       // 3 rows read by id, timing-only
  EXPECT_EQ(values.pulled(StatusOr<Response>(Response(answer))), 96u);
  EXPECT_EQ(values.pulled(StatusOr<Response>(absl::InternalError("refused"))), 0u);

  PullRequest pull;
  pull.items = {PullItem{2, false, {1}}};
  PullResponse pulled;
  pulled.items.resize(1);
  pulled.items[0].values = Matrix::Zero(1, 8);
  EXPECT_EQ(row_values(Request(pull)).pulled(StatusOr<Response>(Response(pulled))), 32u);
  EXPECT_EQ(row_values(Request(PullRequest{{PullItem{1, true, {}}}})).pulled(StatusOr<Response>(Response(pulled))), 0u);
}

// Through the ps: a sparse push of 10 rows of 4 floats (160 bytes) pays
// 100 us + 10 x 1 us + 160 x (10 + 100) ns.
TEST(PsServiceTest, ARowPushPaysForItsRowsValues) {
  PsFixture f;
  f.model.per_row_byte_ns = 10;
  f.model.apply_per_row_byte_ns = 100;
  Time at = -1;
  f.worker->call(TaskId::ps(0), f.push_rows(10), {}, [&](StatusOr<Response> r) {
    EXPECT_TRUE(r.ok()) << r.status();
    at = f.engine.now();
  });
  f.engine.run();
  EXPECT_EQ(at, 110 * kMicrosecond + 160 * 110);
}

TEST(PsServiceTest, ThreadsServeInParallel) {
  PsFixture f(2);
  std::vector<Time> at;
  for (int i = 0; i < 3; ++i)
    f.worker->call(TaskId::ps(0), f.push_rows(0), {}, [&](StatusOr<Response>) { at.push_back(f.engine.now()); });
  f.engine.run();
  EXPECT_EQ(at, (std::vector<Time>{100 * kMicrosecond, 100 * kMicrosecond, 200 * kMicrosecond}));
}

TEST(PsServiceTest, ARefusedPushIsServedAndRecordedAsNotApplied) {
  PsFixture f;
  StatusOr<Response> got = absl::UnknownError("none");
  f.worker->call(TaskId::ps(0), f.push_rows(1000), {}, [&](StatusOr<Response> r) { got = std::move(r); });
  f.engine.run();
  EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument) << "rows 100 and up do not exist in a 100-row shard";
  ASSERT_EQ(f.pushes.size(), 1u);
  EXPECT_FALSE(f.pushes[0].applied);
}

TEST(PsServiceTest, WithTheNetworkModelTheReplyLeavesWhenServiceEnds) {
  NetworkOptions o;
  o.host = LinkParams{1, 1000};  // 1 Gbit/s (a byte per 8 ns), 1 us per hop
  NetworkModel links(ClusterShape{1, 1}, o);
  PsFixture f(1, &links);
  const PushRequest request = f.push_rows(10);
  const auto request_ns = static_cast<Time>(wire_size(Request(request)) * 8);
  const auto reply_ns = static_cast<Time>(wire_size(Response(PushResponse{})) * 8);
  Time at = -1;
  f.worker->call(TaskId::ps(0), request, {}, [&](StatusOr<Response> r) {
    EXPECT_TRUE(r.ok());
    at = f.engine.now();
  });
  f.engine.run();
  // Two hops each way; 100 us + 10 rows x 1 us of service in between.
  EXPECT_EQ(at, (request_ns + 2000) + 110 * kMicrosecond + (reply_ns + 2000));
  EXPECT_EQ(f.stats.busy, 110 * kMicrosecond);
}

// A worker and a ps on one host of `cores` cores: the ps's service and both
// sides' message CPU are jobs on its cores (sim/hosts.h).
struct PsOnHost {
  PsOnHost(double cores, NetworkOptions o)
      : hosts(shape, {HostOptions::Placement::kOneHost, 1, cores}, sim_ex, fluid),
        links(shape, std::move(o), &hosts, &sim_ex, &fluid),
        net(engine, &links) {
    model = ten_us_a_request();
    model.per_request = 100 * kMicrosecond;
    auto inner = net.attach(TaskId::ps(0), ps_ex);
    transport = std::make_unique<PsServiceTransport>(TaskId::ps(0), ps_ex, std::move(inner), model, stats, trace,
                                                     [] { return 0; }, nullptr, &links, &hosts);
    runtime = std::make_unique<Runtime>(Runtime{TaskId::ps(0), 7, ps_ex, *transport, trace, RandomStream(1), nullptr});
    node = std::make_unique<ParameterServerNode>(*runtime);
    CreateShardsRequest create;
    ShardState s;
    s.spec = ShardSpec{1, "w", VariableKind::kTrainable, 4, 4};
    s.value = Matrix::Zero(4, 4);
    create.shards = {s};
    EXPECT_TRUE(node->store().create_shards(create).ok());
  }
  // When a pull of the shard comes back to the worker.
  Time pull() {
    Time at = -1;
    worker->call(TaskId::ps(0), PullRequest{{PullItem{1, true, {}}}}, {}, [&](StatusOr<Response> r) {
      EXPECT_TRUE(r.ok()) << r.status();
      at = engine.now();
    });
    engine.run();
    return at;
  }

  ClusterShape shape{1, 1};
  DeterministicEngine engine;
  NodeExecutor sim_ex{engine, engine.add_node()};
  FluidSystem fluid{sim_ex};
  HostModel hosts;
  NetworkModel links;
  InMemoryNetwork net;
  NodeExecutor ps_ex{engine, engine.add_node()};
  NodeExecutor worker_ex{engine, engine.add_node()};
  std::unique_ptr<Transport> worker = net.attach(TaskId::worker(0), worker_ex);
  PsServiceModel model;
  PsServiceStats stats;
  NullTraceSink trace;
  std::unique_ptr<PsServiceTransport> transport;
  std::unique_ptr<Runtime> runtime;
  std::unique_ptr<ParameterServerNode> node;
};

// Over a stream the caller reads a reply while the ps still writes it
// (PsServiceModel::reply_overlap): the reply leaves 40 us before the ps's
// 100 us of service end, and the ps works on beside the caller's 50 us.
TEST(PsServiceTest, OnAHostAReplyLeavesItsOverlapBeforeTheServiceEnds) {
  NetworkOptions o;
  o.cpu.data_receive.per_message_ns = 50000;
  o.loopback_latency = 1000;
  {
    PsOnHost f(/*cores=*/2, o);
    EXPECT_EQ(f.pull(), 1000 + 100000 + 1000 + 50000) << "no overlap: one side after the other";
  }
  {
    PsOnHost f(2, o);
    f.model.reply_overlap = {{1, 40000}, {1e12, 40000}};  // 40 us at every size
    EXPECT_EQ(f.pull(), 1000 + 60000 + 1000 + 50000);
    EXPECT_EQ(f.stats.busy, 100 * kMicrosecond);
    EXPECT_EQ(f.hosts.task_cpu(f.hosts.slot(TaskId::ps(0))), 100 * kMicrosecond) << "the ps pays all of its service";
  }
  {
    // One core: the two sides share it, and only the latency is saved.
    //   1..61    service (60 of 100)           -> the reply leaves
    //   61..62   its rest alone (1 of 40)      -> the reply arrives
    //   62..140  the rest (39) and receive at 1/2 -> receive: 39 of 50
    //   140..151 receive alone
    PsOnHost f(1, o);
    f.model.reply_overlap = {{1, 40000}, {1e12, 40000}};
    EXPECT_EQ(f.pull(), 151000);
  }
}

// Two pulls sent at once: the first wakes the ps (100 us); the second
// arrives while the ps serves the first, waits behind it and pays
// per_request_when_awake (30 us) instead; unset, 100 us as well. Cores are
// not counted here (a core a thread).
TEST(PsServiceTest, ARequestThatArrivesWhileThePsWorksPaysTheAwakePrice) {
  NetworkOptions o;
  o.loopback_latency = 1000;
  for (const bool priced : {false, true}) {
    PsOnHost f(/*cores=*/0, o);
    if (priced) f.model.per_request_when_awake = 30 * kMicrosecond;
    std::vector<Time> at;
    for (int i = 0; i < 2; ++i)
      f.worker->call(TaskId::ps(0), PullRequest{{PullItem{1, true, {}}}}, {}, [&](StatusOr<Response> r) {
        EXPECT_TRUE(r.ok()) << r.status();
        at.push_back(f.engine.now());
      });
    f.engine.run();
    const Duration second = priced ? 30 * kMicrosecond : 100 * kMicrosecond;
    EXPECT_EQ(at, (std::vector<Time>{1000 + 100000 + 1000, 1000 + 100000 + second + 1000}));
    EXPECT_EQ(f.hosts.task_cpu(f.hosts.slot(TaskId::ps(0))), 100 * kMicrosecond + second);
  }
}

// A request that wakes the ps is priced by how long it had idled
// (per_request_by_idle: 20 us after 0.1 ms or less, 80 us after 1 ms or
// more, linear between): the first pull finds a ps that never worked (80
// us), the second comes 0.55 ms after the first ended (50 us), the third at
// once (20 us). Awake or on a busy host the other prices come first (tested
// above); unset, every request costs per_request (100 us).
TEST(PsServiceTest, ARequestThatWakesThePsPaysByHowLongItIdled) {
  NetworkOptions o;
  o.loopback_latency = 1000;
  for (const bool priced : {false, true}) {
    PsOnHost f(/*cores=*/2, o);
    if (priced) f.model.per_request_by_idle = {{100000, 20000}, {1000000, 80000}};
    std::vector<Duration> ps_cpu;
    const int ps = f.hosts.slot(TaskId::ps(0));
    Time last = f.pull();
    ps_cpu.push_back(f.hosts.task_cpu(ps));
    // The reply left as the service ended, 1 us before it arrived: wait so
    // that the next request arrives 550 us after that.
    f.sim_ex.post_at(last + 550000 - 2000, [] {});
    f.engine.run();
    last = f.pull();
    ps_cpu.push_back(f.hosts.task_cpu(ps));
    f.pull();
    ps_cpu.push_back(f.hosts.task_cpu(ps));
    const std::vector<Duration> priced_cpu = {80000, 80000 + 50000, 80000 + 50000 + 20000};
    const std::vector<Duration> flat_cpu = {100000, 200000, 300000};
    EXPECT_EQ(ps_cpu, priced ? priced_cpu : flat_cpu);
  }
}

// Whether the ps's host has an idle core is read as its service starts: on
// one core with the chief computing, the request pays the busy host's 30 us
// (at half the core: 60 us) instead of 100 us alone.
TEST(PsServiceTest, OnABusyHostARequestPaysTheBusyHostsFixedPrice) {
  NetworkOptions o;
  o.loopback_latency = 1000;
  for (const bool chief_computes : {false, true}) {
    PsOnHost f(/*cores=*/1, o);
    f.model.per_request_on_busy_host = 30 * kMicrosecond;
    if (chief_computes) f.hosts.run(0, 1000 * kMicrosecond, [] {});
    EXPECT_EQ(f.pull(), chief_computes ? 1000 + 60000 + 1000 : 1000 + 100000 + 1000);
    EXPECT_EQ(f.hosts.task_cpu(f.hosts.slot(TaskId::ps(0))), (chief_computes ? 30 : 100) * kMicrosecond);
  }
}

}  // namespace
}  // namespace twinps::sim
