// The parameter server's state: creating shards, pulls, pushes through the
// optimizer, duplicate pushes, fences, and refusing malformed requests whole.
#include "tests/core/matrix_literal.h"
#include "core/ps/parameter_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace twinps {
namespace {

using testutil::mat;
using ::testing::HasSubstr;

OptimizerConfig sgd(double lr) {
  OptimizerConfig c;
  c.learning_rate = LearningRateSchedule::constant(lr);
  return c;
}

ShardState shard(ShardId id, std::string name, VariableKind kind, Matrix value) {
  ShardState s;
  s.spec = ShardSpec{id, std::move(name), kind, value.rows(), value.cols()};
  s.value = std::move(value);
  return s;
}
ShardState counter_shard(ShardId id, std::string name, std::int64_t value = 0) {
  ShardState s;
  s.spec = ShardSpec{id, std::move(name), VariableKind::kCounter, 1, 1};
  s.counter = value;
  return s;
}

constexpr ShardId kEmb = 1, kDense = 2, kMetric = 3, kIterations = 4;

// A store with an embedding shard (3x2), a dense shard (1x2), a metric
// accumulator and an iterations counter, trained with SGD(lr=0.5).
ParameterStore make_store(ParameterStore::Options options = {}) {
  options.name = "ps:0";
  ParameterStore store(options);
  CreateShardsRequest req;
  req.optimizer = sgd(0.5);
  req.shards = {shard(kEmb, "emb/part_1", VariableKind::kTrainable, mat({{1, 1}, {2, 2}, {3, 3}})),
                shard(kDense, "dense", VariableKind::kTrainable, mat({{10, 20}})),
                shard(kMetric, "loss_sum", VariableKind::kAccumulator, mat({{0}})),
                counter_shard(kIterations, "iterations")};
  Status s = store.create_shards(req);
  EXPECT_TRUE(s.ok()) << s;
  return store;
}

PullItem all_rows(ShardId id) { return PullItem{id, true, {}}; }
PullItem some_rows(ShardId id, RowIds rows) { return PullItem{id, false, std::move(rows)}; }

Matrix pull_all(ParameterStore& store, ShardId id) {
  auto r = store.pull(PullRequest{{all_rows(id)}});
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? r->items[0].values : Matrix();
}
std::int64_t pull_counter(ParameterStore& store, ShardId id) {
  auto r = store.pull(PullRequest{{all_rows(id)}});
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? r->items[0].counter : -1;
}

Update dense_grad(ShardId id, Matrix g) {
  Update u;
  u.shard = id;
  u.values = std::move(g);
  return u;
}
Update sparse_grad(ShardId id, RowIds rows, Matrix g) {
  Update u;
  u.shard = id;
  u.sparse = true;
  u.rows = std::move(rows);
  u.values = std::move(g);
  return u;
}
Update counter_add(ShardId id, std::int64_t delta) {
  Update u;
  u.shard = id;
  u.op = Update::Op::kAdd;
  u.counter_delta = delta;
  return u;
}
PushRequest push_of(std::vector<Update> updates, Fence fence = {}) {
  PushRequest p;
  p.fence = fence;
  p.updates = std::move(updates);
  return p;
}

bool contains(const Status& s, const std::string& text) {
  return std::string(s.message()).find(text) != std::string::npos;
}

// ---------------------------------------------------------------- create, pull

TEST(ParameterStoreTest, PullsAllRowsSelectedRowsAndCounters) {
  ParameterStore store = make_store();
  PullRequest req;
  req.items = {all_rows(kEmb), some_rows(kEmb, {2, 0, 2}), all_rows(kIterations), some_rows(kEmb, {})};
  auto r = store.pull(req);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->items.size(), 4u);
  EXPECT_EQ(r->items[0].values, mat({{1, 1}, {2, 2}, {3, 3}}));
  EXPECT_EQ(r->items[1].values, mat({{3, 3}, {1, 1}, {3, 3}}));
  EXPECT_EQ(r->items[2].counter, 0);
  EXPECT_EQ(r->items[3].values.rows(), 0);
  EXPECT_EQ(r->items[3].values.cols(), 2);
  EXPECT_EQ(store.stats().bytes_pulled, (6u + 6u) * 4u + 8u);
}

TEST(ParameterStoreTest, ResendingTheSameSpecKeepsTrainedValues) {
  ParameterStore store = make_store();
  ASSERT_TRUE(store.push(push_of({dense_grad(kDense, mat({{2, 2}}))})).ok());
  CreateShardsRequest again;
  again.optimizer = sgd(0.5);
  again.shards = {shard(kDense, "dense", VariableKind::kTrainable, mat({{10, 20}}))};
  ASSERT_TRUE(store.create_shards(again).ok());
  EXPECT_EQ(pull_all(store, kDense), mat({{9, 19}}));

  again.replace_existing = true;  // a restore overwrites
  ASSERT_TRUE(store.create_shards(again).ok());
  EXPECT_EQ(pull_all(store, kDense), mat({{10, 20}}));
}

