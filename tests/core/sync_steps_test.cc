// Synchronous training: the ps's side (gradients of a step summed, applied as
// one averaged update, late ones dropped and counted; core/ps/parameter_store.h)
// and the coordinator's bookkeeping of steps (SyncSteps,
// core/coordinator/training_mode.h): N of M, backup workers, dead workers,
// the end of a schedule.
#include <gtest/gtest.h>

#include "core/coordinator/training_mode.h"
#include "core/ps/parameter_store.h"
#include "tests/core/matrix_literal.h"

namespace twinps {
namespace {

using testutil::mat;

constexpr ShardId kDense = 1, kEmb = 2, kCounter = 3;

// SGD(0.5) over a dense shard [10 20], an embedding shard of 3 rows of 2, and a counter.
ParameterStore make_store() {
  ParameterStore store(ParameterStore::Options{"ps:0"});
  CreateShardsRequest req;
  req.optimizer.learning_rate = LearningRateSchedule::constant(0.5);
  ShardState dense;
  dense.spec = ShardSpec{kDense, "dense", VariableKind::kTrainable, 1, 2};
  dense.value = mat({{10, 20}});
  ShardState emb;
  emb.spec = ShardSpec{kEmb, "emb", VariableKind::kTrainable, 3, 2};
  emb.value = mat({{1, 1}, {2, 2}, {3, 3}});
  ShardState counter;
  counter.spec = ShardSpec{kCounter, "iterations", VariableKind::kCounter, 1, 1};
  req.shards = {dense, emb, counter};
  EXPECT_TRUE(store.create_shards(req).ok());
  return store;
}

Matrix value(ParameterStore& store, ShardId id) {
  auto r = store.pull(PullRequest{{PullItem{id, true, {}}}});
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? r->items[0].values : Matrix();
}
std::int64_t version(ParameterStore& store, ShardId id) {
  auto r = store.pull(PullRequest{{PullItem{id, true, {}}}});
  return r.ok() ? r->items[0].version : -1;
}

Update dense_grad(Matrix g, std::int64_t read_version) {
  Update u;
  u.shard = kDense;
  u.values = std::move(g);
  u.read_version = read_version;
  return u;
}

// One worker's push of step `step`.
StatusOr<PushResponse> push(ParameterStore& store, std::int64_t step, std::vector<Update> updates) {
  PushRequest req;
  req.updates = std::move(updates);
  req.sync_step = step;
  return store.push(req);
}

Status apply(ParameterStore& store, std::int64_t step, Fence fence = {}) {
  return store.apply_sync_step(ApplySyncStepRequest{fence, step});
}

TEST(SyncAggregationTest, AStepsGradientsWaitAndAreAppliedAsTheirMeanInOneUpdate) {
  ParameterStore store = make_store();
  // Three workers read version 0 and push their gradients of step 0.
  for (const Matrix& g : {mat({{2, 4}}), mat({{4, 8}}), mat({{0, 0}})}) {
    auto r = push(store, 0, {dense_grad(g, 0)});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->staleness.total, 1u);
    EXPECT_EQ(r->staleness.max, 0);
    EXPECT_EQ(r->staleness.dropped, 0u);
  }
  // Nothing applied yet: every worker of the step read the same values.
  EXPECT_EQ(value(store, kDense), mat({{10, 20}}));
  EXPECT_EQ(version(store, kDense), 0);
  EXPECT_EQ(store.stats().optimizer_steps, 0u);

