#include <gtest/gtest.h>

#include "core/local/in_memory_network.h"
#include "core/local/local_engine.h"
#include "core/runtime/task.h"

namespace twinps {
namespace {

TEST(EventQueueTest, PopsInTimeThenInsertionOrder) {
  EventQueue<int> q;
  q.push(5, 1);
  q.push(3, 2);
  q.push(5, 3);
  auto c = q.push(4, 4);
  q.push(3, 5);
  EXPECT_TRUE(q.cancel(c));
  EXPECT_FALSE(q.cancel(c));
  std::vector<int> order;
  while (!q.empty()) order.push_back(q.pop().payload);
  EXPECT_EQ(order, (std::vector<int>{2, 5, 1, 3}));
}

Task<int> add_after(Executor& ex, int a, int b) {
  co_await sleep_for(ex, 10 * kMillisecond);
  co_return a + b;
}

Task<void> outer(Executor& ex, int* out) {
  int x = co_await add_after(ex, 1, 2);
  int y = co_await add_after(ex, x, 4);
  *out = y;
}

TEST(TaskTest, NestedTasksRunOnTheExecutorClock) {
  LocalEngine engine;
  NodeExecutor ex(engine, engine.add_node());
  TaskScope scope(ex);
  int out = 0;
  scope.spawn(outer(ex, &out));
  engine.run();
  EXPECT_EQ(out, 7);
  EXPECT_EQ(engine.now(), 20 * kMillisecond);
  EXPECT_EQ(scope.active(), 0u);
}

TEST(TaskTest, DestroyingTheScopeDestroysSuspendedTasksAndTheirTimers) {
  LocalEngine engine;
  NodeExecutor ex(engine, engine.add_node());
  int out = 0;
  {
    TaskScope scope(ex);
    scope.spawn(outer(ex, &out));
    engine.run(5 * kMillisecond);
    EXPECT_EQ(scope.active(), 1u);
  }
  engine.run();
  EXPECT_EQ(out, 0);
  EXPECT_TRUE(engine.idle());
}

TEST(LocalEngineTest, EventsOfAKilledIncarnationAreSkipped) {
  LocalEngine engine;
  auto node = engine.add_node();
  int ran = 0;
  {
    NodeExecutor old_ex(engine, node);
    old_ex.post_after(kSecond, [&] { ++ran; });
  }
  engine.bump_incarnation(node);
  NodeExecutor new_ex(engine, node);
  new_ex.post_after(2 * kSecond, [&] { ran += 10; });
  engine.run();
  EXPECT_EQ(ran, 10);
  EXPECT_EQ(engine.events_skipped(), 1u);
}

struct Pair {
  LocalEngine engine;
  InMemoryNetwork net{engine};
  NodeExecutor a_ex{engine, engine.add_node()};
  NodeExecutor b_ex{engine, engine.add_node()};
  std::unique_ptr<Transport> a = net.attach(TaskId::chief(), a_ex);
  std::unique_ptr<Transport> b = net.attach(TaskId::ps(0), b_ex);
};

TEST(InMemoryNetworkTest, CallReachesHandlerAndReplyComesBackOnce) {
  Pair p;
  p.b->serve([](IncomingCall call, Responder respond) {
    EXPECT_EQ(call.from, TaskId::chief());
    respond(Response(HealthResponse{TaskId::ps(0), 7}));
  });
  int calls = 0;
  p.a->call(TaskId::ps(0), HealthRequest{}, {}, [&](StatusOr<Response> r) {
    ++calls;
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(std::get<HealthResponse>(*r).incarnation, 7u);
  });
  EXPECT_EQ(calls, 0) << "done must never run inside call()";
  p.engine.run();
  EXPECT_EQ(calls, 1);
}

TEST(InMemoryNetworkTest, DeadlineFailsAHungCallWithTheCalleeAsFailedTask) {
  Pair p;
  std::vector<Responder> parked;
  p.b->serve([&](IncomingCall, Responder respond) { parked.push_back(std::move(respond)); });
  Status got;
  CallOptions opts;
  opts.deadline = 50 * kMillisecond;
  p.a->call(TaskId::ps(0), HealthRequest{}, opts, [&](StatusOr<Response> r) { got = r.status(); });
  p.engine.run();
  EXPECT_EQ(got.code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(failed_task(got), TaskId::ps(0));
  // A late reply after the deadline is ignored rather than delivered twice.
  parked[0](Response(EmptyResponse{}));
  p.engine.run();
}

TEST(InMemoryNetworkTest, CallsInFlightFailWhenTheCalleeGoesDown) {
  Pair p;
  std::vector<Responder> parked;
  p.b->serve([&](IncomingCall, Responder respond) { parked.push_back(std::move(respond)); });
  Status got = absl::OkStatus();
  p.a->call(TaskId::ps(0), HealthRequest{}, {}, [&](StatusOr<Response> r) { got = r.status(); });
  p.engine.run();
  ASSERT_EQ(parked.size(), 1u);
  p.b.reset();
  p.engine.run();
  EXPECT_EQ(got.code(), StatusCode::kUnavailable);
  EXPECT_EQ(failed_task(got), TaskId::ps(0));
}

TEST(InMemoryNetworkTest, CancellingACallCompletesItAndTellsTheCallee) {
  Pair p;
  std::vector<Responder> parked;
  bool callee_saw_cancel = false;
  std::vector<CancelRegistration> regs;
  p.b->serve([&](IncomingCall call, Responder respond) {
    regs.push_back(call.cancelled.on_cancel([&] { callee_saw_cancel = true; }));
    parked.push_back(std::move(respond));
  });
  CancellationSource cancel;
  Status got = absl::OkStatus();
  CallOptions opts;
  opts.cancel = cancel.token();
  p.a->call(TaskId::ps(0), HealthRequest{}, opts, [&](StatusOr<Response> r) { got = r.status(); });
  p.engine.run();
  cancel.cancel();
  p.engine.run();
  EXPECT_EQ(got.code(), StatusCode::kCancelled);
  EXPECT_TRUE(callee_saw_cancel);
}

}  // namespace
}  // namespace twinps