TEST(ParameterStoreTest, ConflictingSpecOrOptimizerIsRefused) {
  ParameterStore store = make_store();
  CreateShardsRequest req;
  req.optimizer = sgd(0.5);
  req.shards = {shard(kDense, "dense", VariableKind::kTrainable, mat({{1, 2, 3}}))};
  Status s = store.create_shards(req);
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists);
  EXPECT_TRUE(contains(s, "dense")) << s;

  req.shards = {shard(9, "other", VariableKind::kTrainable, mat({{1}}))};
  req.optimizer = sgd(0.1);
  s = store.create_shards(req);
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists) << s;
  EXPECT_FALSE(store.has_shard(9));
  EXPECT_DOUBLE_EQ(store.optimizer()->learning_rate(0), 0.5);
}

TEST(ParameterStoreTest, FreshShardsGetInitialSlotsAndRestoredOnesKeepTheirs) {
  ParameterStore store;
  CreateShardsRequest req;
  req.optimizer.kind = OptimizerConfig::Kind::kAdagrad;
  req.shards = {shard(1, "a", VariableKind::kTrainable, mat({{1, 2}}))};
  ShardState restored = shard(2, "b", VariableKind::kTrainable, mat({{3}}));
  restored.slots = {mat({{7}})};
  restored.step = 12;
  req.shards.push_back(restored);
  ASSERT_TRUE(store.create_shards(req).ok());
  auto out = store.export_shards({});
  ASSERT_TRUE(out.ok());
  ASSERT_EQ(out->shards.size(), 2u);
  EXPECT_EQ(out->shards[0].slots[0], mat({{0.1f, 0.1f}}));
  EXPECT_EQ(out->shards[1].slots[0], mat({{7}}));
  EXPECT_EQ(out->shards[1].step, 12);
}

TEST(ParameterStoreTest, MalformedCreateShardsIsRefusedWhole) {
  ParameterStore store;
  auto expect_invalid = [&](CreateShardsRequest req, const std::string& text) {
    Status s = store.create_shards(req);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << text;
    EXPECT_TRUE(contains(s, text)) << s;
    EXPECT_EQ(store.shard_count(), 0u);
  };
  CreateShardsRequest req;
  req.optimizer = sgd(0.1);
  req.shards = {shard(1, "ok", VariableKind::kTrainable, mat({{1}})), shard(2, "bad", VariableKind::kTrainable, mat({{1}}))};
  req.shards[1].spec.rows = 2;
  expect_invalid(req, "value is 1x1");
  req.shards[1] = shard(1, "dup", VariableKind::kTrainable, mat({{1}}));
  expect_invalid(req, "twice");
  req.shards[1] = shard(2, "slots", VariableKind::kTrainable, mat({{1}}));
  req.shards[1].slots = {mat({{0}})};
  expect_invalid(req, "optimizer slots");
  req.shards.pop_back();
  req.optimizer.learning_rate.initial = -1;
  expect_invalid(req, "learning_rate.initial");
}

// ---------------------------------------------------------------- per-shard optimizers

TEST(ParameterStoreTest, AShardWithItsOwnOptimizerIsUpdatedAndCheckpointedByIt) {
  // A model whose optimizer groups differ: the store runs SGD(0.5) for shards
  // without an optimizer of their own, Adagrad(lr 1, accumulator 1) for "emb".
  ParameterStore store;
  CreateShardsRequest req;
  req.optimizer = sgd(0.5);
  OptimizerConfig adagrad;
  adagrad.kind = OptimizerConfig::Kind::kAdagrad;
  adagrad.learning_rate = LearningRateSchedule::constant(1.0);
  adagrad.initial_accumulator_value = 1.0;
  req.shards = {shard(1, "emb", VariableKind::kTrainable, mat({{1, 1}, {2, 2}})),
                shard(2, "dense", VariableKind::kTrainable, mat({{10, 20}}))};
  req.shards[0].spec.optimizer = adagrad;
  ASSERT_TRUE(store.create_shards(req).ok());

  ASSERT_TRUE(store.push(push_of({sparse_grad(1, {1}, mat({{3, 0}})), dense_grad(2, mat({{2, 4}}))})).ok());
  // Adagrad on row 1: accumulator 1 + 9 = 10, value 2 - 3/(sqrt(10) + 1e-7); row 0 untouched.
  EXPECT_EQ(pull_all(store, 1), mat({{1, 1}, {2 - 3.0f / (std::sqrt(10.0f) + 1e-7f), 2}}));
  EXPECT_EQ(pull_all(store, 2), mat({{9, 18}})) << "SGD(0.5), the store's";

  auto out = store.export_shards({});
  ASSERT_TRUE(out.ok());
  ASSERT_EQ(out->shards[0].spec.optimizer, adagrad) << "exported with its optimizer";
  EXPECT_EQ(out->shards[0].slots, std::vector<Matrix>{mat({{1, 1}, {10, 1}})});
  EXPECT_FALSE(out->shards[1].spec.optimizer);
  EXPECT_TRUE(out->shards[1].slots.empty()) << "plain SGD keeps no slots";

  // Resending the shard with another optimizer is a conflict, not a silent switch.
  CreateShardsRequest other = req;
  other.shards = {req.shards[0]};
  other.shards[0].spec.optimizer->learning_rate = LearningRateSchedule::constant(0.1);
  EXPECT_EQ(store.create_shards(other).code(), StatusCode::kAlreadyExists);
  // Switching the store's optimizer does not touch a shard that has its own.
  other.optimizer.kind = OptimizerConfig::Kind::kAdam;
  other.replace_existing = true;
  other.shards = {shard(2, "dense", VariableKind::kTrainable, mat({{1, 1}}))};
  ASSERT_TRUE(store.create_shards(other).ok());
  EXPECT_EQ(store.optimizer()->name(), "adam");
  auto again = store.export_shards({});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->shards[0].slots.size(), 1u) << "emb keeps Adagrad's slot";
  EXPECT_EQ(again->shards[1].slots.size(), 2u) << "dense now has Adam's";
}

