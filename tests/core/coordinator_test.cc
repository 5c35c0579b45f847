// ClusterCoordinator semantics (spec sections 1–5) on a whole in-memory
// cluster: real coordinator, worker and parameter-server nodes on the
// deterministic local engine, with tasks killed and restarted mid-run.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "core/coordinator/cluster_coordinator.h"
#include "core/data/dataset.h"
#include "inmemory/in_memory_cluster.h"
#include "core/worker/step_context.h"

namespace twinps {
namespace {

// Variables every test cluster gets: the optimizer's iteration counter and a
// metric-style accumulator, both on ps:0.
std::vector<VariableLayout> test_variables() {
  VariableLayout iterations{"iterations", {}, VariableKind::kCounter, {ShardPlacement{0, 0, 0, 1}}};
  VariableLayout total{"total", {}, VariableKind::kAccumulator, {ShardPlacement{1, 0, 0, 1}}};
  return {iterations, total};
}
std::vector<ShardState> test_initial() {
  ShardState it;
  it.spec = ShardSpec{0, "iterations", VariableKind::kCounter, 1, 1};
  ShardState total;
  total.spec = ShardSpec{1, "total", VariableKind::kAccumulator, 1, 1};
  total.value = Matrix::Zero(1, 1);
  return {it, total};
}

// Step functions shared by the tests. `starts[tag]` counts how often the
// closure tagged `tag` started, on any worker.
struct TestFunctions {
  FunctionRegistry registry;
  std::map<std::int64_t, int> starts;

  static Task<Status> sleep_cancellable(StepContext& ctx, Duration d) {
    const Time end = ctx.executor().now() + d;
    while (ctx.executor().now() < end) {
      if (ctx.cancelled().cancelled()) co_return absl::CancelledError("step cancelled");
      co_await sleep_for(ctx.executor(), std::min<Duration>(100 * kMillisecond, end - ctx.executor().now()));
    }
    co_return absl::OkStatus();
  }
  static Task<Status> add_iteration(StepContext& ctx) {
    auto v = ctx.variable("iterations");
    if (!v.ok()) co_return v.status();
    ParameterClient::PushBatch push;
    push.add_counter(**v, 1);
    co_return co_await ctx.ps().push(push);
  }

  TestFunctions() {
    register_dataset_functions(registry);
    // args: [tag, seconds to run]; counts a start, runs, then adds one iteration.
    registry.add_step("train", [this](StepContext& ctx) -> Task<StatusOr<Value>> {
      std::int64_t tag = ctx.args().empty() ? -1 : std::get<std::int64_t>(ctx.args()[0]);
      ++starts[tag];
      if (ctx.args().size() > 1) {
        Status s = co_await sleep_cancellable(ctx, from_seconds(std::get<double>(ctx.args()[1])));
        if (!s.ok()) co_return s;
      }
      Status s = co_await add_iteration(ctx);
      if (!s.ok()) co_return s;
      co_return Value(tag);
    });
    registry.add_step("fail", [](StepContext&) -> Task<StatusOr<Value>> {
      co_return absl::InvalidArgumentError("assertion failed: x > 0");
    });
    // args: [seconds]; then adds 1 to the accumulator "total".
    registry.add_step("slow_add", [](StepContext& ctx) -> Task<StatusOr<Value>> {
      co_await sleep_for(ctx.executor(), from_seconds(std::get<double>(ctx.args()[0])));
      auto v = ctx.variable("total");
      ParameterClient::PushBatch push;
      push.add(**v, Matrix::Ones(1, 1));
      Status s = co_await ctx.ps().push(push);
      if (!s.ok()) co_return s;
      co_return Value(std::int64_t{1});
    });
    // args: [iterator]; returns the first label of the next batch.
    registry.add_step("next", [](StepContext& ctx) -> Task<StatusOr<Value>> {
      auto it = ctx.resource<IteratorResource>(0);
      if (!it.ok()) co_return it.status();
      auto batch = (*it)->next();
      if (!batch.ok()) co_return batch.status();
      co_return Value(static_cast<double>(batch->labels(0, 0)));
    });
    // A dataset of `n` examples labelled 0..n-1, batch 1, repeated forever.
    registry.add_resource("range", [](ResourceContext& ctx) -> StatusOr<std::unique_ptr<Resource>> {
      auto n = std::get<std::int64_t>(ctx.args[0]);
      auto examples = std::make_shared<std::vector<Example>>();
      for (std::int64_t i = 0; i < n; ++i) examples->push_back(Example{{i}, static_cast<float>(i)});
      DatasetOptions o;
      o.repeat = -1;
      auto ds = InMemoryDataset::create(examples, o);
      if (!ds.ok()) return ds.status();
      return std::unique_ptr<Resource>(std::move(*ds));
    });
    registry.add_resource("broken", [](ResourceContext&) -> StatusOr<std::unique_ptr<Resource>> {
      return absl::InvalidArgumentError("dataset fn failed");
    });
  }
};

struct Harness {
  explicit Harness(int workers = 2, int ps = 1, CoordinatorOptions copts = {}) {
    copts.record_dispatch_log = true;
    InMemoryClusterOptions o;
    o.shape = ClusterShape{workers, ps};
    o.coordinator = copts;
    cluster = std::make_unique<InMemoryCluster>(fns.registry, o);
    auto started = cluster->run(coord().start(test_variables(), OptimizerConfig{}, test_initial()));
    EXPECT_TRUE(started && started->ok()) << (started ? describe(*started) : "did not finish");
  }
  ClusterCoordinator& coord() { return cluster->coordinator(); }
  Executor& ex() { return cluster->coordinator_executor(); }

