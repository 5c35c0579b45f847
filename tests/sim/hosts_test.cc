// Hosts and their cores, and the network's asynchronous path (flow sharing,
// loopback, each side's CPU per message), against hand-computed times.
#include "sim/hosts.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "inmemory/deterministic_engine.h"
#include "sim/network.h"
#include "sim/scenario_loader.h"
#include "sim/tuner.h"

namespace twinps::sim {
namespace {

struct Bed {
  explicit Bed(ClusterShape shape, HostOptions hosts_options = {}, NetworkOptions net_options = {})
      : hosts(shape, hosts_options, ex, fluid), network(shape, std::move(net_options), &hosts, &ex, &fluid) {}
  DeterministicEngine engine;
  NodeExecutor ex{engine, engine.add_node()};
  FluidSystem fluid{ex};
  HostModel hosts;
  NetworkModel network;

  // Sends and records the arrival time in `at`.
  void send(const TaskId& from, const TaskId& to, std::size_t bytes, Time& at, bool data_plane = true) {
    MessageShape m;
    m.bytes = bytes;
    m.data_plane = data_plane;
    ASSERT_TRUE(network.send(from, to, m, [this, &at] { at = engine.now(); }));
  }
};

NetworkOptions one_gbps_flow(Duration latency = 1000) {
  NetworkOptions o;
  o.host = LinkParams{1, latency};  // 1 Gbit/s: 0.125 bytes per ns
  o.model = NetworkOptions::Model::kFlow;
  return o;
}

TEST(HostsTest, PlacementsPutTasksOnHosts) {
  DeterministicEngine engine;
  NodeExecutor ex{engine, engine.add_node()};
  FluidSystem fluid{ex};
  const ClusterShape shape{4, 2};  // 7 tasks: chief, worker 0..3, ps 0..1
  HostModel one(shape, {HostOptions::Placement::kOneHost, 1, 2}, ex, fluid);
  EXPECT_EQ(one.num_hosts(), 1);
  HostModel packed(shape, {HostOptions::Placement::kBinPack, 3, 4}, ex, fluid);
  EXPECT_EQ(packed.num_hosts(), 3);
  EXPECT_EQ(packed.host_of(packed.slot(TaskId::chief())), 0);
  EXPECT_EQ(packed.host_of(packed.slot(TaskId::worker(2))), 1);
  EXPECT_EQ(packed.host_of(packed.slot(TaskId::ps(1))), 2);
  HostModel spread(shape, {HostOptions::Placement::kSpread, 3, 4}, ex, fluid);
  EXPECT_EQ(spread.num_hosts(), 3);
  EXPECT_EQ(spread.host_of(spread.slot(TaskId::worker(2))), 0);  // slot 3 of 7, dealt over 3 hosts
  EXPECT_EQ(spread.host_of(spread.slot(TaskId::ps(0))), 2);      // slot 5
}

TEST(HostsTest, TasksOnOneCoreShareItAndATasksJobsQueue) {
  DeterministicEngine engine;
  NodeExecutor ex{engine, engine.add_node()};
  FluidSystem fluid{ex};
  HostModel hosts(ClusterShape{2, 1}, {HostOptions::Placement::kOneHost, 1, 1}, ex, fluid);
  std::vector<Time> done(3, -1);
  // worker:0 runs two 1 ms jobs one after the other on its thread, worker:1
  // one: t = 0..2 ms worker:0's first and worker:1's at half a core each,
  // both end at 2 ms; t = 2..3 ms worker:0's second alone on the core.
  hosts.run(1, 1000000, [&] { done[0] = engine.now(); });
  hosts.run(1, 1000000, [&] { done[1] = engine.now(); });
  hosts.run(2, 1000000, [&] { done[2] = engine.now(); });
  engine.run();
  EXPECT_EQ(done[0], 2000000);
  EXPECT_EQ(done[2], 2000000);
  EXPECT_EQ(done[1], 3000000);
  EXPECT_EQ(hosts.task_cpu(1), 2000000);
  EXPECT_NEAR(hosts.cpu_ns(0), 3e6, 1);
}

// The times `jobs` back-to-back jobs of 1 ms take on one task of a host with
// a core for every thread (each ends `its time` after the one before).
std::vector<Duration> job_times(double spread, std::uint64_t seed, int jobs) {
  DeterministicEngine engine;
  NodeExecutor ex{engine, engine.add_node()};
  FluidSystem fluid{ex};
  HostOptions o;
  o.duration_spread = spread;
  o.seed = seed;
  HostModel hosts(ClusterShape{1, 1}, o, ex, fluid);
  std::vector<Duration> times;
  Time last = 0;
  for (int i = 0; i < jobs; ++i)
    hosts.run(1, 1000000, [&] {
      times.push_back(engine.now() - last);
      last = engine.now();
    });
  engine.run();
  EXPECT_EQ(hosts.task_cpu(1), last) << "the task is charged the times its jobs took";
  return times;
}

TEST(HostsTest, ADurationSpreadDrawsEachJobsTimeAroundItsPriceFromTheSeed) {
  for (Duration t : job_times(0, 1, 100)) EXPECT_EQ(t, 1000000) << "no spread: every job takes its price";
  const int n = 4000;
  const auto times = job_times(0.1, 7, n);
  ASSERT_EQ(times.size(), static_cast<std::size_t>(n));
  double sum = 0, log_sum = 0, log_sq = 0;
  for (Duration t : times) {
    sum += static_cast<double>(t);
    log_sum += std::log(static_cast<double>(t));
    log_sq += std::log(static_cast<double>(t)) * std::log(static_cast<double>(t));
  }
  const double mean = sum / n, log_mean = log_sum / n;
  const double sigma = std::sqrt(log_sq / n - log_mean * log_mean);
  // The mean stays the price (its standard error here is 0.16 %), the log
  // times spread with the sigma asked for (standard error 0.0011).
  EXPECT_NEAR(mean, 1e6, 1e6 * 0.01);
  EXPECT_NEAR(sigma, 0.1, 0.006);
  EXPECT_EQ(job_times(0.1, 7, 50), std::vector<Duration>(times.begin(), times.begin() + 50)) << "same seed, same times";
  EXPECT_NE(job_times(0.1, 8, 50), std::vector<Duration>(times.begin(), times.begin() + 50));
}

TEST(HostsTest, AResetTaskLosesItsJobs) {
  DeterministicEngine engine;
  NodeExecutor ex{engine, engine.add_node()};
  FluidSystem fluid{ex};
  HostModel hosts(ClusterShape{1, 1}, {HostOptions::Placement::kOneHost, 1, 1}, ex, fluid);
  bool ran = false;
  hosts.run(1, 1000000, [&] { ran = true; });
  hosts.run(1, 1000000, [&] { ran = true; });
  Time other = -1;
  hosts.run(2, 1000000, [&] { other = engine.now(); });
  ex.post_at(500000, [&] { hosts.reset(1); });  // worker:0 dies half way
  engine.run();
  EXPECT_FALSE(ran);
  EXPECT_EQ(other, 1250000) << "half a core for 0.5 ms, then the whole core";
}

TEST(NetworkFlowTest, TwoSendersShareTheReceiversLink) {
  Bed bed(ClusterShape{2, 1}, {}, one_gbps_flow());
  Time a = -1, b = -1;
  bed.send(TaskId::worker(0), TaskId::ps(0), 10000, a);
  bed.send(TaskId::worker(1), TaskId::ps(0), 10000, b);
  bed.engine.run();
  // Two hops of 1 us, then 0.0625 bytes/ns each on ps:0's link (FIFO: 82 us and 162 us).
  EXPECT_EQ(a, 2000 + 160000);
  EXPECT_EQ(b, 2000 + 160000);
}

TEST(NetworkFlowTest, AOnePacketMessageIsNotShared) {
  Bed bed(ClusterShape{2, 1}, {}, one_gbps_flow());
  Time a = -1, b = -1;
  bed.send(TaskId::worker(0), TaskId::ps(0), 1000, a);
  bed.send(TaskId::worker(1), TaskId::ps(0), 1000, b);
  bed.engine.run();
  // At most one segment: latency, then 1000 bytes at the link's 0.125 bytes/ns.
  EXPECT_EQ(a, 2000 + 8000);
  EXPECT_EQ(b, 2000 + 8000);
}

TEST(NetworkFlowTest, TheTcpWindowBoundsALongPath) {
  NetworkOptions o = one_gbps_flow(/*latency=*/1000000);  // 1 ms per hop: RTT 4 ms
  o.flow.tcp_window_bytes = 10000;                           // 10 KB per 4 ms = 0.0025 bytes/ns
  Bed bed(ClusterShape{1, 1}, {}, o);
  Time a = -1;
  bed.send(TaskId::worker(0), TaskId::ps(0), 10000, a);
  bed.engine.run();
  EXPECT_EQ(a, 2000000 + 4000000);
}

TEST(NetworkFlowTest, Lv08CorrectionsSlowAMessageAsSimGridsDefaultModelDoes) {
  NetworkOptions o = one_gbps_flow();
  o.flow.latency_factor = 13.01;
  o.flow.bandwidth_factor = 0.97;
  o.flow.crosstraffic = 0.05;
  Bed bed(ClusterShape{1, 1}, {}, o);
  Time a = -1;
  bed.send(TaskId::worker(0), TaskId::ps(0), 100000, a);
  bed.engine.run();
  // 2 us x 13.01, then 100000 bytes at 0.125 x 0.97 bytes/ns (alone: its
  // acknowledgements load only the reverse links).
  EXPECT_NEAR(static_cast<double>(a), 26020 + 100000 / (0.125 * 0.97), 2);
}

TEST(NetworkFlowTest, TasksOnOneHostUseTheLoopback) {
  NetworkOptions o = one_gbps_flow();
  o.loopback_latency = 7000;
  Bed bed(ClusterShape{1, 1}, {HostOptions::Placement::kOneHost, 1, 0}, o);
  Time a = -1;
  bed.send(TaskId::worker(0), TaskId::ps(0), 1 << 20, a);
  bed.engine.run();
  EXPECT_EQ(a, 7000) << "no link: its bytes cost the two sides' CPU, not bandwidth";
}

TEST(NetworkFlowTest, EachSidePaysItsCpuOnItsHostsCores) {
  NetworkOptions o;
  o.cpu.control_send.per_message_ns = 10000;
  o.cpu.control_receive.per_message_ns = 20000;
  o.cpu.control_receive.per_kib_ns = 1000;
  o.loopback_latency = 5000;
  Bed bed(ClusterShape{2, 1}, {HostOptions::Placement::kOneHost, 1, 1}, o);
  Time a = -1;
  // chief -> worker:0: 10 us to send, 5 us of loopback, 20 + 4 us to receive (4 KiB).
  bed.send(TaskId::chief(), TaskId::worker(0), 4096, a, /*data_plane=*/false);
  bed.engine.run();
  EXPECT_EQ(a, 10000 + 5000 + 24000);
  // Two at once: the chief's sends queue on its thread (10 us each); each
  // receive starts 5 us after its send ends and shares the one core with
  // whatever else runs then. Worked out by hand:
  //   0..10   send 1 alone                       -> send 1 ends at 10
  //   10..15  send 2 alone (5 of 10 us done)     -> message 1 arrives at 15
  //   15..25  send 2 and receive 1 at 1/2 each   -> send 2 ends at 25 (receive 1: 5 of 24 us)
  //   25..30  receive 1 alone (10 of 24)         -> message 2 arrives at 30
  //   30..58  receive 1 and 2 at 1/2 each        -> receive 1 ends at 58 (receive 2: 14 of 24)
  //   58..68  receive 2 alone                    -> ends at 68
  Time b = -1, c = -1;
  const Time t0 = bed.engine.now();
  bed.send(TaskId::chief(), TaskId::worker(0), 4096, b, false);
  bed.send(TaskId::chief(), TaskId::worker(1), 4096, c, false);
  bed.engine.run();
  EXPECT_EQ(b - t0, 58000);
  EXPECT_EQ(c - t0, 68000);
}

// A control message's side costs more the longer its task went without one
// in that direction (MessageCosts::control_by_interval: 2 us at 10 us or
// less, 20 us at 100 us or more, linear between). Two cores, no loopback
// latency, so only the curve decides. Worked out by hand:
//   message 1 at 0: neither side has had one (20 us each)   -> arrives at 40
//   message 2 at 40: the chief's send 40 us after its last  -> 2 + 30/90 x 18 = 8 us, leaves at 48;
//                    the worker's receive 28 us after its last (at 20) -> 2 + 18/90 x 18 = 5.6 us: 53.6
//   message 3 at 53.6: send 13.6 us after (2.72 us), receive 8.32 us after (level: 2 us) -> 58.32
// A data-plane message between them neither pays by interval nor counts as one.
TEST(NetworkFlowTest, AControlMessagePaysForTheTimeItsTaskWentWithoutOne) {
  NetworkOptions o;
  o.cpu.control_by_interval = {{10000, 2000}, {100000, 20000}};
  Bed bed(ClusterShape{1, 0}, {HostOptions::Placement::kOneHost, 1, 2}, o);
  Time a = -1, b = -1, data = -1, c = -1;
  bed.send(TaskId::chief(), TaskId::worker(0), 100, a, /*data_plane=*/false);
  bed.engine.run();
  EXPECT_EQ(a, 40000);
  bed.send(TaskId::chief(), TaskId::worker(0), 100, b, false);
  bed.engine.run();
  EXPECT_EQ(b, 53600);
  bed.send(TaskId::chief(), TaskId::worker(0), 100, data, /*data_plane=*/true);
  bed.engine.run();
  EXPECT_EQ(data, 53600) << "the data plane has no prices here";
  bed.send(TaskId::chief(), TaskId::worker(0), 100, c, false);
  bed.engine.run();
  EXPECT_EQ(c, 58320);
  EXPECT_EQ(bed.hosts.task_cpu(0), 20000 + 8000 + 2720) << "the chief paid its sends";
}

// With every core of its host running a job, a control message's side costs
// MessageCosts::control_on_busy_host (2 us) instead of its interval's price
// (20 us, the curve held level): there is no sleeping core to wake. One host
// of 2 cores shared evenly; workers 1 and 2 compute 100 us from 0 or not.
//   both busy: the chief's send 2 us at 2/3 of a core (3 jobs on 2 cores)
//              -> 3 us; worker 0's receive from 3 us, again 2 us at 2/3 -> 6 us
//   one busy:  a core idle: 20 us each side at full speed (2 jobs) -> 40 us
//   none:      the same 40 us
TEST(NetworkFlowTest, AMessageOnAHostWithNoIdleCorePaysTheBusyHostPrice) {
  NetworkOptions o;
  o.cpu.control_by_interval = {{10000, 20000}};
  o.cpu.control_on_busy_host = 2000;
  for (const auto& [computing, arrival] : std::vector<std::pair<int, Time>>{{2, 6000}, {1, 40000}, {0, 40000}}) {
    Bed bed(ClusterShape{3, 0}, {HostOptions::Placement::kOneHost, 1, 2}, o);
    for (int w = 1; w <= computing; ++w) bed.hosts.run(1 + w, 100000, [] {});
    EXPECT_EQ(bed.hosts.idle_core(0), computing < 2);
    Time at = -1;
    bed.send(TaskId::chief(), TaskId::worker(0), 100, at, /*data_plane=*/false);
    bed.engine.run();
    EXPECT_EQ(at, arrival) << computing << " workers computing";
    EXPECT_EQ(bed.hosts.task_cpu(1), computing == 2 ? 2000 : 20000) << computing << " workers computing";
    EXPECT_TRUE(bed.hosts.idle_core(0)) << "the jobs ended";
  }
  // A data-plane message's sides the same by MessageCpu::per_message_on_busy_host_ns.
  NetworkOptions data;
  for (MessageCpu* side : {&data.cpu.data_send, &data.cpu.data_receive}) {
    side->per_message_ns = 20000;
    side->per_message_on_busy_host_ns = 2000;
  }
  for (const auto& [computing, arrival] : std::vector<std::pair<int, Time>>{{2, 6000}, {1, 40000}}) {
    Bed bed(ClusterShape{3, 0}, {HostOptions::Placement::kOneHost, 1, 2}, data);
    for (int w = 1; w <= computing; ++w) bed.hosts.run(1 + w, 100000, [] {});
    Time at = -1;
    bed.send(TaskId::chief(), TaskId::worker(0), 100, at, /*data_plane=*/true);
    bed.engine.run();
    EXPECT_EQ(at, arrival) << computing << " workers computing, the data plane";
  }
  // Ticked cores count their idle cores the same way.
  HostOptions ticked{HostOptions::Placement::kOneHost, 1, 2};
  ticked.scheduler = HostOptions::Scheduler::kTicked;
  Bed bed(ClusterShape{3, 0}, ticked, o);
  bed.hosts.run(2, 100000, [] {});
  EXPECT_TRUE(bed.hosts.idle_core(0));
  bed.hosts.run(3, 100000, [] {});
  EXPECT_FALSE(bed.hosts.idle_core(0));
  bed.engine.run();
  EXPECT_TRUE(bed.hosts.idle_core(0));
}

// A task is awake while a job of its own runs or waits, whatever the other
// tasks do: worker 0 (slot 1) with one job running and one queued behind it,
// worker 1 (slot 2) computing beside it on the one core.
TEST(HostsTest, ATaskIsAwakeWhileAJobOfItsOwnRunsOrWaits) {
  NetworkOptions o;
  Bed bed(ClusterShape{2, 0}, {HostOptions::Placement::kOneHost, 1, 1}, o);
  EXPECT_FALSE(bed.hosts.awake(1));
  bed.hosts.run(2, 500000, [] {});
  EXPECT_FALSE(bed.hosts.awake(1)) << "another task's job";
  std::vector<bool> awake_after;
  bed.hosts.run(1, 100000, [&] { awake_after.push_back(bed.hosts.awake(1)); });
  bed.hosts.run(1, 100000, [&] { awake_after.push_back(bed.hosts.awake(1)); });
  EXPECT_TRUE(bed.hosts.awake(1));
  bed.engine.run();
  // When the first ends the second runs; when the second ends, nothing.
  EXPECT_EQ(awake_after, (std::vector<bool>{true, false}));
  EXPECT_FALSE(bed.hosts.awake(1));
}

// How long a task has been idle: as long as can be before its first job, 0
// while a job of its own runs or waits, then the time since its last ended
// (worker 0, slot 1: jobs of 100 us at 0 and, after its idle, at 300 us);
// a restart forgets its work.
TEST(HostsTest, ATaskIsIdleSinceItsLastJobEnded) {
  NetworkOptions o;
  Bed bed(ClusterShape{1, 0}, {HostOptions::Placement::kOneHost, 1, 1}, o);
  EXPECT_EQ(bed.hosts.idle_for(1), std::numeric_limits<Duration>::max()) << "never worked";
  std::vector<Duration> idle_at;
  bed.hosts.run(1, 100000, [] {});
  idle_at.push_back(bed.hosts.idle_for(1));
  bed.engine.run();
  bed.ex.post_at(250000, [&] { idle_at.push_back(bed.hosts.idle_for(1)); });
  bed.ex.post_at(300000, [&] {
    bed.hosts.run(1, 100000, [&] { idle_at.push_back(bed.hosts.idle_for(1)); });
  });
  bed.ex.post_at(450000, [&] { idle_at.push_back(bed.hosts.idle_for(1)); });
  bed.engine.run();
  EXPECT_EQ(idle_at, (std::vector<Duration>{0, 150000, 0, 50000}))
      << "awake, idle since 100 us, awake as its own job ends, idle since 400 us";
  bed.hosts.reset(1);
  EXPECT_EQ(bed.hosts.idle_for(1), std::numeric_limits<Duration>::max()) << "a new process";
}

// On a crowded host each job handling a message costs the crowding price
// beyond its own (HostOptions::crowded_message, by tasks per core; held level
// outside the curve), and compute jobs do not. 4 tasks on one host of 2
// cores: 2 tasks a core, half-way between 0 us at 1.5 and 10 us at 2.5.
TEST(HostsTest, AMessageJobOnACrowdedHostPaysTheCrowdingPrice) {
  const CostCurve crowding = {{1.5, 0}, {2.5, 10000}};
  NetworkOptions o;
  o.cpu.control_send.per_message_ns = 10000;
  o.cpu.control_receive.per_message_ns = 20000;
  o.loopback_latency = 5000;
  HostOptions one_host{HostOptions::Placement::kOneHost, 1, 2};
  one_host.crowded_message = crowding;
  Bed bed(ClusterShape{2, 1}, one_host, o);
  EXPECT_EQ(bed.hosts.crowding_price(0), 5000);
  Time arrived = -1, computed = -1;
  // chief -> worker:0: 10 + 5 us to send, 5 us of loopback, 20 + 5 us to receive.
  bed.send(TaskId::chief(), TaskId::worker(0), 100, arrived, /*data_plane=*/false);
  // worker:1 computes 10 us at once, on the other core.
  bed.hosts.run(2, 10000, [&] { computed = bed.engine.now(); });
  bed.engine.run();
  EXPECT_EQ(arrived, 15000 + 5000 + 25000);
  EXPECT_EQ(computed, 10000);
  EXPECT_EQ(bed.hosts.task_cpu(0), 15000);
  EXPECT_EQ(bed.hosts.task_cpu(1), 25000);
  EXPECT_EQ(bed.hosts.task_cpu(2), 10000) << "compute pays no crowding price";

  // The same curve at 1.5 tasks a core or fewer (held level: 0), and on a host
  // whose cores are not counted: nothing.
  HostOptions dedicated{HostOptions::Placement::kOnePerHost, 1, 2};
  dedicated.crowded_message = crowding;
  HostOptions uncounted{HostOptions::Placement::kOneHost, 1, 0};
  uncounted.crowded_message = crowding;
  HostOptions three_a_core{HostOptions::Placement::kOneHost, 1, 4.0 / 3};
  three_a_core.crowded_message = crowding;
  for (const auto& [options, price] : std::vector<std::pair<HostOptions, Duration>>{
           {dedicated, 0}, {uncounted, 0}, {three_a_core, 10000}}) {
    Bed other(ClusterShape{2, 1}, options, o);
    EXPECT_EQ(other.hosts.crowding_price(0), price);
    Time at = -1;
    other.send(TaskId::chief(), TaskId::worker(0), 100, at, false);
    other.engine.run();
    EXPECT_EQ(other.hosts.task_cpu(1), 20000 + price);
  }
}

// Over a stream a large message reaches its receiver before the sender is
// done copying it (MessageCosts::request_overlap): the sender's last 12 us
// run beside the receiver's 20.
TEST(NetworkFlowTest, AStreamedRequestReachesTheReceiverItsOverlapBeforeTheSendEnds) {
  NetworkOptions o;
  o.cpu.data_send.per_message_ns = 30000;
  o.cpu.data_receive.per_message_ns = 20000;
  o.cpu.request_overlap = {{65536, 12000}};
  o.loopback_latency = 5000;
  {
    Bed bed(ClusterShape{1, 0}, {HostOptions::Placement::kOneHost, 1, 2}, o);
    Time a = -1;
    bed.send(TaskId::chief(), TaskId::worker(0), 65536, a);
    bed.engine.run();
    // 18 us of sending, 5 of loopback, 20 of receiving (the sender's last
    // 12 on the other core meanwhile); 30 + 5 + 20 without the overlap.
    EXPECT_EQ(a, 18000 + 5000 + 20000);
    Time control = -1;
    const Time t0 = bed.engine.now();
    bed.send(TaskId::chief(), TaskId::worker(0), 65536, control, /*data_plane=*/false);
    bed.engine.run();
    EXPECT_EQ(control - t0, 5000) << "the loopback alone: control messages cost no CPU here, and have no overlap";
  }
  {
    // One core: the overlap saves nothing but the loopback's latency.
    //   0..18   send alone                      -> the message leaves
    //   18..23  the send's rest alone (5 of 12) -> the message arrives
    //   23..37  the rest (7) and receive at 1/2 -> receive: 7 of 20
    //   37..50  receive alone
    Bed bed(ClusterShape{1, 0}, {HostOptions::Placement::kOneHost, 1, 1}, o);
    Time a = -1;
    bed.send(TaskId::chief(), TaskId::worker(0), 65536, a);
    bed.engine.run();
    EXPECT_EQ(a, 50000);
    EXPECT_EQ(bed.hosts.task_cpu(0), 30000) << "the sender pays all of its CPU";
  }
  {
    // An overlap beyond the sender's CPU: the message leaves at once.
    o.cpu.request_overlap = {{65536, 100000}};
    Bed bed(ClusterShape{1, 0}, {HostOptions::Placement::kOneHost, 1, 2}, o);
    Time a = -1;
    bed.send(TaskId::chief(), TaskId::worker(0), 65536, a);
    bed.engine.run();
    EXPECT_EQ(a, 5000 + 20000);
  }
}

TEST(NetworkFlowTest, BytesCurveInterpolatesMeasuredPoints) {
  MessageCpu m;
  m.per_message_ns = 100;
  m.bytes_curve = {{1024, 1000}, {4096, 2000}};
  MessageShape s;
  s.bytes = 512;
  EXPECT_DOUBLE_EQ(m.ns(s), 100 + 500);
  s.bytes = 2560;
  EXPECT_DOUBLE_EQ(m.ns(s), 100 + 1500);
  s.bytes = 7168;  // beyond the last point: its slope (1000 per 3072 bytes)
  EXPECT_DOUBLE_EQ(m.ns(s), 100 + 3000);
}

// A message side pays per_item_by_id for the items of the message that name
// rows by id, beyond per_item for every item, by hand.
TEST(NetworkFlowTest, ItemsByIdPayTheirOwnPrice) {
  MessageCpu m;
  m.per_message_ns = 100;
  m.per_item_ns = 10;
  m.per_item_by_id_ns = 40;
  MessageShape s;
  s.items = 5;
  s.items_by_id = 2;
  EXPECT_DOUBLE_EQ(m.ns(s), 100 + 5 * 10 + 2 * 40);
  MessageCpu by_id_only;
  by_id_only.per_item_by_id_ns = 1;
  EXPECT_FALSE(by_id_only.zero());
}

// A compute-bound cluster on one host: its steps/s follow the cores.
TEST(HostsTest, ACpuBoundClusterOnOneHostScalesWithItsCores) {
  PredictRequest r;
  auto* v = r.model.add_variable();
  v->set_name("w");
  v->add_shape(4);
  r.workers = 4;
  r.ps = 1;
  r.warmup = 8;
  r.measured = 80;
  r.profile.mutable_compute()->mutable_step_time()->set_constant_s(0.01);
  r.profile.mutable_network()->set_host_latency_us(0);
  r.profile.mutable_ps_service()->set_per_request_us(0);
  r.profile.mutable_ps_service()->set_per_kib_us(0);
  r.profile.mutable_ps_service()->set_per_row_us(0);
  r.profile.mutable_hosts()->set_placement(scenario::Hosts::ONE_HOST);
  double last = 0;
  for (double cores : {1.0, 2.0, 4.0}) {
    r.profile.mutable_hosts()->set_cores(cores);
    auto p = predict(r);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_NEAR(p->steps_per_second, 100 * cores, 100 * cores * 0.05) << cores << " cores";
    EXPECT_GT(p->steps_per_second, last);
    last = p->steps_per_second;
  }
  r.profile.mutable_hosts()->set_cores(0);  // a core per thread: every worker at its own pace
  auto p = predict(r);
  ASSERT_TRUE(p.ok());
  EXPECT_NEAR(p->steps_per_second, 400, 20);
}

// A whole prediction pays the crowding price once per message job: a
// synthetic step of one variable is, for its ps, a pull and a push served
// (2 jobs), and for the coordinator a closure sent and its result received
// (2). 4 tasks on 2 cores: 2 a core, the curve's 50 us.
TEST(HostsTest, APredictionPaysTheCrowdingPriceOncePerMessageJob) {
  PredictRequest r;
  auto* v = r.model.add_variable();
  v->set_name("w");
  v->add_shape(8);
  v->add_shape(8);
  r.workers = 2;
  r.ps = 1;
  r.warmup = 8;
  r.measured = 40;
  r.profile.mutable_compute()->mutable_step_time()->set_constant_s(0.001);
  r.profile.mutable_ps_service()->set_per_request_us(10);
  for (auto* side : {r.profile.mutable_messages()->mutable_data_send(), r.profile.mutable_messages()->mutable_data_receive(),
                     r.profile.mutable_messages()->mutable_control_send(),
                     r.profile.mutable_messages()->mutable_control_receive()})
    side->set_per_message_us(5);
  r.profile.mutable_hosts()->set_placement(scenario::Hosts::ONE_HOST);
  r.profile.mutable_hosts()->set_cores(2);
  auto plain = predict(r);
  ASSERT_TRUE(plain.ok()) << plain.status();
  auto* point = r.profile.mutable_hosts()->add_crowded_message();
  point->set_tasks_per_core(2);
  point->set_us(50);
  auto crowded = predict(r);
  ASSERT_TRUE(crowded.ok()) << crowded.status();
  EXPECT_NEAR(crowded->ps_cpu_per_step_s - plain->ps_cpu_per_step_s, 2 * 50e-6, 1e-9);
  EXPECT_NEAR(crowded->chief_cpu_per_step_s - plain->chief_cpu_per_step_s, 2 * 50e-6, 1e-9);
  EXPECT_GT(crowded->worker_cpu_per_step_s - plain->worker_cpu_per_step_s, 4 * 50e-6);
  EXPECT_LT(crowded->steps_per_second, plain->steps_per_second);
}

}  // namespace
}  // namespace twinps::sim