TEST(ParameterStoreTest, AShardsOwnOptimizerIsCheckedLikeTheStores) {
  ParameterStore store;
  auto refused = [&](ShardState s, const std::string& text) {
    CreateShardsRequest req;
    req.optimizer = sgd(0.1);
    req.shards = {shard(1, "ok", VariableKind::kTrainable, mat({{1}})), std::move(s)};
    Status st = store.create_shards(req);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << text;
    EXPECT_TRUE(contains(st, text)) << st;
    EXPECT_EQ(store.shard_count(), 0u);
  };
  OptimizerConfig adam;
  adam.kind = OptimizerConfig::Kind::kAdam;
  ShardState metric = shard(2, "loss/total", VariableKind::kAccumulator, mat({{0}}));
  metric.spec.optimizer = adam;
  refused(metric, "shard 1 ('loss/total', id 2): only a trainable shard has an optimizer");
  ShardState w = shard(2, "w", VariableKind::kTrainable, mat({{0}}));
  w.spec.optimizer = adam;
  w.spec.optimizer->beta_1 = 1;
  refused(w, "('w', id 2): optimizer.beta_1");
  w.spec.optimizer = adam;
  w.slots = {mat({{0}})};
  refused(w, "('w', id 2): has 1 optimizer slots; adam needs 2");
}

// ---------------------------------------------------------------- push

TEST(ParameterStoreTest, AppliesDenseAndSparseGradientsAddsAndAssigns) {
  ParameterStore store = make_store();
  Update add_metric;
  add_metric.shard = kMetric;
  add_metric.op = Update::Op::kAdd;
  add_metric.values = mat({{2.5f}});
  auto r = store.push(push_of({dense_grad(kDense, mat({{2, 4}})), sparse_grad(kEmb, {2, 0, 2}, mat({{1, 0}, {2, 2}, {1, 0}})),
                               add_metric, counter_add(kIterations, 1)}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->duplicate);
  EXPECT_EQ(pull_all(store, kDense), mat({{9, 18}}));
  EXPECT_EQ(pull_all(store, kEmb), mat({{0, 0}, {2, 2}, {2, 3}}));
  EXPECT_EQ(pull_all(store, kMetric), mat({{2.5f}}));
  EXPECT_EQ(pull_counter(store, kIterations), 1);

  Update reset = add_metric;
  reset.op = Update::Op::kAssign;
  reset.values = mat({{0}});
  ASSERT_TRUE(store.push(push_of({reset})).ok());
  EXPECT_EQ(pull_all(store, kMetric), mat({{0}}));

  const auto& st = store.stats();
  EXPECT_EQ(st.push_requests, 2u);
  EXPECT_EQ(st.updates_applied, 5u);
  EXPECT_EQ(st.optimizer_steps, 2u);
  EXPECT_EQ(st.rows_updated, 1u + 2u + 1u + 1u + 1u);
  EXPECT_GT(st.bytes_pushed, 0u);
  auto exported = store.export_shards(ExportShardsRequest{{kEmb, kDense}});
  ASSERT_TRUE(exported.ok());
  EXPECT_EQ(exported->shards[0].step, 1);
  EXPECT_EQ(exported->shards[1].step, 1);
}

// The data plane lets the ps answer from its shards' memory (no copy); an
// answer still being written must keep what was read while pushes go on.
TEST(ParameterStoreTest, AnAnswerSharingAShardsMemoryKeepsWhatItRead) {
  ParameterStore store = make_store();
  PullRequest shared_read{{all_rows(kDense), some_rows(kEmb, {1}), all_rows(kMetric)}};
  shared_read.share_shard_memory = true;
  auto held = store.pull(shared_read);
  ASSERT_TRUE(held.ok()) << held.status();
  ASSERT_NE(held->items[0].shared, nullptr);
  EXPECT_TRUE(held->items[0].values.size() == 0);
  EXPECT_EQ(held->items[1].shared, nullptr);  // selected rows are gathered, as always
  EXPECT_EQ(held->items[1].values, mat({{2, 2}}));
  EXPECT_EQ(store.stats().bytes_pulled, (2u + 2u + 1u) * 4u);

  Update assign_metric;
  assign_metric.shard = kMetric;
  assign_metric.op = Update::Op::kAssign;
  assign_metric.values = mat({{7}});
  Update add_dense = dense_grad(kDense, mat({{1, 1}}));
  add_dense.op = Update::Op::kAdd;
  ASSERT_TRUE(store.push(push_of({dense_grad(kDense, mat({{2, 4}})), assign_metric})).ok());
  ASSERT_TRUE(store.push(push_of({add_dense})).ok());

  EXPECT_EQ(held->items[0].tensor(), mat({{10, 20}}));  // what was read, not what is now
  EXPECT_EQ(held->items[2].tensor(), mat({{0}}));
  EXPECT_EQ(pull_all(store, kDense), mat({{10, 19}}));  // SGD(0.5) of {2, 4}, then + {1, 1}
  EXPECT_EQ(pull_all(store, kMetric), mat({{7}}));

  // Once the answer is gone, writes go to the same memory again.
  auto again = store.pull(shared_read);
  ASSERT_TRUE(again.ok());
  const Matrix* memory = again->items[0].shared.get();
  again->items[0].shared.reset();
  ASSERT_TRUE(store.push(push_of({add_dense})).ok());
  auto after = store.pull(shared_read);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->items[0].shared.get(), memory);
  EXPECT_EQ(after->items[0].tensor(), mat({{11, 20}}));
}

