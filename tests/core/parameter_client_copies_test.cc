// A worker's own copies of a variable's values: a dense read of a variable of
// several shards is assembled into one matrix, and a whole-variable write is
// cut into its shards. ParameterClient asks the cost model to price them
// (CostModel::copy), so that the simulator charges what a real worker does;
// a variable of one shard is moved and costs nothing, and a row lookup or a
// sparse write copies only its rows (priced with the message).
#include <gtest/gtest.h>

#include "core/variables/initializers.h"
#include "core/worker/step_context.h"
#include "inmemory/in_memory_cluster.h"

namespace twinps {
namespace {

constexpr Duration kCopyTime = 3 * kMillisecond;

// Records each copy it is asked to price, and prices it kCopyTime.
class RecordingCopies final : public CostModel {
 public:
  struct Copy {
    TaskId task;
    double bytes;
  };
  Duration compute(const TaskId&, const ComputeCost&) override { return 0; }
  Duration copy(const TaskId& task, double bytes) override {
    copies.push_back(Copy{task, bytes});
    return kCopyTime;
  }
  std::vector<Copy> copies;
};

// "table": 10 x 4 over both ps; "tower": 3 x 4 on ps 1.
std::vector<VariableLayout> layouts() {
  return {VariableLayout{"table", {10, 4}, VariableKind::kTrainable, {{1, 0, 0, 5}, {2, 1, 5, 5}}},
          VariableLayout{"tower", {3, 4}, VariableKind::kTrainable, {{3, 1, 0, 3}}}};
}

struct Observed {
  std::vector<std::size_t> copies_before;  // copies recorded when each call started
  std::vector<Duration> took;              // each call's time on the clock
};

// One step of calls, each timed on the executor's clock: `calls` returns
// the calls to make, in order, given the two variables.
using Call = std::function<Task<Status>(StepContext&, const VariableLayout&, const VariableLayout&)>;

Observed run_calls(RecordingCopies& cost, bool meta, std::vector<Call> calls) {
  Observed out;
  FunctionRegistry registry;
  registry.add_step("step", [&](StepContext& ctx) -> Task<StatusOr<Value>> {
    auto table = ctx.variable("table");
    auto tower = ctx.variable("tower");
    if (!table.ok() || !tower.ok()) co_return absl::InternalError("no variables");
    for (auto& call : calls) {
      out.copies_before.push_back(cost.copies.size());
      const Time t0 = ctx.executor().now();
      Status s = co_await call(ctx, **table, **tower);
      if (!s.ok()) co_return s;
      out.took.push_back(ctx.executor().now() - t0);
    }
    co_return Value(std::int64_t{1});
  });
  InMemoryClusterOptions o;
  o.shape = ClusterShape{1, 2};
  o.cost = &cost;
  InMemoryCluster cluster(registry, o);
  std::vector<ShardState> initial;
  for (const auto& v : layouts()) {
    auto states = meta ? meta_shard_states(v) : shard_states(v, Matrix::Zero(v.rows(), v.cols()));
    for (auto& s : states) initial.push_back(std::move(s));
  }
  auto& c = cluster.coordinator();
  auto started = cluster.run(c.start(layouts(), OptimizerConfig{}, initial));
  EXPECT_TRUE(started && started->ok());
  auto rv = cluster.run(c.schedule("step"));
  EXPECT_TRUE(rv && rv->ok());
  auto joined = cluster.run(c.join());
  EXPECT_TRUE(joined && joined->ok()) << (joined ? describe(*joined) : "join did not finish");
  return out;
}

Task<Status> pull_both(StepContext& ctx, const VariableLayout& table, const VariableLayout& tower) {
  ParameterClient::PullBatch b;
  b.dense(table);
  b.dense(tower);
  auto r = co_await ctx.ps().pull(b);
  co_return r.status();
}

Task<Status> push_both(StepContext& ctx, const VariableLayout& table, const VariableLayout& tower, bool meta) {
  ParameterClient::PushBatch b;
  if (meta) {
    b.gradient(table, MetaTensor{10, 4});
    b.gradient(tower, MetaTensor{3, 4});
  } else {
    b.gradient(table, Matrix::Ones(10, 4));
    b.gradient(tower, Matrix::Ones(3, 4));
  }
  co_return co_await ctx.ps().push(std::move(b));
}

// Only what copies no whole variable: the one-shard variable, and rows.
Task<Status> pull_without_copies(StepContext& ctx, const VariableLayout& table, const VariableLayout& tower) {
  ParameterClient::PullBatch b;
  b.dense(tower);
  const RowIds ids{1, 7};
  b.rows(table, ids);
  auto r = co_await ctx.ps().pull(b);
  co_return r.status();
}

Task<Status> push_without_copies(StepContext& ctx, const VariableLayout& table, const VariableLayout& tower) {
  ParameterClient::PushBatch b;
  b.gradient(tower, Matrix::Ones(3, 4));
  b.gradient_rows(table, RowIds{1, 7}, Matrix::Ones(2, 4));
  co_return co_await ctx.ps().push(std::move(b));
}

TEST(ParameterClientCopiesTest, AVariableOfSeveralShardsIsCopiedOnceEachWayAndTheCopyTakesItsTime) {
  for (bool meta : {false, true}) {
    SCOPED_TRACE(meta ? "meta variables" : "real values");
    RecordingCopies cost;
    const Observed seen = run_calls(
        cost, meta,
        {pull_both, [meta](StepContext& ctx, const VariableLayout& a, const VariableLayout& b) {
           return push_both(ctx, a, b, meta);
         }});
    // The table's 10 x 4 floats, once after the read's replies and once
    // before the write's requests; the one-shard tower never.
    ASSERT_EQ(cost.copies.size(), 2u);
    for (const auto& c : cost.copies) {
      EXPECT_EQ(c.task.short_name(), "worker:0");
      EXPECT_EQ(c.bytes, 10 * 4 * 4);
    }
    EXPECT_EQ(seen.copies_before, (std::vector<std::size_t>{0, 1})) << "one copy in the pull, one in the push";
    // Each call took at least its copy's time on the clock.
    ASSERT_EQ(seen.took.size(), 2u);
    for (Duration d : seen.took) EXPECT_GE(d, kCopyTime);
  }
}

TEST(ParameterClientCopiesTest, OneShardVariablesAndRowsAskForNoCopy) {
  RecordingCopies cost;
  const Observed seen = run_calls(cost, false, {pull_without_copies, push_without_copies});
  EXPECT_TRUE(cost.copies.empty());
  ASSERT_EQ(seen.took.size(), 2u);
  for (Duration d : seen.took) EXPECT_LT(d, kCopyTime) << "nothing was charged";
}

}  // namespace
}  // namespace twinps
