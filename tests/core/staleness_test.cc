// Staleness of applied gradients (core/ps/staleness.h): the ps answers every
// pull with the shard's version and measures each gradient against the
// version it was computed from; the histogram's buckets, mean and max; and
// SSP's clocks (core/coordinator/training_mode.h).
#include "core/ps/staleness.h"

#include <gtest/gtest.h>

#include "core/coordinator/training_mode.h"
#include "core/ps/parameter_store.h"
#include "tests/core/matrix_literal.h"

namespace twinps {
namespace {

using testutil::mat;

constexpr ShardId kDense = 1, kCounter = 2;

ParameterStore make_store() {
  ParameterStore store(ParameterStore::Options{"ps:0"});
  CreateShardsRequest req;
  req.optimizer.learning_rate = LearningRateSchedule::constant(0.5);
  ShardState dense;
  dense.spec = ShardSpec{kDense, "dense", VariableKind::kTrainable, 1, 2};
  dense.value = mat({{10, 20}});
  ShardState counter;
  counter.spec = ShardSpec{kCounter, "iterations", VariableKind::kCounter, 1, 1};
  req.shards = {dense, counter};
  EXPECT_TRUE(store.create_shards(req).ok());
  return store;
}

std::int64_t version_read(ParameterStore& store) {
  auto r = store.pull(PullRequest{{PullItem{kDense, true, {}}}});
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? r->items[0].version : -1;
}

StatusOr<PushResponse> push_gradient(ParameterStore& store, std::int64_t read_version) {
  Update u;
  u.shard = kDense;
  u.values = mat({{1, 1}});
  u.read_version = read_version;
  return store.push(PushRequest{{}, {u}, kNoSyncStep, {}});
}

TEST(StalenessTest, APullReturnsTheShardsVersionAndEachGradientIsMeasuredAgainstTheOneItWasComputedFrom) {
  ParameterStore store = make_store();
  const std::int64_t first = version_read(store);
  EXPECT_EQ(first, 0);
  // Two workers read version 0; the first to push is 0 behind, the second 1.
  auto a = push_gradient(store, first);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->staleness.total, 1u);
  EXPECT_EQ(a->staleness.max, 0);
  auto b = push_gradient(store, first);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->staleness.max, 1);
  EXPECT_EQ(version_read(store), 2);
  // A third, computed from version 0 after two updates: 2 behind.
  auto c = push_gradient(store, 0);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->staleness.max, 2);

  const StalenessHistogram& st = store.stats().staleness;
  EXPECT_EQ(st.total, 3u);
  EXPECT_EQ(st.sum, 3u);
  EXPECT_EQ(st.max, 2);
  EXPECT_DOUBLE_EQ(st.mean(), 1.0);
  EXPECT_EQ(st.counts[0], 1u);
  EXPECT_EQ(st.counts[1], 1u);
  EXPECT_EQ(st.counts[2], 1u);
}

TEST(StalenessTest, GradientsWithoutAReadVersionAreCountedUnmeasuredAndOtherUpdatesNotAtAll) {
  ParameterStore store = make_store();
  auto r = push_gradient(store, Update::kUnknownVersion);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->staleness.total, 0u);
  EXPECT_EQ(r->staleness.unmeasured, 1u);
  Update count;
  count.shard = kCounter;
  count.op = Update::Op::kAdd;
  count.counter_delta = 1;
  ASSERT_TRUE(store.push(PushRequest{{}, {count}, kNoSyncStep, {}}).ok());
  EXPECT_EQ(store.stats().staleness.total, 0u);
  EXPECT_EQ(store.stats().staleness.unmeasured, 1u);
  EXPECT_EQ(version_read(store), 1) << "the unversioned gradient was still applied";
}

TEST(StalenessTest, ADuplicatePushIsNotMeasuredAgain) {
  ParameterStore store = make_store();
  Update u;
  u.shard = kDense;
  u.values = mat({{1, 1}});
  u.read_version = 0;
  const TaskId worker = TaskId::worker(0);
  ASSERT_TRUE(store.push(PushRequest{{}, {u}, kNoSyncStep, {}}, 7, worker).ok());
  auto again = store.push(PushRequest{{}, {u}, kNoSyncStep, {}}, 7, worker);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->duplicate);
  EXPECT_EQ(again->staleness.total, 0u);
  EXPECT_EQ(store.stats().staleness.total, 1u);
}

TEST(StalenessTest, HistogramBucketsMergeAndDescribe) {
  StalenessHistogram h;
  for (std::int64_t s : {0, 0, 1, 5, 6, 7, 2000}) h.record(s);
  h.record(-3);  // a shard restored to an older version since the read: nothing came in between
  EXPECT_EQ(h.total, 8u);
  EXPECT_EQ(h.max, 2000);
  EXPECT_EQ(h.counts[0], 3u);
  EXPECT_EQ(h.counts[5], 2u) << "5 and 6 share the bucket 5-6";
  EXPECT_EQ(h.counts[6], 1u) << "7 is in 7-8";
  EXPECT_EQ(h.counts.back(), 1u) << "above 1024";
  EXPECT_EQ(h.describe(), "max 2000, mean 252.38 over 8 gradients; 0:3 1:1 5-6:2 7-8:1 >1024:1");
  StalenessHistogram other;
  other.record(3);
  other.unmeasured = 2;
  h.merge(other);
  EXPECT_EQ(h.total, 9u);
  EXPECT_EQ(h.counts[3], 1u);
  EXPECT_EQ(h.unmeasured, 2u);
  EXPECT_EQ(StalenessHistogram{}.describe(), "none measured");
}

TEST(SspClockTest, AWorkerMayRunAtMostTheBoundAheadOfTheSlowestLiveWorker) {
  SspClock clock(3, 1);
  EXPECT_TRUE(clock.may_start(0));
  clock.tick(0);
  EXPECT_TRUE(clock.may_start(0)) << "1 ahead of the slowest (0) is within bound 1";
  clock.tick(0);
  EXPECT_FALSE(clock.may_start(0)) << "2 ahead";
  EXPECT_TRUE(clock.may_start(1));
  clock.tick(1);
  clock.tick(2);
  EXPECT_TRUE(clock.may_start(0)) << "the slowest is at 1 now";
}

TEST(SspClockTest, ADeadWorkerLeavesTheSetAndARecoveredOneRejoinsAtTheSlowestLiveClock) {
  SspClock clock(3, 0);
  clock.tick(0);
  clock.tick(1);
  EXPECT_FALSE(clock.may_start(0)) << "worker 2 is behind";
  clock.leave(2);
  EXPECT_TRUE(clock.may_start(0)) << "a dead worker blocks no one";
  EXPECT_EQ(clock.slowest(), 1);
  clock.tick(0);
  clock.tick(1);
  clock.rejoin(2);
  EXPECT_EQ(clock.clock(2), 2) << "rejoins at the slowest live clock, not its old 0";
  EXPECT_TRUE(clock.may_start(0));
  clock.leave(0);
  clock.leave(1);
  clock.leave(2);
  EXPECT_EQ(clock.slowest(), 0);
  clock.rejoin(1);
  EXPECT_EQ(clock.clock(1), 2) << "alone, it keeps its own clock";
}

}  // namespace
}  // namespace twinps
