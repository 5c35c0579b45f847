#include <gtest/gtest.h>

#include <map>

#include "inmemory/in_memory_network.h"
#include "inmemory/deterministic_engine.h"
#include "core/runtime/random.h"
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

// Random pushes (many for the current instant, which take the FIFO path),
// pops and cancels (enough to trigger purges) against a sorted reference.
TEST(EventQueueTest, MatchesAReferenceUnderRandomPushPopCancel) {
  EventQueue<std::uint64_t> q;
  std::map<std::pair<Time, std::uint64_t>, std::uint64_t> ref;  // (time, seq) -> payload
  std::map<std::uint64_t, std::pair<EventQueue<std::uint64_t>::EventId, std::pair<Time, std::uint64_t>>> ids;
  RandomStream r(42);
  Time now = 0;
  std::uint64_t seq = 0;
  for (int i = 0; i < 200000; ++i) {
    const auto op = r.below(10);
    if (op < 5 || ref.empty()) {
      const Time when = op < 2 ? now : now + static_cast<Time>(r.below(1000));
      const auto id = q.push(when, seq);
      ref.emplace(std::make_pair(when, seq), seq);
      ids.emplace(seq, std::make_pair(id, std::make_pair(when, seq)));
      ++seq;
    } else if (op < 8) {
      auto p = q.pop();
      ASSERT_EQ(std::make_pair(p.time, p.payload), std::make_pair(ref.begin()->first.first, ref.begin()->second));
      now = p.time;
      ids.erase(p.payload);
      ref.erase(ref.begin());
    } else {
      auto it = ids.lower_bound(r.below(seq + 1));
      if (it == ids.end()) continue;
      EXPECT_TRUE(q.cancel(it->second.first));
      EXPECT_FALSE(q.cancel(it->second.first));
      ref.erase(it->second.second);
      ids.erase(it);
    }
    ASSERT_EQ(q.size(), ref.size());
  }
  while (!q.empty()) {
    ASSERT_EQ(q.next_time(), ref.begin()->first.first);
    ASSERT_EQ(q.pop().payload, ref.begin()->second);
    ref.erase(ref.begin());
  }
}

TEST(EventQueueTest, PurgingCancelledTimersKeepsTheOrderOfTheRest) {
  EventQueue<int> q;
  std::vector<EventQueue<int>::EventId> ids;
  for (int i = 0; i < 20000; ++i) ids.push_back(q.push(1000 + (i * 7919) % 20000, i));
  q.push(0, -1);  // now-events too
  for (int i = 0; i < 20000; ++i) {
    if (i % 10 == 0) continue;
    ASSERT_TRUE(q.cancel(ids[static_cast<std::size_t>(i)]));
  }
  EXPECT_EQ(q.size(), 2001u);
  EXPECT_EQ(q.pop().payload, -1);
  Time last = -1;
  int n = 0;
  while (!q.empty()) {
    auto p = q.pop();
    EXPECT_EQ(p.payload % 10, 0);
    EXPECT_GT(p.time, last);
    last = p.time;
    ++n;
  }
  EXPECT_EQ(n, 2000);
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
  DeterministicEngine engine;
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
  DeterministicEngine engine;
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

TEST(DeterministicEngineTest, EventsOfAKilledIncarnationAreSkipped) {
  DeterministicEngine engine;
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

// SIGSTOP / SIGCONT in the simulator: a paused node runs nothing (timers and
// messages wait, in order), other nodes go on, and on resume everything held
// runs at once in the order it was due; a held timer can still be cancelled.
TEST(DeterministicEngineTest, APausedNodeHoldsItsEventsInOrderUntilItResumes) {
  DeterministicEngine engine;
  NodeExecutor paused(engine, engine.add_node());
  NodeExecutor other(engine, engine.add_node());
  std::vector<std::pair<std::string, Time>> ran;
  auto log = [&](const char* what) { return [&ran, &engine, what] { ran.emplace_back(what, engine.now()); }; };
  paused.post_after(1 * kSecond, log("p1"));
  const TimerId cancelled = paused.post_after(2 * kSecond, log("p2-cancelled"));
  paused.post_after(3 * kSecond, log("p3"));
  other.post_after(2 * kSecond, log("o2"));
  engine.pause(paused.node());
  engine.run(5 * kSecond);
  EXPECT_TRUE(engine.paused(paused.node()));
  ASSERT_EQ(ran.size(), 1u);
  EXPECT_EQ(ran[0], std::make_pair(std::string("o2"), 2 * kSecond));
  paused.cancel(cancelled);  // held, not yet run: still cancellable
  engine.resume(paused.node());
  paused.post_after(0, log("p-new"));
  engine.run();
  ASSERT_EQ(ran.size(), 4u);
  EXPECT_EQ(ran[1], std::make_pair(std::string("p1"), 5 * kSecond));
  EXPECT_EQ(ran[2], std::make_pair(std::string("p3"), 5 * kSecond));
  EXPECT_EQ(ran[3], std::make_pair(std::string("p-new"), 5 * kSecond));

  // Killing a paused node ends the pause and drops what it held.
  paused.post_after(kSecond, log("dropped"));
  engine.pause(paused.node());
  engine.run(7 * kSecond);
  engine.bump_incarnation(paused.node());
  EXPECT_FALSE(engine.paused(paused.node()));
  engine.run();
  EXPECT_EQ(ran.size(), 4u);
}

struct Pair {
  DeterministicEngine engine;
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

namespace twinps {
namespace {

// A link model that loses every message and notices after `delay`.
class LosingLinks final : public LinkModel {
 public:
  explicit LosingLinks(std::optional<Duration> delay) : delay_(delay) {}
  std::optional<Time> deliver(const TaskId&, const TaskId&, std::size_t, Time) override { return std::nullopt; }
  std::optional<Duration> loss_detection_delay() const override { return delay_; }

 private:
  std::optional<Duration> delay_;
};

Status call_through(LinkModel& links, CallOptions opts, Time* finished_at) {
  DeterministicEngine engine;
  InMemoryNetwork net(engine, &links);
  NodeExecutor a_ex(engine, engine.add_node()), b_ex(engine, engine.add_node());
  auto a = net.attach(TaskId::chief(), a_ex);
  auto b = net.attach(TaskId::ps(0), b_ex);
  b->serve([](IncomingCall, Responder respond) { respond(Response(EmptyResponse{})); });
  Status got = absl::UnknownError("not finished");
  a->call(TaskId::ps(0), HealthRequest{}, opts, [&](StatusOr<Response> r) {
    got = r.status();
    *finished_at = engine.now();
  });
  engine.run();
  return got;
}

TEST(InMemoryNetworkTest, LostMessagesFailWithUnavailableOnceTheLinkModelNotices) {
  LosingLinks noticing(5 * kSecond);
  Time at = 0;
  Status s = call_through(noticing, {}, &at);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(failed_task(s), TaskId::ps(0));
  EXPECT_EQ(at, 5 * kSecond);

  CallOptions soon;
  soon.deadline = kSecond;
  EXPECT_EQ(call_through(noticing, soon, &at).code(), StatusCode::kDeadlineExceeded) << "the earlier of the two";
  EXPECT_EQ(at, kSecond);

  LosingLinks silent(std::nullopt);
  EXPECT_EQ(call_through(silent, soon, &at).code(), StatusCode::kDeadlineExceeded);
}

}  // namespace
}  // namespace twinps