TEST(ParameterStoreTest, TheShardsStepDrivesAdam) {
  ParameterStore store;
  CreateShardsRequest req;
  req.optimizer.kind = OptimizerConfig::Kind::kAdam;
  req.optimizer.learning_rate = LearningRateSchedule::constant(0.1);
  req.shards = {shard(1, "w", VariableKind::kTrainable, mat({{1}}))};
  ASSERT_TRUE(store.create_shards(req).ok());
  ASSERT_TRUE(store.push(push_of({dense_grad(1, mat({{0.5f}}))})).ok());
  ASSERT_TRUE(store.push(push_of({dense_grad(1, mat({{0.5f}}))})).ok());
  // A constant gradient keeps m/sqrt(v) at 1 after bias correction: each step moves lr.
  EXPECT_NEAR(pull_all(store, 1)(0, 0), 0.8, 1e-5);
  EXPECT_EQ(store.export_shards({})->shards[0].step, 2);
}

TEST(ParameterStoreTest, ADuplicatePushIsAcknowledgedAndAppliedOnce) {
  ParameterStore store = make_store();
  const PushRequest p = push_of({counter_add(kIterations, 1), dense_grad(kDense, mat({{2, 2}}))});
  auto first = store.push(p, /*request_id=*/77, TaskId::worker(0));
  auto again = store.push(p, 77, TaskId::worker(0));
  ASSERT_TRUE(first.ok() && again.ok());
  EXPECT_FALSE(first->duplicate);
  EXPECT_TRUE(again->duplicate);
  EXPECT_EQ(pull_counter(store, kIterations), 1);
  EXPECT_EQ(pull_all(store, kDense), mat({{9, 19}}));
  EXPECT_EQ(store.stats().duplicates_dropped, 1u);

  // The same id from another caller is another push; id 0 is never deduplicated.
  EXPECT_FALSE(store.push(p, 77, TaskId::worker(1))->duplicate);
  EXPECT_FALSE(store.push(p, 0, TaskId::worker(0))->duplicate);
  EXPECT_FALSE(store.push(p, 0, TaskId::worker(0))->duplicate);
  EXPECT_EQ(pull_counter(store, kIterations), 4);
}

// Exactly-once visitation: a split's push is applied once whichever worker
// sends it (its closure ran again elsewhere after its worker died, or a hung
// worker resumed); other splits, and pushes without a key, are not affected.
TEST(ParameterStoreTest, ASplitsPushIsAppliedOnceWhoeverSendsIt) {
  ParameterStore store = make_store();
  PushRequest p = push_of({counter_add(kIterations, 1)});
  p.split_key = 42;
  EXPECT_FALSE(store.push(p, 1, TaskId::worker(0))->duplicate);
  EXPECT_TRUE(store.push(p, 9, TaskId::worker(1))->duplicate) << "the same split from another worker";
  EXPECT_EQ(pull_counter(store, kIterations), 1);
  EXPECT_EQ(store.stats().duplicates_dropped, 1u);

  p.split_key = 43;
  EXPECT_FALSE(store.push(p, 2, TaskId::worker(0))->duplicate) << "another split";
  p.split_key = 0;
  EXPECT_FALSE(store.push(p, 3, TaskId::worker(1))->duplicate);
  EXPECT_EQ(pull_counter(store, kIterations), 3);

  // Another coordinator numbers its splits afresh: its split 42 is new.
  PushRequest other = push_of({counter_add(kIterations, 1)});
  other.split_key = 42;
  other.fence.coordinator = 7;
  EXPECT_FALSE(store.push(other, 4, TaskId::worker(0))->duplicate);
  EXPECT_EQ(pull_counter(store, kIterations), 4);
}

