// WorkerNode: a SetupWorker that arrives while a step runs (a recovery after
// a partition, a restarted coordinator) must not pull the variable directory
// out from under that step. Found by the simulator's swarm test.
#include <gtest/gtest.h>

#include "inmemory/in_memory_cluster.h"
#include "core/worker/step_context.h"

namespace twinps {
namespace {

TEST(WorkerNodeTest, ASetupDuringAStepLeavesTheStepItsDirectory) {
  FunctionRegistry registry;
  // Looks the variable up, waits, then uses what it looked up.
  registry.add_step("hold", [](StepContext& ctx) -> Task<StatusOr<Value>> {
    auto total = ctx.variable("total");
    if (!total.ok()) co_return total.status();
    co_await sleep_for(ctx.executor(), 2 * kSecond);
    ParameterClient::PushBatch push;
    push.add(**total, Matrix::Ones(1, 1));
    Status s = co_await ctx.ps().push(push);
    if (!s.ok()) co_return s;
    co_return Value(std::int64_t{1});
  });
  InMemoryClusterOptions o;
  o.shape = ClusterShape{1, 1};
  InMemoryCluster cluster(registry, o);
  VariableLayout total{"total", {}, VariableKind::kAccumulator, {ShardPlacement{0, 0, 0, 1}}};
  ShardState state;
  state.spec = ShardSpec{0, "total", VariableKind::kAccumulator, 1, 1};
  state.value = Matrix::Zero(1, 1);
  auto& c = cluster.coordinator();
  auto started = cluster.run(c.start({total}, OptimizerConfig{}, {state}));
  ASSERT_TRUE(started && started->ok());
  auto rv = cluster.run(c.schedule("hold"));
  ASSERT_TRUE(rv && rv->ok());
  cluster.run_until_time(cluster.engine().now() + kSecond);

  // A second setup replaces the worker's directory mid-step.
  Runtime& chief = cluster.runtime(TaskId::chief());
  bool answered = false;
  chief.transport.call(TaskId::worker(0), SetupWorkerRequest{Fence{chief.incarnation, 0}, {total}}, {},
                       [&](StatusOr<Response> r) { answered = r.ok(); });
  cluster.run_until_time(cluster.engine().now() + kSecond / 2);
  EXPECT_TRUE(answered);

  auto joined = cluster.run(c.join());
  ASSERT_TRUE(joined && joined->ok()) << (joined ? describe(*joined) : "join did not finish");
  auto result = (*rv)->peek();
  ASSERT_TRUE(result && result->ok());
  EXPECT_EQ(cluster.ps(0)->store().export_shards({})->shards[0].value(0, 0), 1.0f);
}

}  // namespace
}  // namespace twinps
