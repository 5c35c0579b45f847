// FaultyTransport around the in-memory network: each fault as the caller
// sees it, the transport contract kept, replays from one seed, and a
// parameter server that applies every push exactly once however often the
// plan duplicates, reorders or loses them.
#include "core/faults/faulty_transport.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <variant>
#include <vector>

#include "inmemory/in_memory_network.h"
#include "inmemory/deterministic_engine.h"
#include "core/ps/ps_node.h"

namespace twinps {
namespace {

struct Pair {
  explicit Pair(CallFaultPlan plan, std::uint64_t seed = 1)
      : faulty(*inner, a_ex, std::move(plan), RandomStream(seed).fork("faults")) {}
  DeterministicEngine engine;
  InMemoryNetwork net{engine};
  NodeExecutor a_ex{engine, engine.add_node()};
  NodeExecutor b_ex{engine, engine.add_node()};
  std::unique_ptr<Transport> inner = net.attach(TaskId::chief(), a_ex);
  std::unique_ptr<Transport> b = net.attach(TaskId::ps(0), b_ex);
  FaultyTransport faulty;
};

// Serves health checks, counting the calls that reached the callee.
void count_calls(Pair& p, int* reached) {
  p.b->serve([reached](IncomingCall, Responder respond) {
    ++*reached;
    respond(Response(HealthResponse{TaskId::ps(0), 1}));
  });
}

struct Outcome {
  int completions = 0;
  Status status = absl::UnknownError("not finished");
  Time at = 0;
};

void call(Pair& p, Outcome& out, CallOptions opts = {}) {
  p.faulty.call(TaskId::ps(0), HealthRequest{}, std::move(opts), [&out, &p](StatusOr<Response> r) {
    ++out.completions;
    out.status = r.status();
    out.at = p.engine.now();
  });
}

TEST(FaultyTransportTest, ALostRequestNeverReachesTheCalleeAndFailsAsUnavailableOnceNoticed) {
  CallFaultPlan plan;
  plan.drop_request = 1;
  plan.loss_detection = 3 * kSecond;
  Pair p(plan);
  int reached = 0;
  count_calls(p, &reached);
  Outcome out;
  call(p, out);
  EXPECT_EQ(out.completions, 0) << "done must never run inside call()";
  p.engine.run();
  EXPECT_EQ(reached, 0);
  EXPECT_EQ(out.completions, 1);
  EXPECT_EQ(out.status.code(), StatusCode::kUnavailable);
  EXPECT_EQ(failed_task(out.status), TaskId::ps(0));
  EXPECT_EQ(out.at, 3 * kSecond);
  EXPECT_EQ(p.faulty.counts().requests_dropped, 1u);
}

TEST(FaultyTransportTest, ADeadlineBeforeTheLossIsNoticedEndsTheCallWithDeadlineExceeded) {
  CallFaultPlan plan;
  plan.drop_reply = 1;
  Pair p(plan);
  int reached = 0;
  count_calls(p, &reached);
  Outcome out;
  CallOptions opts;
  opts.deadline = kSecond;
  call(p, out, opts);
  p.engine.run();
  EXPECT_EQ(reached, 1) << "a lost reply: the callee ran the call";
  EXPECT_EQ(out.completions, 1);
  EXPECT_EQ(out.status.code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(failed_task(out.status), TaskId::ps(0));
  EXPECT_EQ(out.at, kSecond);
}

TEST(FaultyTransportTest, ADuplicateReachesTheCalleeTwiceWithOneRequestIdAndTheCallerOnce) {
  CallFaultPlan plan;
  plan.duplicate = 1;
  Pair p(plan);
  std::vector<RequestId> ids;
  p.b->serve([&](IncomingCall call, Responder respond) {
    ids.push_back(call.request_id);
    respond(Response(HealthResponse{TaskId::ps(0), 1}));
  });
  Outcome out;
  CallOptions opts;
  opts.request_id = 77;
  call(p, out, opts);
  p.engine.run();
  EXPECT_EQ(ids, (std::vector<RequestId>{77, 77}));
  EXPECT_EQ(out.completions, 1);
  EXPECT_TRUE(out.status.ok()) << out.status;
}

TEST(FaultyTransportTest, HeldBackCallsAreOvertakenByLaterOnes) {
  CallFaultPlan plan;
  plan.delay = 0.5;
  plan.max_delay = 100 * kMillisecond;
  Pair p(plan);
  std::vector<RequestId> order;
  p.b->serve([&](IncomingCall call, Responder respond) {
    order.push_back(call.request_id);
    respond(Response(EmptyResponse{}));
  });
  std::vector<Outcome> outs(50);
  for (RequestId i = 0; i < 50; ++i) {
    CallOptions opts;
    opts.request_id = i + 1;
    call(p, outs[i], opts);
  }
  p.engine.run();
  ASSERT_EQ(order.size(), 50u);
  EXPECT_FALSE(std::is_sorted(order.begin(), order.end())) << "some calls must arrive out of order";
  for (const auto& o : outs) EXPECT_EQ(o.completions, 1);
  EXPECT_GT(p.faulty.counts().delayed, 0u);
}

TEST(FaultyTransportTest, CancellingAHeldBackCallEndsItAtOnceAndItIsNeverSent) {
  CallFaultPlan plan;
  plan.delay = 1;
  plan.max_delay = kSecond;
  Pair p(plan);
  int reached = 0;
  count_calls(p, &reached);
  CancellationSource cancel;
  Outcome out;
  CallOptions opts;
  opts.cancel = cancel.token();
  call(p, out, opts);
  p.a_ex.post([&] { cancel.cancel(); });  // at time 0, while the call is held back
  p.engine.run();
  EXPECT_EQ(out.completions, 1);
  EXPECT_EQ(out.status.code(), StatusCode::kCancelled);
  EXPECT_EQ(out.at, 0);
  EXPECT_EQ(reached, 0);
}

TEST(FaultyTransportTest, CallsThePlanSparesGoStraightThrough) {
  CallFaultPlan plan;
  plan.drop_request = 1;
  plan.applies = [](const TaskId&, const Request& r) { return !std::holds_alternative<HealthRequest>(r); };
  Pair p(plan);
  int reached = 0;
  count_calls(p, &reached);
  Outcome out;
  call(p, out);
  p.engine.run();
  EXPECT_TRUE(out.status.ok());
  EXPECT_EQ(reached, 1);
  EXPECT_EQ(p.faulty.counts().calls, 0u);
}

// The outcomes of 200 calls under a mixed plan: what arrived, in what order,
// and what each caller saw, when.
std::vector<std::int64_t> mixed_run(std::uint64_t seed) {
  CallFaultPlan plan;
  plan.drop_request = 0.1;
  plan.drop_reply = 0.1;
  plan.duplicate = 0.2;
  plan.delay = 0.3;
  plan.max_delay = 50 * kMillisecond;
  Pair p(plan, seed);
  std::vector<std::int64_t> log;
  p.b->serve([&](IncomingCall call, Responder respond) {
    log.push_back(static_cast<std::int64_t>(call.request_id));
    respond(Response(EmptyResponse{}));
  });
  std::vector<Outcome> outs(200);
  for (RequestId i = 0; i < 200; ++i) {
    CallOptions opts;
    opts.request_id = i + 1;
    opts.deadline = 2 * kSecond;
    call(p, outs[i], opts);
  }
  p.engine.run();
  for (const auto& o : outs) {
    EXPECT_EQ(o.completions, 1);
    log.push_back(static_cast<std::int64_t>(o.status.code()));
    log.push_back(o.at);
  }
  return log;
}

TEST(FaultyTransportTest, OneSeedReplaysTheSameFaultsAndAnotherDoesNot) {
  EXPECT_EQ(mixed_run(5), mixed_run(5));
  EXPECT_NE(mixed_run(5), mixed_run(6));
}

// A chief pushing through a plan that duplicates, reorders and loses
// messages, retrying a failed push with its request id (as the worker does):
// the ps applies each push exactly once.
TEST(FaultyTransportTest, TheParameterServerAppliesEveryPushOnceUnderDuplicatesReorderingAndLoss) {
  CallFaultPlan plan;
  plan.drop_request = 0.15;
  plan.drop_reply = 0.15;
  plan.duplicate = 0.3;
  plan.delay = 0.4;
  plan.max_delay = 20 * kMillisecond;
  plan.loss_detection = 100 * kMillisecond;
  Pair p(plan, 11);
  NullTraceSink trace;
  Runtime ps_runtime{TaskId::ps(0), 1, p.b_ex, *p.b, trace, RandomStream(2)};
  ParameterServerNode ps(ps_runtime);

  auto send = [&](Request request, RequestId id) {
    std::optional<StatusOr<Response>> got;
    CallOptions opts;
    opts.request_id = id;
    p.faulty.call(TaskId::ps(0), std::move(request), opts, [&](StatusOr<Response> r) { got = std::move(r); });
    p.engine.run();
    return got;
  };
  CreateShardsRequest create;
  ShardState counter;
  counter.spec = ShardSpec{1, "pushes", VariableKind::kCounter, 1, 1};
  create.shards = {counter};
  int attempts = 0;
  for (;; ++attempts) {  // creation is idempotent (replace_existing); retried until it answers
    ASSERT_LT(attempts, 100);
    auto r = send(create, 0);
    if (r && r->ok()) break;
  }

  constexpr int kPushes = 100;
  int retries = 0;
  for (int i = 0; i < kPushes; ++i) {
    Update add;
    add.shard = 1;
    add.op = Update::Op::kAdd;
    add.counter_delta = 1;
    PushRequest push;
    push.updates = {add};
    for (int attempt = 0;; ++attempt) {
      ASSERT_LT(attempt, 100) << "push " << i << " never answered";
      auto r = send(push, static_cast<RequestId>(1000 + i));
      ASSERT_TRUE(r.has_value());
      if (r->ok()) break;
      EXPECT_TRUE(r->status().code() == StatusCode::kUnavailable) << r->status();
      ++retries;
    }
  }
  const auto& counts = p.faulty.counts();
  EXPECT_GT(counts.duplicated, 0u);
  EXPECT_GT(counts.requests_dropped + counts.replies_dropped, 0u);
  EXPECT_GT(retries, 0);
  EXPECT_GT(ps.store().stats().duplicates_dropped, 0u);

  PullRequest pull;
  pull.items = {PullItem{1, true, {}}};
  std::optional<StatusOr<Response>> pulled;
  for (int attempt = 0; attempt < 100 && !(pulled && pulled->ok()); ++attempt) pulled = send(pull, 0);
  ASSERT_TRUE(pulled && pulled->ok());
  EXPECT_EQ(std::get<PullResponse>(**pulled).items[0].counter, kPushes) << "each push applied exactly once";
}

}  // namespace
}  // namespace twinps