TEST(ParameterStoreTest, APushServesItsReadsAfterApplyingItsUpdates) {
  ParameterStore store = make_store();
  PushRequest p = push_of({counter_add(kIterations, 1), dense_grad(kDense, mat({{2, 2}}))});
  p.then_pull.items = {PullItem{kDense, true, {}}, PullItem{kEmb, false, {2, 0}}, PullItem{kIterations, true, {}}};
  auto r = store.push(p, 5, TaskId::worker(0));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->pulled.items.size(), 3u);
  EXPECT_EQ(r->pulled.items[0].values, mat({{9, 19}})) << "the read sees the update";
  EXPECT_EQ(r->pulled.items[1].values, mat({{3, 3}, {1, 1}}));
  EXPECT_EQ(r->pulled.items[2].counter, 1);
  // A duplicate is not applied again, but its reads are still served.
  auto again = store.push(p, 5, TaskId::worker(0));
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->duplicate);
  EXPECT_EQ(again->pulled.items[0].values, mat({{9, 19}}));
}

TEST(ParameterStoreTest, ABadReadRefusesThePushWhole) {
  ParameterStore store = make_store();
  PushRequest p = push_of({dense_grad(kDense, mat({{2, 2}}))});
  p.then_pull.items = {PullItem{kEmb, false, {7}}};
  auto r = store.push(p, 6, TaskId::worker(0));
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(pull_all(store, kDense), mat({{10, 20}})) << "nothing applied";
}

TEST(ParameterStoreTest, DeduplicationRemembersABoundedWindowOfIds) {
  ParameterStore store = make_store({.name = "", .dedup_window = 2});
  const PushRequest p = push_of({counter_add(kIterations, 1)});
  ASSERT_TRUE(store.push(p, 1).ok());
  ASSERT_TRUE(store.push(p, 2).ok());
  EXPECT_TRUE(store.push(p, 1)->duplicate);
  ASSERT_TRUE(store.push(p, 3).ok());  // evicts id 1
  EXPECT_TRUE(store.push(p, 2)->duplicate);
  EXPECT_FALSE(store.push(p, 1)->duplicate);
  EXPECT_EQ(pull_counter(store, kIterations), 4);
}

TEST(ParameterStoreTest, ARefusedPushIsNotRememberedAsApplied) {
  ParameterStore store = make_store();
  ASSERT_FALSE(store.push(push_of({counter_add(99, 1)}), 5).ok());
  auto retry = store.push(push_of({counter_add(kIterations, 1)}), 5);
  ASSERT_TRUE(retry.ok());
  EXPECT_FALSE(retry->duplicate);
}

// ---------------------------------------------------------------- fences

TEST(ParameterStoreTest, AnUnfencedStoreAcceptsAnyFence) {
  ParameterStore store = make_store();
  EXPECT_TRUE(store.push(push_of({counter_add(kIterations, 1)}, Fence{5, 3})).ok());
  EXPECT_TRUE(store.push(push_of({counter_add(kIterations, 1)})).ok());
}

TEST(ParameterStoreTest, APushWithAnOlderFenceIsRefusedAndNothingApplied) {
  ParameterStore store = make_store();
  ASSERT_TRUE(store.set_fence(Fence{5, 2}).ok());
  const Matrix before = pull_all(store, kDense);

  auto stale = store.push(push_of({counter_add(kIterations, 1), dense_grad(kDense, mat({{1, 1}}))}, Fence{5, 1}), 11);
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.status().code(), StatusCode::kAborted);
  EXPECT_EQ(error_kind(stale.status()), ErrorKind::kFenced);
  EXPECT_TRUE(contains(stale.status(), "generation 1")) << stale.status();
  EXPECT_EQ(pull_counter(store, kIterations), 0);
  EXPECT_EQ(pull_all(store, kDense), before);
  EXPECT_EQ(store.stats().fenced_pushes, 1u);

  // Another coordinator incarnation is refused too.
  EXPECT_EQ(error_kind(store.push(push_of({counter_add(kIterations, 1)}, Fence{6, 9})).status()), ErrorKind::kFenced);
  // The current generation and later ones are accepted.
  EXPECT_TRUE(store.push(push_of({counter_add(kIterations, 1)}, Fence{5, 2})).ok());
  EXPECT_TRUE(store.push(push_of({counter_add(kIterations, 1)}, Fence{5, 3})).ok());
  EXPECT_EQ(pull_counter(store, kIterations), 2);
}

