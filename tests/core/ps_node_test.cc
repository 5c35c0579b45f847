// A parameter-server node answering over inmemory/'s in-memory network.
#include "core/ps/ps_node.h"

#include <gtest/gtest.h>

#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "inmemory/in_memory_network.h"
#include "inmemory/deterministic_engine.h"

namespace twinps {
namespace {

// Records spans so the test can check what the node traced.
class RecordingSink final : public TraceSink {
 public:
  struct Record {
    std::string category, name, status;
  };
  void record(TracePhase, const TaskId&, std::string_view category, std::string_view name, Time, Duration,
              std::initializer_list<TraceArg> args) override {
    Record r{std::string(category), std::string(name), {}};
    for (const auto& a : args)
      if (a.key == "status") r.status = std::string(a.text);
    records.push_back(std::move(r));
  }
  std::vector<Record> records;
};

struct Cluster {
  DeterministicEngine engine;
  InMemoryNetwork net{engine};
  NodeExecutor chief_ex{engine, engine.add_node()};
  NodeExecutor ps_ex{engine, engine.add_node()};
  std::unique_ptr<Transport> chief = net.attach(TaskId::chief(), chief_ex);
  std::unique_ptr<Transport> ps_transport = net.attach(TaskId::ps(0), ps_ex);
  RecordingSink trace;
  Runtime ps_runtime{TaskId::ps(0), 42, ps_ex, *ps_transport, trace, RandomStream(1)};
  std::unique_ptr<ParameterServerNode> ps = std::make_unique<ParameterServerNode>(ps_runtime);

  StatusOr<Response> call(Request request, RequestId id = 0) {
    std::optional<StatusOr<Response>> result;
    CallOptions options;
    options.request_id = id;
    chief->call(TaskId::ps(0), std::move(request), options, [&](StatusOr<Response> r) { result = std::move(r); });
    engine.run();
    EXPECT_TRUE(result.has_value()) << "the call never completed";
    return result ? std::move(*result) : StatusOr<Response>(absl::InternalError("no reply"));
  }
};

CreateShardsRequest create_request() {
  CreateShardsRequest req;
  req.optimizer.learning_rate = LearningRateSchedule::constant(0.5);
  ShardState w;
  w.spec = ShardSpec{1, "w", VariableKind::kTrainable, 2, 2};
  w.value = Matrix::Ones(2, 2);
  ShardState it;
  it.spec = ShardSpec{2, "iterations", VariableKind::kCounter, 1, 1};
  req.shards = {w, it};
  return req;
}

PushRequest push_request(Matrix grad) {
  Update g;
  g.shard = 1;
  g.values = std::move(grad);
  Update n;
  n.shard = 2;
  n.op = Update::Op::kAdd;
  n.counter_delta = 1;
  PushRequest p;
  p.updates = {g, n};
  return p;
}

PullRequest pull_request() {
  PullRequest p;
  p.items = {PullItem{1, true, {}}, PullItem{2, true, {}}};
  return p;
}

TEST(ParameterServerNodeTest, AnswersHealthWithTaskAndIncarnation) {
  Cluster c;
  auto r = response_as<HealthResponse>(c.call(HealthRequest{}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->task, TaskId::ps(0));
  EXPECT_EQ(r->incarnation, 42u);
}

TEST(ParameterServerNodeTest, CreatesPushesPullsAndDropsADuplicatePush) {
  Cluster c;
  ASSERT_TRUE(c.call(create_request()).ok());
  auto first = response_as<PushResponse>(c.call(push_request(Matrix::Constant(2, 2, 2.0f)), /*id=*/9));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->duplicate);
  // The same request id again, as a retry after a lost reply would send it.
  auto retry = response_as<PushResponse>(c.call(push_request(Matrix::Constant(2, 2, 2.0f)), 9));
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_TRUE(retry->duplicate);

  auto pulled = response_as<PullResponse>(c.call(pull_request()));
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  EXPECT_EQ(pulled->items[0].values, Matrix::Zero(2, 2));  // 1 - 0.5 * 2, once
  EXPECT_EQ(pulled->items[1].counter, 1);

  auto exported = response_as<ExportShardsResponse>(c.call(ExportShardsRequest{}));
  ASSERT_TRUE(exported.ok());
  EXPECT_EQ(exported->shards.size(), 2u);
  EXPECT_EQ(c.ps->store().stats().duplicates_dropped, 1u);
}

TEST(ParameterServerNodeTest, BadRequestsAreAnsweredWithTheirErrorAndTheNodeKeepsServing) {
  Cluster c;
  ASSERT_TRUE(c.call(create_request()).ok());

  Matrix bad = Matrix::Ones(2, 2);
  bad(1, 1) = std::numeric_limits<float>::quiet_NaN();
  auto nan = c.call(push_request(bad));
  EXPECT_EQ(nan.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(nan.status().message()).find("ps:0"), std::string::npos) << nan.status();
  EXPECT_FALSE(failed_task(nan.status()).has_value()) << "a refused request is not a ps failure";

  auto other = c.call(RunClosureRequest{});
  EXPECT_EQ(other.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(other.status().message()), "ps:0 does not serve RunClosure");

  auto pulled = response_as<PullResponse>(c.call(pull_request()));
  ASSERT_TRUE(pulled.ok());
  EXPECT_EQ(pulled->items[0].values, Matrix::Ones(2, 2));
  EXPECT_EQ(pulled->items[1].counter, 0);
}

TEST(ParameterServerNodeTest, AFencedPushComesBackAbortedWithItsKind) {
  Cluster c;
  ASSERT_TRUE(c.call(create_request()).ok());
  ASSERT_TRUE(c.call(FenceRequest{Fence{7, 3}}).ok());
  PushRequest stale = push_request(Matrix::Ones(2, 2));
  stale.fence = Fence{7, 2};
  auto r = c.call(stale);
  EXPECT_EQ(r.status().code(), StatusCode::kAborted);
  EXPECT_EQ(error_kind(r.status()), ErrorKind::kFenced);
  EXPECT_EQ(c.ps->store().stats().fenced_pushes, 1u);
  EXPECT_EQ(c.ps->store().stats().updates_applied, 0u);
}

TEST(ParameterServerNodeTest, TracesASpanPerRequest) {
  Cluster c;
  ASSERT_TRUE(c.call(HealthRequest{}).ok());
  ASSERT_FALSE(c.call(PullRequest{{PullItem{99, true, {}}}}).ok());
  ASSERT_EQ(c.trace.records.size(), 2u);
  EXPECT_EQ(c.trace.records[0].category, "ps");
  EXPECT_EQ(c.trace.records[0].name, "Health");
  EXPECT_EQ(c.trace.records[0].status, "OK");
  EXPECT_EQ(c.trace.records[1].name, "Pull");
  EXPECT_EQ(c.trace.records[1].status, "INVALID_ARGUMENT");
}

TEST(ParameterServerNodeTest, StopsServingWhenDestroyed) {
  Cluster c;
  c.ps.reset();
  auto r = c.call(HealthRequest{});
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace twinps