  ASSERT_TRUE(apply(store, 0).ok());
  // Mean [2 4]; SGD(0.5): [10 - 1, 20 - 2]. One optimizer step, one version.
  EXPECT_EQ(value(store, kDense), mat({{9, 18}}));
  EXPECT_EQ(version(store, kDense), 1);
  EXPECT_EQ(store.stats().optimizer_steps, 1u);
  EXPECT_EQ(store.applied_sync_step(), 0);
  // The three gradients were applied with staleness 0 (in the store's totals once applied).
  EXPECT_EQ(store.stats().staleness.total, 3u);
  EXPECT_EQ(store.stats().staleness.max, 0);
  EXPECT_EQ(store.stats().staleness.counts[0], 3u);
}

TEST(SyncAggregationTest, NOfMApplyTheStepAndTheLateGradientIsDroppedAndCounted) {
  ParameterStore store = make_store();
  // Two of three workers (one backup worker) arrive; the step is applied.
  ASSERT_TRUE(push(store, 0, {dense_grad(mat({{2, 2}}), 0)}).ok());
  ASSERT_TRUE(push(store, 0, {dense_grad(mat({{4, 6}}), 0)}).ok());
  ASSERT_TRUE(apply(store, 0).ok());
  // Mean [3 4]: [10 - 1.5, 20 - 2].
  EXPECT_EQ(value(store, kDense), mat({{8.5, 18}}));

  // The straggler's gradient of step 0 comes after: dropped, never applied.
  auto late = push(store, 0, {dense_grad(mat({{100, 100}}), 0)});
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_EQ(late->staleness.dropped, 1u);
  EXPECT_EQ(late->staleness.total, 0u);
  EXPECT_EQ(value(store, kDense), mat({{8.5, 18}}));
  EXPECT_EQ(version(store, kDense), 1);
  EXPECT_EQ(store.stats().staleness.dropped, 1u);
  EXPECT_EQ(store.stats().staleness.total, 2u);

  // Step 1 goes on as usual; applying a step already applied again changes nothing.
  ASSERT_TRUE(push(store, 1, {dense_grad(mat({{1, 2}}), 1)}).ok());
  ASSERT_TRUE(apply(store, 0).ok());
  EXPECT_EQ(value(store, kDense), mat({{8.5, 18}}));
  ASSERT_TRUE(apply(store, 1).ok());
  EXPECT_EQ(value(store, kDense), mat({{8, 17}}));
  EXPECT_EQ(store.stats().optimizer_steps, 2u);
  EXPECT_EQ(store.stats().staleness.max, 0);
}

TEST(SyncAggregationTest, SparseGradientsAreSummedPerRowAndDividedByTheContributions) {
  ParameterStore store = make_store();
  Update a;
  a.shard = kEmb;
  a.sparse = true;
  a.rows = {0, 2};
  a.values = mat({{2, 2}, {4, 4}});
  a.read_version = 0;
  Update b = a;
  b.rows = {2};
  b.values = mat({{2, 6}});
  ASSERT_TRUE(push(store, 0, {a}).ok());
  ASSERT_TRUE(push(store, 0, {b}).ok());
  ASSERT_TRUE(apply(store, 0).ok());
  // Two contributions: row 0 gets [2 2] / 2, row 2 ([4 4] + [2 6]) / 2, row 1 nothing.
  EXPECT_EQ(value(store, kEmb), mat({{0.5, 0.5}, {2, 2}, {1.5, 0.5}}));
  EXPECT_EQ(version(store, kEmb), 1);
  // The dense shard got no gradient in this step and did not move.
  EXPECT_EQ(version(store, kDense), 0);
}

TEST(SyncAggregationTest, CountersAndMetricsInATaggedPushApplyAtOnce) {
  ParameterStore store = make_store();
  Update count;
  count.shard = kCounter;
  count.op = Update::Op::kAdd;
  count.counter_delta = 1;
  ASSERT_TRUE(push(store, 0, {dense_grad(mat({{2, 2}}), 0), count}).ok());
  auto r = store.pull(PullRequest{{PullItem{kCounter, true, {}}}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->items[0].counter, 1);
  EXPECT_EQ(value(store, kDense), mat({{10, 20}}));
}

TEST(SyncAggregationTest, ANewCoordinatorStartsTheStepsAfreshAndAnOldOneIsFenced) {
  ParameterStore store = make_store();
  ASSERT_TRUE(store.set_fence(Fence{7, 0}).ok());
  ASSERT_TRUE(apply(store, 5, Fence{7, 0}).ok());
  EXPECT_EQ(store.applied_sync_step(), 5);
  // Coordinator 8 takes over: its step 0 is not "already applied".
  ASSERT_TRUE(store.set_fence(Fence{8, 0}).ok());
  EXPECT_EQ(store.applied_sync_step(), -1);
  PushRequest req;
  req.fence = Fence{8, 0};
  req.updates = {dense_grad(mat({{2, 2}}), 0)};
  req.sync_step = 0;
  auto r = store.push(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->staleness.dropped, 0u);
  // The old coordinator can no longer apply steps.
  Status old = apply(store, 0, Fence{7, 0});
  EXPECT_EQ(old.code(), StatusCode::kAborted);
  EXPECT_EQ(error_kind(old), ErrorKind::kFenced);
  EXPECT_EQ(value(store, kDense), mat({{10, 20}}));
  ASSERT_TRUE(apply(store, 0, Fence{8, 0}).ok());
  EXPECT_EQ(value(store, kDense), mat({{9, 19}}));
}

TEST(SyncAggregationTest, NegativeStepsAreRefused) {
  ParameterStore store = make_store();
  EXPECT_EQ(apply(store, -1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(push(store, -2, {dense_grad(mat({{1, 1}}), 0)}).status().code(), StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------- SyncSteps

TEST(SyncStepsTest, AStepIsReadyWhenWorkersMinusBackupCompletedAndTheStragglerJoinsLater) {
  SyncSteps steps(3, 1);
  EXPECT_EQ(steps.required(), 2);
  for (int w = 0; w < 3; ++w) {
    ASSERT_TRUE(steps.may_start(w));
    EXPECT_EQ(steps.start(w), 0);
    EXPECT_FALSE(steps.may_start(w)) << "one closure per worker and step";
  }
  steps.finish(0, 0, true);
  EXPECT_FALSE(steps.ready(false)) << "1 of 2 completed, 2 still running";
  steps.finish(1, 0, true);
  EXPECT_TRUE(steps.ready(true));
  steps.advance();
  EXPECT_EQ(steps.step(), 1);
  // Worker 2 (the straggler) still runs step 0; its end changes nothing in step 1.
  steps.finish(2, 0, true);
  EXPECT_EQ(steps.completed(), 0);
  EXPECT_EQ(steps.running(), 0);
  EXPECT_TRUE(steps.may_start(2));
}

TEST(SyncStepsTest, WithoutBackupWorkersEveryLiveWorkerIsWaitedForAndADeadOneIsNot) {
  SyncSteps steps(3, 0);
  for (int w = 0; w < 3; ++w) steps.start(w);
  steps.finish(0, 0, true);
  steps.finish(1, 0, true);
  EXPECT_FALSE(steps.ready(true)) << "worker 2 still runs";
  // Worker 2 dies: its closure ends without completing, and the step needs only the two live ones.
  steps.leave(2);
  steps.finish(2, 0, false);
  EXPECT_EQ(steps.required(), 2);
  EXPECT_TRUE(steps.ready(true));
  EXPECT_FALSE(steps.may_start(2));
  steps.advance();
  // Recovered, it joins the current step.
  steps.rejoin(2);
  EXPECT_TRUE(steps.may_start(2));
  EXPECT_EQ(steps.required(), 3);
}

TEST(SyncStepsTest, AtTheEndOfTheScheduleAPartialStepIsReadyButNotWhileWorkIsQueued) {
  SyncSteps steps(3, 0);
  steps.start(0);
  EXPECT_FALSE(steps.ready(false)) << "nothing completed yet";
  steps.finish(0, 0, true);
  EXPECT_FALSE(steps.ready(true)) << "queued work will join the step";
  EXPECT_TRUE(steps.ready(false)) << "no more work: applied with the one gradient it has";
}

TEST(SyncStepsTest, AClosureThatDidNotCompleteLetsItsWorkerTakeAnotherInTheSameStep) {
  SyncSteps steps(2, 0);
  steps.start(0);
  steps.finish(0, 0, false);
  EXPECT_TRUE(steps.may_start(0));
  EXPECT_EQ(steps.running(), 0);
  EXPECT_EQ(steps.completed(), 0);
}

}  // namespace
}  // namespace twinps