TEST(ParameterStoreTest, TheFenceMovesOnlyForwardUntilANewCoordinatorReplacesIt) {
  ParameterStore store = make_store();
  ASSERT_TRUE(store.set_fence(Fence{5, 4}).ok());
  ASSERT_TRUE(store.set_fence(Fence{5, 2}).ok());
  EXPECT_EQ(store.fence(), (Fence{5, 4}));
  ASSERT_TRUE(store.set_fence(Fence{8, 0}).ok());  // a restarted coordinator
  EXPECT_EQ(store.fence(), (Fence{8, 0}));
  EXPECT_EQ(error_kind(store.push(push_of({counter_add(kIterations, 1)}, Fence{5, 4})).status()), ErrorKind::kFenced);
  EXPECT_TRUE(store.push(push_of({counter_add(kIterations, 1)}, Fence{8, 0})).ok());
  EXPECT_EQ(store.set_fence(Fence{0, 1}).code(), StatusCode::kInvalidArgument);
}

TEST(ParameterStoreTest, CreateShardsFromANewCoordinatorAdoptsItsFence) {
  ParameterStore store = make_store();
  ASSERT_TRUE(store.set_fence(Fence{5, 4}).ok());
  CreateShardsRequest req;
  req.fence = Fence{9, 0};
  req.optimizer = sgd(0.5);
  req.replace_existing = true;
  req.shards = {counter_shard(kIterations, "iterations", 100)};
  ASSERT_TRUE(store.create_shards(req).ok());
  EXPECT_EQ(store.fence(), (Fence{9, 0}));
  EXPECT_EQ(pull_counter(store, kIterations), 100);
  req.fence = Fence{9, 0};
  ASSERT_TRUE(store.set_fence(Fence{9, 3}).ok());
  EXPECT_EQ(error_kind(store.create_shards(req)), ErrorKind::kFenced);
}

// ---------------------------------------------------------------- malformed requests

struct BadPush {
  const char* what;
  Update update;
  std::vector<std::string> expected_text;  // in the message, besides the store name
};

TEST(ParameterStoreTest, ANonFiniteValueAnywhereInALargeGradientIsRefused) {
  // Long and of odd length: the check's vectorised body and its scalar tail.
  constexpr Eigen::Index kCols = 1001;
  ParameterStore store;
  CreateShardsRequest req;
  req.optimizer = sgd(0.5);
  req.shards = {shard(kDense, "wide", VariableKind::kTrainable, Matrix::Zero(1, kCols))};
  ASSERT_TRUE(store.create_shards(req).ok());
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity()}) {
    for (const Eigen::Index at : {Eigen::Index{0}, Eigen::Index{500}, kCols - 1}) {
      Matrix g = Matrix::Constant(1, kCols, 1.0f);
      g(0, at) = bad;
      auto r = store.push(push_of({dense_grad(kDense, g)}));
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad << " at " << at;
    }
  }
  Matrix huge = Matrix::Constant(1, kCols, std::numeric_limits<float>::max());  // finite, though x*x would not be
  ASSERT_TRUE(store.push(push_of({dense_grad(kDense, huge)})).ok());
  EXPECT_EQ(store.stats().rejected_requests, 9u);
}

