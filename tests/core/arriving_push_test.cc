// A push whose dense gradient is applied while it arrives
// (ParameterStore::begin_arriving_push): the shard ends bit for bit as an
// ordinary push leaves it, whatever the optimizer and however the bytes come
// in; a shard moved meanwhile, a NaN, a duplicate or bytes out of order fall
// back to the ordinary apply with the same result.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "core/ps/parameter_store.h"

namespace twinps {
namespace {

constexpr ShardId kBig = 1;
constexpr std::int64_t kRows = 4;
constexpr std::int64_t kCols = ParameterStore::kArrivingMinFloats / kRows + 3;  // not a multiple of a block

// Values that vary element by element, so a misplaced span shows.
Matrix ramp(double scale, double offset) {
  Matrix m(kRows, kCols);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = static_cast<float>(offset + scale * std::sin(0.01 * i));
  return m;
}

ParameterStore make_store(const OptimizerConfig& optimizer) {
  ParameterStore store;
  CreateShardsRequest req;
  req.optimizer = optimizer;
  ShardState s;
  s.spec = ShardSpec{kBig, "big", VariableKind::kTrainable, kRows, kCols};
  s.value = ramp(1.0, 0.5);
  req.shards = {s};
  EXPECT_TRUE(store.create_shards(req).ok());
  return store;
}

PushRequest gradient_push(const Matrix& g) {
  Update u;
  u.shard = kBig;
  u.values = g;
  PushRequest r;
  r.updates = {u};
  return r;
}

ShardState exported(const ParameterStore& store) {
  auto e = store.export_shards({});
  EXPECT_TRUE(e.ok());
  return e->shards.at(0);
}

// The request's gradient "arrives": its bytes are written into the tensor
// (zeros before) in pieces of `piece` bytes, each shown to the observer.
void arrive(PushRequest& request, const Matrix& g, ArrivalObserver* observer, std::size_t piece) {
  char* dst = reinterpret_cast<char*>(request.updates[0].values.data());
  const char* src = reinterpret_cast<const char*>(g.data());
  const std::size_t total = static_cast<std::size_t>(g.size()) * sizeof(float);
  for (std::size_t at = 0; at < total; at += piece) {
    const std::size_t n = std::min(piece, total - at);
    std::memcpy(dst + at, src + at, n);
    if (observer) observer->arrived(dst + at, n);
  }
}

// Three pushes through an arriving computation and three plain ones: equal bits.
void expect_same_as_plain_pushes(const OptimizerConfig& optimizer) {
  ParameterStore plain = make_store(optimizer);
  ParameterStore arriving = make_store(optimizer);
  for (int step = 0; step < 3; ++step) {
    const Matrix g = ramp(0.1 * (step + 1), 0.02 * step);
    ASSERT_TRUE(plain.push(gradient_push(g)).ok());
    PushRequest request = gradient_push(Matrix::Zero(kRows, kCols));
    auto observer = arriving.begin_arriving_push(request, 0, {});
    ASSERT_NE(observer, nullptr);
    arrive(request, g, observer.get(), 65'537 + 4'096 * static_cast<std::size_t>(step));  // odd, mid-float
    EXPECT_EQ(observer->computed(), 1u);
    ASSERT_TRUE(arriving.push(request, 0, {}, observer.get()).ok());
  }
  const ShardState a = exported(plain), b = exported(arriving);
  EXPECT_EQ(a.step, b.step);
  ASSERT_EQ(a.value.size(), b.value.size());
  EXPECT_EQ(std::memcmp(a.value.data(), b.value.data(), sizeof(float) * static_cast<std::size_t>(a.value.size())), 0);
  ASSERT_EQ(a.slots.size(), b.slots.size());
  for (std::size_t i = 0; i < a.slots.size(); ++i)
    EXPECT_EQ(std::memcmp(a.slots[i].data(), b.slots[i].data(), sizeof(float) * static_cast<std::size_t>(a.slots[i].size())), 0)
        << "slot " << i;
  EXPECT_EQ(arriving.stats().updates_computed_on_arrival, 3u);
  EXPECT_EQ(plain.stats().updates_computed_on_arrival, 0u);
}

OptimizerConfig config(OptimizerConfig::Kind kind, double lr) {
  OptimizerConfig c;
  c.kind = kind;
  c.learning_rate = LearningRateSchedule::constant(lr);
  return c;
}

TEST(ArrivingPushTest, EveryOptimizerEndsBitForBitAsAPlainPush) {
  expect_same_as_plain_pushes(config(OptimizerConfig::Kind::kSgd, 0.1));
  auto momentum = config(OptimizerConfig::Kind::kSgd, 0.1);
  momentum.momentum = 0.9;
  expect_same_as_plain_pushes(momentum);
  momentum.nesterov = true;
  expect_same_as_plain_pushes(momentum);
  expect_same_as_plain_pushes(config(OptimizerConfig::Kind::kAdagrad, 0.1));
  auto rms = config(OptimizerConfig::Kind::kRmsprop, 0.01);
  expect_same_as_plain_pushes(rms);
  rms.centered = true;
  expect_same_as_plain_pushes(rms);
  rms.momentum = 0.5;
  expect_same_as_plain_pushes(rms);
  expect_same_as_plain_pushes(config(OptimizerConfig::Kind::kAdam, 0.01));
}

TEST(ArrivingPushTest, AShardMovedWhileThePushArrivedIsUpdatedInOrder) {
  const auto sgd = config(OptimizerConfig::Kind::kSgd, 0.1);
  ParameterStore plain = make_store(sgd);
  ParameterStore arriving = make_store(sgd);
  const Matrix first = ramp(0.3, 0.0), second = ramp(0.2, 0.1);
  ASSERT_TRUE(plain.push(gradient_push(first)).ok());
  ASSERT_TRUE(plain.push(gradient_push(second)).ok());

  PushRequest request = gradient_push(Matrix::Zero(kRows, kCols));
  auto observer = arriving.begin_arriving_push(request, 0, {});
  ASSERT_NE(observer, nullptr);
  const std::size_t half = static_cast<std::size_t>(second.size()) * sizeof(float) / 2;
  char* dst = reinterpret_cast<char*>(request.updates[0].values.data());
  std::memcpy(dst, second.data(), half);
  observer->arrived(dst, half);
  // Another worker's push gets in first, then the rest arrives.
  ASSERT_TRUE(arriving.push(gradient_push(first)).ok());
  std::memcpy(dst + half, reinterpret_cast<const char*>(second.data()) + half, half);
  observer->arrived(dst + half, half);
  EXPECT_EQ(observer->computed(), 0u);
  ASSERT_TRUE(arriving.push(request, 0, {}, observer.get()).ok());

  EXPECT_EQ(exported(arriving).value, exported(plain).value);
  EXPECT_EQ(exported(arriving).step, 2);
  EXPECT_EQ(arriving.stats().arrivals_overtaken, 1u);
  EXPECT_EQ(arriving.stats().updates_computed_on_arrival, 0u);
  // Overtaken once: the shard's next push is applied as usual.
  PushRequest next = gradient_push(first);
  EXPECT_EQ(arriving.begin_arriving_push(next, 0, {}), nullptr);
  EXPECT_NE(arriving.begin_arriving_push(next, 0, {}), nullptr);
}

TEST(ArrivingPushTest, ANonFiniteGradientIsRefusedWholeAndTheShardKept) {
  ParameterStore store = make_store(config(OptimizerConfig::Kind::kSgd, 0.1));
  const ShardState before = exported(store);
  Matrix g = ramp(0.1, 0.0);
  g(kRows - 1, kCols - 1) = std::numeric_limits<float>::quiet_NaN();
  PushRequest request = gradient_push(Matrix::Zero(kRows, kCols));
  auto observer = store.begin_arriving_push(request, 0, {});
  ASSERT_NE(observer, nullptr);
  arrive(request, g, observer.get(), 100'000);
  EXPECT_EQ(observer->computed(), 0u);
  auto r = store.push(request, 0, {}, observer.get());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(r.status().message()).find("contains NaN or Inf"), std::string::npos) << r.status();
  EXPECT_EQ(exported(store).value, before.value);
  EXPECT_EQ(exported(store).step, 0);
}

TEST(ArrivingPushTest, BytesOutOfOrderAreAppliedAsAPlainPush) {
  const auto sgd = config(OptimizerConfig::Kind::kSgd, 0.1);
  ParameterStore plain = make_store(sgd);
  ParameterStore store = make_store(sgd);
  const Matrix g = ramp(0.1, 0.0);
  ASSERT_TRUE(plain.push(gradient_push(g)).ok());
  PushRequest request = gradient_push(g);  // every byte already there
  auto observer = store.begin_arriving_push(request, 0, {});
  ASSERT_NE(observer, nullptr);
  const char* data = reinterpret_cast<const char*>(request.updates[0].values.data());
  observer->arrived(data + 4096, 4096);  // not the front
  observer->arrived(data, static_cast<std::size_t>(g.size()) * sizeof(float));
  EXPECT_EQ(observer->computed(), 0u);
  ASSERT_TRUE(store.push(request, 0, {}, observer.get()).ok());
  EXPECT_EQ(exported(store).value, exported(plain).value);
  EXPECT_EQ(store.stats().updates_computed_on_arrival, 0u);
}

TEST(ArrivingPushTest, OnlyLargeDenseGradientsOfNewPushesAreComputedOnArrival) {
  ParameterStore store = make_store(config(OptimizerConfig::Kind::kSgd, 0.1));
  const TaskId worker{Job::kWorker, 0};
  PushRequest request = gradient_push(ramp(0.1, 0.0));
  ASSERT_TRUE(store.push(request, 7, worker).ok());
  EXPECT_EQ(store.begin_arriving_push(request, 7, worker), nullptr) << "a known duplicate";
  EXPECT_NE(store.begin_arriving_push(request, 8, worker), nullptr);

  PushRequest synced = request;
  synced.sync_step = 0;
  EXPECT_EQ(store.begin_arriving_push(synced, 9, worker), nullptr) << "a sync step's gradient is aggregated";

  PushRequest small = gradient_push(ramp(0.1, 0.0).leftCols(1));
  EXPECT_EQ(store.begin_arriving_push(small, 10, worker), nullptr) << "too small (and the wrong shape)";
}

TEST(ArrivingPushTest, EachLargeGradientOfAPushIsComputedOnArrival) {
  ParameterStore plain, store;
  CreateShardsRequest create;
  create.optimizer = config(OptimizerConfig::Kind::kSgd, 0.1);
  for (ShardId id : {1, 2, 3}) {
    ShardState s;
    s.spec = ShardSpec{id, "v" + std::to_string(id), VariableKind::kTrainable, kRows, id == 2 ? 1 : kCols};
    s.value = id == 2 ? Matrix::Ones(kRows, 1) : ramp(1.0, 0.5 * id);
    create.shards.push_back(s);
  }
  ASSERT_TRUE(plain.create_shards(create).ok());
  ASSERT_TRUE(store.create_shards(create).ok());
  PushRequest request;
  for (ShardId id : {1, 2, 3}) {
    Update u;
    u.shard = id;
    u.values = id == 2 ? Matrix::Ones(kRows, 1) : ramp(0.1 * id, 0.0);
    request.updates.push_back(u);
  }
  ASSERT_TRUE(plain.push(request).ok());
  const PushRequest sent = request;
  for (Update& u : request.updates) u.values.setZero();
  auto observer = store.begin_arriving_push(request, 0, {});
  ASSERT_NE(observer, nullptr);
  for (std::size_t i : {0u, 2u}) {
    char* dst = reinterpret_cast<char*>(request.updates[i].values.data());
    const std::size_t bytes = static_cast<std::size_t>(sent.updates[i].values.size()) * sizeof(float);
    std::memcpy(dst, sent.updates[i].values.data(), bytes);
    observer->arrived(dst, bytes);
  }
  request.updates[1].values = sent.updates[1].values;  // small: it came with the request
  EXPECT_EQ(observer->computed(), 2u);
  ASSERT_TRUE(store.push(request, 0, {}, observer.get()).ok());
  EXPECT_EQ(store.stats().updates_computed_on_arrival, 2u);
  for (ShardId id : {1, 2, 3}) {
    auto a = plain.pull(PullRequest{{PullItem{id, true, {}}}});
    auto b = store.pull(PullRequest{{PullItem{id, true, {}}}});
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->items[0].values, b->items[0].values) << "shard " << id;
  }
}

TEST(ArrivingPushTest, OneArrivingPushAtATimePerShard) {
  ParameterStore store = make_store(config(OptimizerConfig::Kind::kSgd, 0.1));
  PushRequest a = gradient_push(ramp(0.1, 0.0)), b = gradient_push(ramp(0.2, 0.0));
  auto first = store.begin_arriving_push(a, 0, {});
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(store.begin_arriving_push(b, 0, {}), nullptr);
  first.reset();  // given up (the connection closed): the shard is free again
  EXPECT_NE(store.begin_arriving_push(b, 0, {}), nullptr);
}

TEST(ArrivingPushTest, AnotherStoresComputationIsNeverTaken) {
  const auto sgd = config(OptimizerConfig::Kind::kSgd, 0.1);
  ParameterStore first = make_store(sgd), second = make_store(sgd), plain = make_store(sgd);
  // The same number of updates (so the same revisions), different values.
  ASSERT_TRUE(first.push(gradient_push(ramp(0.5, 0.0))).ok());
  ASSERT_TRUE(second.push(gradient_push(ramp(0.3, 0.0))).ok());
  ASSERT_TRUE(plain.push(gradient_push(ramp(0.3, 0.0))).ok());
  const Matrix g = ramp(0.1, 0.0);
  ASSERT_TRUE(plain.push(gradient_push(g)).ok());
  PushRequest request = gradient_push(Matrix::Zero(kRows, kCols));
  auto observer = first.begin_arriving_push(request, 0, {});
  ASSERT_NE(observer, nullptr);
  arrive(request, g, observer.get(), 1 << 16);
  EXPECT_EQ(observer->computed(), 1u);
  // A store that took over the service (a restarted node) handles the request.
  ASSERT_TRUE(second.push(request, 0, {}, observer.get()).ok());
  EXPECT_EQ(second.stats().updates_computed_on_arrival, 0u);
  EXPECT_EQ(exported(second).value, exported(plain).value);
}

TEST(ArrivingPushTest, AnObserverOutlivingItsStoreDoesNothing) {
  std::shared_ptr<ParameterStore::ArrivingPush> observer;
  PushRequest request = gradient_push(ramp(0.1, 0.0));
  {
    ParameterStore store = make_store(config(OptimizerConfig::Kind::kSgd, 0.1));
    observer = store.begin_arriving_push(request, 0, {});
    ASSERT_NE(observer, nullptr);
  }
  observer->arrived(reinterpret_cast<const char*>(request.updates[0].values.data()), 4096);
  EXPECT_EQ(observer->computed(), 0u);
  observer.reset();
}

}  // namespace
}  // namespace twinps