  template <typename T>
  T run(Task<T> t) {
    auto r = cluster->run(std::move(t));
    EXPECT_TRUE(r.has_value()) << "program did not finish";
    return std::move(*r);
  }
  std::int64_t iterations() {
    return run([](ClusterCoordinator& c) -> Task<std::int64_t> {
      ParameterClient ps = c.parameter_client();
      ParameterClient::PullBatch pull;
      int h = pull.counter(*c.variables().find("iterations"));
      auto r = co_await ps.pull(pull);
      co_return r.ok() ? r->counter(h) : -1;
    }(coord()));
  }
  float total() {
    return run([](ClusterCoordinator& c) -> Task<float> {
      ParameterClient ps = c.parameter_client();
      ParameterClient::PullBatch pull;
      int h = pull.dense(*c.variables().find("total"));
      auto r = co_await ps.pull(pull);
      co_return r.ok() ? r->value(h)(0, 0) : -1.0f;
    }(coord()));
  }

  TestFunctions fns;
  std::unique_ptr<InMemoryCluster> cluster;
};

Value tag(std::int64_t t) { return Value(t); }
Value seconds(double s) { return Value(s); }

Task<Status> schedule_n(ClusterCoordinator& c, int n, std::vector<RemoteValue>* out, double secs = 0) {
  for (int i = 0; i < n; ++i) {
    std::vector<Arg> args{tag(i)};
    if (secs > 0) args.push_back(seconds(secs));
    auto rv = co_await c.schedule("train", std::move(args));
    if (!rv.ok()) co_return rv.status();
    if (out) out->push_back(*rv);
  }
  co_return absl::OkStatus();
}

TEST(CoordinatorTest, ScheduleReturnsAtOnceAndJoinWaitsForEverything) {
  Harness h;
  // S12: join with nothing scheduled returns at once; repeated joins are fine.
  EXPECT_TRUE(h.run(h.coord().join()).ok());
  std::vector<RemoteValue> rvs;
  ASSERT_TRUE(h.run(schedule_n(h.coord(), 5, &rvs)).ok());
  for (auto& rv : rvs) EXPECT_EQ(rv.status(), RemoteValueStatus::kNotReady) << "schedule must not wait (C3)";
  EXPECT_FALSE(*h.run(h.coord().done()));
  EXPECT_TRUE(h.run(h.coord().join()).ok());
  EXPECT_TRUE(*h.run(h.coord().done()));
  EXPECT_EQ(h.iterations(), 5);
  ASSERT_TRUE(h.run(schedule_n(h.coord(), 5, nullptr)).ok());
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(h.run(h.coord().join()).ok());
  EXPECT_EQ(h.iterations(), 10);
  for (auto& rv : rvs) {
    auto v = rv.peek();
    ASSERT_TRUE(v && v->ok());
  }
}

TEST(CoordinatorTest, IdleWorkersTakeClosuresLowestIndexFirst) {
  Harness h(3);
  ASSERT_TRUE(h.run(schedule_n(h.coord(), 2, nullptr, 1.0)).ok());
  ASSERT_TRUE(h.run(h.coord().join()).ok());
  std::vector<int> workers;
  for (const auto& d : h.coord().dispatch_log())
    if (d.kind == DispatchRecord::Kind::kClosure) workers.push_back(d.worker);
  EXPECT_EQ(workers, (std::vector<int>{0, 1}));
}

TEST(CoordinatorTest, UnknownFunctionIsRefusedAtSchedule) {
  Harness h;
  auto rv = h.run(h.coord().schedule("no_such_fn", {}));
  EXPECT_EQ(rv.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(rv.status().message()).find("no_such_fn"), std::string::npos);
}

TEST(CoordinatorTest, WorkerKilledMidClosureRetriesElsewhereAndResolvesOnce) {
  Harness h(2);
  std::vector<RemoteValue> rvs;
  ASSERT_TRUE(h.run(schedule_n(h.coord(), 4, &rvs, 2.0)).ok());
  h.cluster->run_until_time(h.ex().now() + kSecond);  // closures 0 and 1 are running
  h.cluster->kill(TaskId::worker(0));
  h.cluster->run_until_time(h.ex().now() + 2 * kSecond);
  h.cluster->restart(TaskId::worker(0));
  ASSERT_TRUE(h.run(h.coord().join()).ok());

  EXPECT_EQ(h.fns.starts[0], 2) << "the closure interrupted on worker 0 ran again (at-least-once, C14)";
  for (std::size_t i = 0; i < rvs.size(); ++i) {
    auto v = rvs[i].peek();
    ASSERT_TRUE(v && v->ok()) << "closure " << i;
    EXPECT_EQ(std::get<std::int64_t>(**v), static_cast<std::int64_t>(i));
  }
  EXPECT_GE(h.coord().stats().retried, 1u);
  EXPECT_EQ(h.coord().stats().worker_failures, 1u);
  EXPECT_EQ(h.coord().stats().worker_recoveries, 1u);
  EXPECT_GE(h.iterations(), 4);
}

TEST(CoordinatorTest, WorkerPreemptedBetweenFunctionsCountsExactly) {
  // S23 / W5: nothing in flight at the kill, so nothing re-runs.
  Harness h(2);
  ASSERT_TRUE(h.run(schedule_n(h.coord(), 2, nullptr)).ok());
  ASSERT_TRUE(h.run(h.coord().join()).ok());
  EXPECT_EQ(h.iterations(), 2);
  h.cluster->kill(TaskId::worker(0));
  h.cluster->run_until_time(h.ex().now() + 2 * kSecond);
  h.cluster->restart(TaskId::worker(0));
  ASSERT_TRUE(h.run(schedule_n(h.coord(), 2, nullptr)).ok());
  ASSERT_TRUE(h.run(h.coord().join()).ok());
  EXPECT_EQ(h.iterations(), 4);
}

TEST(CoordinatorTest, ApplicationErrorCancelsQueuedClosuresAndIsRaisedOnce) {
  // S20 / E7: 3 normal, 1 long, 1 failing.
  Harness h(2);
  std::vector<RemoteValue> normal;
  ASSERT_TRUE(h.run(schedule_n(h.coord(), 3, &normal)).ok());
  auto long_rv = *h.run(h.coord().schedule("train", {tag(100), seconds(30)}));
  auto fail_rv = *h.run(h.coord().schedule("fail", {}));
  std::vector<RemoteValue> queued;
  ASSERT_TRUE(h.run(schedule_n(h.coord(), 5, &queued, 1.0)).ok());

  Status joined = h.run(h.coord().join());
  EXPECT_EQ(joined.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(joined.message(), "assertion failed: x > 0");
  // Nothing is running once the error is raised (E2).
  EXPECT_EQ(h.coord().stats().errors_raised, 1u);
  auto long_result = h.run(long_rv.fetch());
  EXPECT_EQ(long_result.status().code(), StatusCode::kCancelled);
  auto fail_result = h.run(fail_rv.fetch());
  EXPECT_EQ(fail_result.status(), joined) << "fetch raises the same error join raised (E8)";
  int cancelled = 0;
  for (auto& rv : queued) {
    auto r = h.run(rv.fetch());
    if (r.status().code() == StatusCode::kCancelled) ++cancelled;
  }
  EXPECT_GE(cancelled, 4) << "queued closures are cancelled";
  // The error was cleared: new work and a join succeed, and the error is not raised again (E1).
  ASSERT_TRUE(h.run(schedule_n(h.coord(), 3, nullptr)).ok());
  EXPECT_TRUE(h.run(h.coord().join()).ok());
  EXPECT_TRUE(h.run(h.coord().join()).ok());
}

TEST(CoordinatorTest, ScheduleRaisesThePendingErrorOnceAndJoinThenSucceeds) {
  // S15/S16 / E3: a loop of schedule() eventually raises; the following join does not raise again.
  Harness h(2);
  Status raised = h.run([](ClusterCoordinator& c, Executor& ex) -> Task<Status> {
    for (int i = 0; i < 100; ++i) {
      auto rv = co_await c.schedule("fail", {});
      if (!rv.ok()) co_return rv.status();
      co_await sleep_for(ex, 100 * kMillisecond);
    }
    co_return absl::OkStatus();
  }(h.coord(), h.ex()));
  EXPECT_EQ(raised.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(h.run(h.coord().join()).ok());
  EXPECT_EQ(h.coord().stats().errors_raised, 1u);
}

TEST(CoordinatorTest, EachErrorEpisodeIsRaisedExactlyOnce) {
  // S17
  Harness h(2);
  for (int episode = 0; episode < 2; ++episode) {
    ASSERT_TRUE(h.run(schedule_n(h.coord(), 3, nullptr)).ok());
    ASSERT_TRUE(h.run(h.coord().schedule("fail", {})).ok());
    EXPECT_EQ(h.run(h.coord().join()).code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(h.run(h.coord().join()).ok());
  }
  EXPECT_EQ(h.coord().stats().errors_raised, 2u);
}

TEST(CoordinatorTest, FullQueueOfCapacityTwoBlocksScheduleWithoutDeadlock) {
  // C5 / S22
  CoordinatorOptions o;
  o.queue_capacity = 2;
  Harness h(1, 1, o);
  std::vector<std::size_t> queued_after_each;
  Status s = h.run([](ClusterCoordinator& c, std::vector<std::size_t>* seen) -> Task<Status> {
    for (int i = 0; i < 10; ++i) {
      std::vector<Arg> call_args{Value(std::int64_t{i}), Value(0.5)};
      auto rv = co_await c.schedule("train", std::move(call_args));
      if (!rv.ok()) co_return rv.status();
      seen->push_back(c.stats().scheduled);
    }
    co_return co_await c.join();
  }(h.coord(), &queued_after_each));
  EXPECT_TRUE(s.ok()) << describe(s);
  EXPECT_EQ(h.iterations(), 10);
  // With one worker and room for two, schedule() had to wait for closures to finish.
  EXPECT_GE(h.ex().now(), 4 * kSecond);
  // Errors with a full queue: the failing closure's error surfaces, nothing hangs.
  Status e = h.run([](ClusterCoordinator& c) -> Task<Status> {
    for (int i = 0; i < 6; ++i) {
      std::vector<Arg> call_args{Value(std::int64_t{i}), Value(0.5)};
      auto rv = co_await c.schedule(i == 1 ? "fail" : "train", std::move(call_args));
      if (!rv.ok()) co_return rv.status();
    }
    co_return co_await c.join();
  }(h.coord()));
  EXPECT_EQ(e.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(h.run(h.coord().join()).ok());
}

TEST(CoordinatorTest, DatasetIsRebuiltOnARecoveredWorkerBeforeItsNextClosure) {
  // R7–R10, W2: resources are aborted when the worker dies and rebuilt first on recovery.
  Harness h(2);
  PerWorkerDataset ds = h.coord().create_per_worker_dataset("range", {Value(std::int64_t{100})});
  PerWorkerValues it = h.coord().create_per_worker_iterator(ds);
  auto schedule_next = [&](int n) {
    return h.run([](ClusterCoordinator& c, PerWorkerValues it, int n) -> Task<Status> {
      for (int i = 0; i < n; ++i) {
        std::vector<Arg> call_args{it};
        auto rv = co_await c.schedule("next", std::move(call_args));
        if (!rv.ok()) co_return rv.status();
      }
      co_return co_await c.join();
    }(h.coord(), it, n));
  };
  ASSERT_TRUE(schedule_next(6).ok());
  h.cluster->kill(TaskId::worker(1));
  ASSERT_TRUE(schedule_next(4).ok()) << "worker 0 carries on alone (W4)";
  EXPECT_EQ(it.values[1].status(), RemoteValueStatus::kAborted);
  h.cluster->restart(TaskId::worker(1));
  h.cluster->run_until_time(h.ex().now() + 5 * kSecond);
  ASSERT_TRUE(schedule_next(10).ok());
  EXPECT_EQ(it.values[1].status(), RemoteValueStatus::kReady);
  EXPECT_EQ(h.cluster->worker(1)->resource_count(), 2u) << "dataset and iterator rebuilt";

  // In worker 1's dispatch history, recovery is followed by the two resource
  // builds, in creation order, before any closure.
  std::vector<DispatchRecord::Kind> after;
  bool recovered = false;
  for (const auto& d : h.coord().dispatch_log()) {
    if (d.worker != 1) continue;
    if (d.kind == DispatchRecord::Kind::kWorkerRecovered) recovered = true;
    else if (recovered) after.push_back(d.kind);
  }
  ASSERT_GE(after.size(), 3u);
  EXPECT_EQ(after[0], DispatchRecord::Kind::kResource);
  EXPECT_EQ(after[1], DispatchRecord::Kind::kResource);
  EXPECT_EQ(after[2], DispatchRecord::Kind::kClosure);
}

TEST(CoordinatorTest, RebuiltIteratorStartsOver) {
  // R10: the position of a rebuilt iterator is lost.
  Harness h(1);
  PerWorkerDataset ds = h.coord().create_per_worker_dataset("range", {Value(std::int64_t{100})});
  PerWorkerValues it = h.coord().create_per_worker_iterator(ds);
  auto next_label = [&]() {
    auto rv = h.run(h.coord().schedule("next", {it}));
    EXPECT_TRUE(h.run(h.coord().join()).ok());
    return std::get<double>(*rv->peek().value());
  };
  EXPECT_EQ(next_label(), 0.0);
  EXPECT_EQ(next_label(), 1.0);
  h.cluster->kill(TaskId::worker(0));
  h.cluster->restart(TaskId::worker(0));
  EXPECT_EQ(next_label(), 0.0);
}

TEST(CoordinatorTest, ParameterServerFailureRaisesUnavailableAtJoinAndAtSchedule) {
  // P1, P2, S33, S34.
  Harness h(2, 2);
  std::vector<RemoteValue> rvs;
  ASSERT_TRUE(h.run(schedule_n(h.coord(), 6, &rvs, 1.0)).ok());
  h.cluster->kill(TaskId::ps(0));
  Status joined = h.run(h.coord().join());
  EXPECT_EQ(joined.code(), StatusCode::kUnavailable) << describe(joined);
  EXPECT_EQ(failed_task(joined), TaskId::ps(0));
  EXPECT_EQ(h.coord().stats().ps_failures_retried, 2u) << "the first K-1 = 2 reports are retried (C17)";
  // The ps stays down: the next closures fail too, and schedule raises the same class.
  Status at_schedule = h.run([](ClusterCoordinator& c, Executor& ex) -> Task<Status> {
    for (int i = 0; i < 100; ++i) {
      std::vector<Arg> call_args{Value(std::int64_t{i})};
      auto rv = co_await c.schedule("train", std::move(call_args));
      if (!rv.ok()) co_return rv.status();
      co_await sleep_for(ex, 100 * kMillisecond);
    }
    co_return absl::OkStatus();
  }(h.coord(), h.ex()));
  EXPECT_EQ(at_schedule.code(), StatusCode::kUnavailable);
}

TEST(CoordinatorTest, ParameterServerDownWhileWorkersRecoverIsRaisedNotWaitedOn) {
  // P4 / W3: with every worker down and the ps gone, no closure can run to
  // report the ps failure; the workers' recovery reports it instead.
  CoordinatorOptions o;
  o.rpc_timeout = 5 * kSecond;
  Harness h(2, 1, o);
  ASSERT_TRUE(h.run(schedule_n(h.coord(), 4, nullptr, 1.0)).ok());
  h.cluster->run_until_time(h.ex().now() + 500 * kMillisecond);
  h.cluster->kill(TaskId::ps(0));
  h.cluster->kill(TaskId::worker(0));
  h.cluster->kill(TaskId::worker(1));
  h.cluster->restart(TaskId::worker(0));
  h.cluster->restart(TaskId::worker(1));
  auto joined = h.cluster->run(h.coord().join(), h.ex().now() + 120 * kSecond);
  ASSERT_TRUE(joined.has_value()) << "join must not wait forever";
  EXPECT_EQ(joined->code(), StatusCode::kUnavailable) << describe(*joined);
  EXPECT_EQ(failed_task(*joined), TaskId::ps(0));
}

TEST(CoordinatorTest, FailedInputResourceFailsTheClosureThatUsesIt) {
  // S18 / S19 / E11
  Harness h(2);
  PerWorkerDataset bad = h.coord().create_per_worker_dataset("broken");
  PerWorkerDataset good = h.coord().create_per_worker_dataset("range", {Value(std::int64_t{5})});
  PerWorkerValues good_it = h.coord().create_per_worker_iterator(good);
  // An unused failed resource raises nothing.
  auto ok_rv = h.run(h.coord().schedule("next", {good_it}));
  EXPECT_TRUE(h.run(h.coord().join()).ok());
  EXPECT_TRUE(ok_rv->peek()->ok());
  auto bad_rv = h.run(h.coord().schedule("next", {bad.datasets}));
  Status joined = h.run(h.coord().join());
  EXPECT_EQ(joined.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(error_kind(joined), ErrorKind::kClosureInput);
  auto fetched = h.run(bad_rv->fetch());
  EXPECT_EQ(error_kind(fetched.status()), ErrorKind::kClosureInput);
}

TEST(CoordinatorTest, ResourcesSurviveAUserErrorCancellation) {
  // S21 / E10
  Harness h(1);
  PerWorkerDataset ds = h.coord().create_per_worker_dataset("range", {Value(std::int64_t{5})});
  PerWorkerValues it = h.coord().create_per_worker_iterator(ds);
  ASSERT_TRUE(h.run(h.coord().schedule("next", {it})).ok());
  ASSERT_TRUE(h.run(h.coord().schedule("fail", {})).ok());
  EXPECT_FALSE(h.run(h.coord().join()).ok());
  auto rv = h.run(h.coord().schedule("next", {it}));
  EXPECT_TRUE(h.run(h.coord().join()).ok());
  EXPECT_TRUE(rv->peek()->ok());
}

TEST(CoordinatorTest, CancelledClosureCannotUpdateParametersAfterTheErrorIsRaised) {
  // The fence: a closure still running on a worker when its generation is
  // cancelled may not change a parameter server after join() has raised.
  Harness h(2);
  ASSERT_TRUE(h.run(h.coord().schedule("slow_add", {Value(5.0)})).ok());
  ASSERT_TRUE(h.run(h.coord().schedule("fail", {})).ok());
  EXPECT_FALSE(h.run(h.coord().join()).ok());
  h.cluster->run_until_time(h.ex().now() + 10 * kSecond);  // the slow closure tries to push
  EXPECT_EQ(h.total(), 0.0f);
  // Later generations update normally.
  ASSERT_TRUE(h.run(h.coord().schedule("slow_add", {Value(0.1)})).ok());
  EXPECT_TRUE(h.run(h.coord().join()).ok());
  EXPECT_EQ(h.total(), 1.0f);
}

TEST(CoordinatorTest, MissingTaskAtStartFailsWithinTheConnectTimeoutNamingIt) {
  TestFunctions fns;
  InMemoryClusterOptions o;
  o.shape = ClusterShape{2, 1};
  o.coordinator.connect_timeout = 5 * kSecond;
  InMemoryCluster cluster(fns.registry, o);
  cluster.kill(TaskId::worker(1));
  auto s = cluster.run(cluster.coordinator().start(test_variables(), OptimizerConfig{}, test_initial()));
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->code(), StatusCode::kUnavailable);
  EXPECT_NE(std::string(s->message()).find("worker:1"), std::string::npos) << s->message();
  EXPECT_LE(cluster.engine().now(), 6 * kSecond);
}

// Drops every message to or from the tasks in `cut`: a network partition.
struct PartitionLinks : LinkModel {
  std::set<TaskId> cut;
  std::optional<Time> deliver(const TaskId& from, const TaskId& to, std::size_t, Time now) override {
    if (cut.count(from) || cut.count(to)) return std::nullopt;
    return now + 100 * kMicrosecond;
  }
};

TEST(CoordinatorTest, PartitionedWorkerIsDetectedByHeartbeatsAndItsClosureRunsElsewhere) {
  TestFunctions fns;
  PartitionLinks links;
  InMemoryClusterOptions o;
  o.shape = ClusterShape{2, 1};
  o.links = &links;
  o.coordinator.record_dispatch_log = true;
  InMemoryCluster cluster(fns.registry, o);
  auto& c = cluster.coordinator();
  ASSERT_TRUE(cluster.run(c.start(test_variables(), OptimizerConfig{}, test_initial()))->ok());
  RemoteValue a = cluster.run(c.schedule("train", {Value(std::int64_t{0}), Value(30.0)}))->value();
  RemoteValue b = cluster.run(c.schedule("train", {Value(std::int64_t{1}), Value(30.0)}))->value();
  cluster.run_until_time(cluster.engine().now() + kSecond);
  links.cut.insert(TaskId::worker(1));  // worker 1 keeps running but nobody hears it
  cluster.run_until_time(cluster.engine().now() + 10 * kSecond);
  EXPECT_EQ(c.stats().worker_failures, 1u) << "missed heartbeats mark the worker failed";
  EXPECT_EQ(c.live_workers(), 1);
  links.cut.clear();
  auto joined = cluster.run(c.join());
  ASSERT_TRUE(joined && joined->ok());
  EXPECT_TRUE(a.peek()->ok());
  EXPECT_TRUE(b.peek()->ok());
  EXPECT_EQ(fns.starts[1], 2) << "the partitioned worker's closure ran again";
  EXPECT_EQ(c.live_workers(), 2) << "the worker rejoined once the partition healed";
}

TEST(FailureClassifierTest, TypedFactsDecideTheReaction) {
  const TaskId w = TaskId::worker(3);
  auto cls = [&](Status s, bool lost = false, bool cancelled = false) {
    return classify_closure_failure(s, FailureFacts{w, lost, cancelled}).kind;
  };
  EXPECT_EQ(cls(with_failed_task(absl::UnavailableError("reset"), w)), ClosureFailure::kWorkerFailure);
  EXPECT_EQ(cls(with_failed_task(absl::DeadlineExceededError("slow"), w)), ClosureFailure::kWorkerFailure);
  EXPECT_EQ(cls(absl::InternalError("x"), /*lost=*/true), ClosureFailure::kWorkerFailure);
  EXPECT_EQ(cls(with_error_kind(absl::AbortedError("restarted"), ErrorKind::kStaleIncarnation)),
            ClosureFailure::kWorkerFailure);
  EXPECT_EQ(cls(with_failed_task(absl::UnavailableError("down"), TaskId::ps(1))),
            ClosureFailure::kParameterServerFailure);
  EXPECT_EQ(cls(with_failed_task(absl::AbortedError("new incarnation"), TaskId::ps(0))),
            ClosureFailure::kParameterServerFailure);
  EXPECT_EQ(cls(with_failed_task(absl::DeadlineExceededError("slow ps"), TaskId::ps(0))),
            ClosureFailure::kTransientTimeout);
  EXPECT_EQ(cls(with_failed_task(absl::CancelledError("side effect"), TaskId::ps(0))),
            ClosureFailure::kDerivedCancellation);
  EXPECT_EQ(cls(with_failed_task(absl::CancelledError("cancelled"), w), false, /*cancelled=*/true),
            ClosureFailure::kCancelled);
  Status fenced = with_error_kind(with_failed_task(absl::AbortedError("fenced"), TaskId::ps(0)), ErrorKind::kFenced);
  EXPECT_EQ(cls(fenced, false, true), ClosureFailure::kCancelled);
  EXPECT_EQ(cls(fenced), ClosureFailure::kApplicationError) << "fenced by a newer coordinator: this one is stale";
  EXPECT_EQ(cls(absl::InvalidArgumentError("check_numerics")), ClosureFailure::kApplicationError);
  // A message that merely mentions a job is not a failure of that job (no text matching).
  EXPECT_EQ(cls(absl::UnavailableError("/job:worker/replica:0/task:3 failed to connect")),
            ClosureFailure::kApplicationError);
}

}  // namespace
}  // namespace twinps