TEST(ParameterStoreTest, EveryMalformedPushIsInvalidArgumentAndTheStoreKeepsServing) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  Update assign_counter = counter_add(kIterations, 1);
  assign_counter.op = Update::Op::kAssign;
  Update grad_to_metric = dense_grad(kMetric, mat({{1}}));
  Update counter_with_values = counter_add(kIterations, 1);
  counter_with_values.values = mat({{1}});
  Update dense_with_rows = dense_grad(kDense, mat({{1, 1}}));
  dense_with_rows.rows = {0};

  const std::vector<BadPush> cases = {
      {"unknown shard", dense_grad(42, mat({{1}})), {"unknown shard id 42"}},
      {"wrong dense shape", dense_grad(kDense, mat({{1, 2}, {3, 4}})), {"'dense' (id 2)", "2x2", "1x2"}},
      {"wrong column count", sparse_grad(kEmb, {0}, mat({{1, 2, 3}})), {"'emb/part_1' (id 1)", "3 columns"}},
      {"ids and rows disagree", sparse_grad(kEmb, {0, 1}, mat({{1, 2}})), {"'emb/part_1' (id 1)", "2 row ids"}},
      {"negative row id", sparse_grad(kEmb, {0, -1}, mat({{1, 1}, {1, 1}})), {"'emb/part_1' (id 1)", "row id -1", "negative"}},
      {"out-of-range row id", sparse_grad(kEmb, {3}, mat({{1, 1}})), {"'emb/part_1' (id 1)", "row id 3", "out of range [0, 3)"}},
      {"NaN gradient", dense_grad(kDense, mat({{1, nan}})), {"'dense' (id 2)", "NaN or Inf"}},
      {"Inf sparse gradient", sparse_grad(kEmb, {1}, mat({{inf, 0}})), {"'emb/part_1' (id 1)", "NaN or Inf"}},
      {"gradient to an accumulator", grad_to_metric, {"'loss_sum' (id 3)", "apply-gradient", "accumulator"}},
      {"assign to a counter", assign_counter, {"'iterations' (id 4)", "assign", "counter"}},
      {"counter with values", counter_with_values, {"'iterations' (id 4)", "counter_delta"}},
      {"dense update with row ids", dense_with_rows, {"'dense' (id 2)", "row ids"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    ParameterStore store = make_store();
    // A valid update first: all-or-nothing means it must not be applied either.
    auto r = store.push(push_of({counter_add(kIterations, 1), c.update}), 3, TaskId::worker(0));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(contains(r.status(), "ps:0")) << r.status();
    EXPECT_TRUE(contains(r.status(), "update 1")) << r.status();
    for (const auto& t : c.expected_text) EXPECT_TRUE(contains(r.status(), t)) << "missing '" << t << "' in " << r.status();
    EXPECT_EQ(pull_counter(store, kIterations), 0);
    EXPECT_EQ(pull_all(store, kEmb), mat({{1, 1}, {2, 2}, {3, 3}}));
    EXPECT_EQ(pull_all(store, kDense), mat({{10, 20}}));
    EXPECT_EQ(store.stats().rejected_requests, 1u);
    // Still serving, and the same request id is free for a corrected retry.
    auto ok = store.push(push_of({counter_add(kIterations, 1), dense_grad(kDense, mat({{2, 2}}))}), 3, TaskId::worker(0));
    ASSERT_TRUE(ok.ok()) << ok.status();
    EXPECT_FALSE(ok->duplicate);
    EXPECT_EQ(pull_all(store, kDense), mat({{9, 19}}));
  }
}

TEST(ParameterStoreTest, EveryMalformedPullIsInvalidArgumentAndTheStoreKeepsServing) {
  ParameterStore store = make_store();
  const std::vector<std::pair<PullItem, std::string>> cases = {
      {all_rows(42), "unknown shard id 42"},
      {some_rows(kEmb, {-2}), "row id -2 (index 0) is negative"},
      {some_rows(kEmb, {0, 3}), "row id 3 (index 1) is out of range [0, 3)"},
      {some_rows(kIterations, {0}), "counter"},
  };
  for (const auto& [item, text] : cases) {
    auto r = store.pull(PullRequest{{all_rows(kDense), item}});
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(contains(r.status(), text)) << r.status();
    EXPECT_TRUE(contains(r.status(), "Pull item 1")) << r.status();
  }
  EXPECT_EQ(pull_all(store, kDense), mat({{10, 20}}));
  EXPECT_EQ(store.stats().pull_requests, 1u);
}

TEST(ParameterStoreTest, ExportOfAnUnknownShardIsInvalidArgument) {
  ParameterStore store = make_store();
  auto r = store.export_shards(ExportShardsRequest{{kDense, 42}});
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(r.status(), "42"));
  auto all = store.export_shards({});
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->shards.size(), 4u);
  EXPECT_EQ(all->shards[0].spec.name, "emb/part_1");
  EXPECT_EQ(all->shards[3].spec.kind, VariableKind::kCounter);
}

}  // namespace
}  // namespace twinps

namespace twinps {
namespace {

// Timing-only simulation: meta shards, with a shape and no values, read and
// written with meta tensors.
Update meta_grad(ShardId id, RowIds rows, std::int64_t cols) {
  Update u;
  u.shard = id;
  u.sparse = true;
  u.meta = MetaTensor{static_cast<std::int64_t>(rows.size()), cols};
  u.rows = std::move(rows);
  return u;
}

TEST(ParameterStoreMetaTest, CountsSizesAndStepsWithoutValues) {
  ParameterStore store(ParameterStore::Options{"ps:3", 16});
  CreateShardsRequest req;
  req.optimizer = sgd(0.1);
  ShardState emb;
  emb.spec = ShardSpec{1, "emb/part_0", VariableKind::kTrainable, 1000, 16, /*meta=*/true};
  req.shards = {emb, counter_shard(2, "iterations")};
  ASSERT_TRUE(store.create_shards(req).ok());

  auto pulled = store.pull(PullRequest{{all_rows(1), some_rows(1, {0, 5, 5, 9, 1, 2, 3, 4, 6, 7})}});
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  EXPECT_EQ(pulled->items[0].meta, (MetaTensor{1000, 16}));
  EXPECT_EQ(pulled->items[1].meta, (MetaTensor{10, 16})) << "a row per id, repeats too";
  EXPECT_EQ(pulled->items[0].values.size(), 0);
  EXPECT_GT(wire_size(Response(*pulled)), static_cast<std::size_t>(1010 * 16 * 4));
  EXPECT_EQ(store.stats().bytes_pulled, static_cast<std::uint64_t>(1010 * 16 * 4));

  Update sparse = meta_grad(1, {0, 1, 2, 3, 4, 5, 6, 7, 8, 8}, 16);  // 9 distinct rows
  Update dense;
  dense.shard = 1;
  dense.meta = MetaTensor{1000, 16};
  ASSERT_TRUE(store.push(PushRequest{{}, {sparse, dense}, {}}, 7, TaskId::worker(0)).ok());
  EXPECT_EQ(store.stats().rows_updated, 1009u);
  EXPECT_EQ(store.stats().optimizer_steps, 2u);
  // As if the values had come: 10 ids (8 bytes) and 10 x 16 floats, then 1000 x 16 floats.
  EXPECT_EQ(store.stats().bytes_pushed, static_cast<std::uint64_t>(10 * 72 + 64000));
  EXPECT_TRUE(store.push(PushRequest{{}, {sparse}, {}}, 7, TaskId::worker(0))->duplicate);
  auto exported = store.export_shards(ExportShardsRequest{{1}});
  ASSERT_TRUE(exported.ok());
  EXPECT_EQ(exported->shards[0].step, 2);
  EXPECT_TRUE(exported->shards[0].spec.meta);
  EXPECT_EQ(exported->shards[0].value.size(), 0);
}

// Sync mode on meta shards: the same aggregation (one update per step, of
// the union of the rows the contributions touched), with nothing to average.
TEST(ParameterStoreMetaTest, SyncStepsAggregateMetaGradientsIntoOneUpdate) {
  ParameterStore store;
  CreateShardsRequest req;
  req.optimizer = sgd(0.1);
  ShardState emb;
  emb.spec = ShardSpec{1, "emb/part_0", VariableKind::kTrainable, 100, 4, /*meta=*/true};
  req.shards = {emb};
  ASSERT_TRUE(store.create_shards(req).ok());
  for (RowIds rows : {RowIds{1, 2, 3}, RowIds{3, 4}}) {
    PushRequest push{{}, {meta_grad(1, rows, 4)}, {}};
    push.sync_step = 0;
    ASSERT_TRUE(store.push(push).ok());
  }
  EXPECT_EQ(store.stats().optimizer_steps, 0u) << "aggregated, not applied yet";
  ASSERT_TRUE(store.apply_sync_step(ApplySyncStepRequest{{}, 0}).ok());
  EXPECT_EQ(store.stats().optimizer_steps, 1u);
  EXPECT_EQ(store.stats().rows_updated, 4u) << "rows 1, 2, 3, 4";
  EXPECT_EQ(store.stats().bytes_pushed, static_cast<std::uint64_t>(4 * (8 + 4 * 4)));
  PushRequest late{{}, {meta_grad(1, {5}, 4)}, {}};
  late.sync_step = 0;
  auto dropped = store.push(late);
  ASSERT_TRUE(dropped.ok());
  EXPECT_EQ(dropped->staleness.dropped, 1u);
}

TEST(ParameterStoreMetaTest, RefusesValuesForMetaShardsAndMetaTensorsForRealOnes) {
  ParameterStore store = make_store();
  CreateShardsRequest req;
  req.optimizer = sgd(0.5);
  ShardState bad;
  bad.spec = ShardSpec{9, "x", VariableKind::kTrainable, 1, 2, /*meta=*/true};
  bad.value = mat({{1, 2}});
  req.shards = {bad};
  EXPECT_EQ(store.create_shards(req).code(), StatusCode::kInvalidArgument);
  ShardState ok = bad;
  ok.value = Matrix();
  req.shards = {ok};
  ASSERT_TRUE(store.create_shards(req).ok());

  Update with_values = dense_grad(9, mat({{1, 2}}));
  EXPECT_EQ(store.push(PushRequest{{}, {with_values}, {}}).status().code(), StatusCode::kInvalidArgument);
  Update no_payload;
  no_payload.shard = 9;
  EXPECT_EQ(store.push(PushRequest{{}, {no_payload}, {}}).status().code(), StatusCode::kInvalidArgument);
  // A meta tensor is checked against the shard as values are.
  auto refusal = [&](Update u) { return std::string(store.push(PushRequest{{}, {u}, {}}).status().message()); };
  EXPECT_THAT(refusal(meta_grad(9, {0, 1}, 2)), HasSubstr("row id 1 (index 1) is out of range [0, 1)"));
  Update short_rows = meta_grad(9, {0}, 2);
  short_rows.meta->rows = 2;
  EXPECT_THAT(refusal(short_rows), HasSubstr("gradient has 2 rows for 1 row ids"));
  EXPECT_THAT(refusal(meta_grad(9, {0}, 3)), HasSubstr("gradient has 3 columns, the shard 2"));
  Update dense_wrong;
  dense_wrong.shard = 9;
  dense_wrong.meta = MetaTensor{2, 2};
  EXPECT_THAT(refusal(dense_wrong), HasSubstr("gradient is 2x2, the shard 1x2"));
  Update meta_for_real = dense_grad(kDense, Matrix());
  meta_for_real.meta = MetaTensor{1, 2};
  EXPECT_THAT(refusal(meta_for_real), HasSubstr("a meta tensor is only for meta shards"));
  EXPECT_EQ(store.stats().optimizer_steps, 0u);
  EXPECT_EQ(pull_all(store, kDense), mat({{10, 20}})) << "refused requests change nothing";
}

}  // namespace
}  // namespace twinps
