#include "net/asio_executor.h"

#include <atomic>
#include <future>
#include <optional>
#include <thread>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <gtest/gtest.h>

#include "core/runtime/sync.h"
#include "core/runtime/task.h"

namespace twinps::net {
namespace {

constexpr Duration kBound = 10 * kSecond;  // no test waits anywhere near this unless it is broken

TEST(AsioExecutorTest, ClockStartsNearZeroAndIsMonotonic) {
  AsioExecutor ex;
  Time a = ex.now();
  Time b = ex.now();
  EXPECT_GE(a, 0);
  EXPECT_LT(a, kSecond);
  EXPECT_LE(a, b);
}

TEST(AsioExecutorTest, PostRunsInOrderAndNeverInline) {
  AsioExecutor ex;
  std::vector<int> order;
  ex.post([&] {
    order.push_back(1);
    ex.post([&] { order.push_back(3); });
  });
  ex.post([&] { order.push_back(2); });
  EXPECT_TRUE(order.empty());
  EXPECT_FALSE(ex.run_until([] { return false; }));  // runs dry
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
}

TEST(AsioExecutorTest, TimersFireInTimeOrderAndCanBeCancelled) {
  AsioExecutor ex;
  std::vector<int> order;
  const Time t0 = ex.now();
  ex.post_at(t0 + 30 * kMillisecond, [&] { order.push_back(3); });
  TimerId cancelled = ex.post_at(t0 + 20 * kMillisecond, [&] { order.push_back(99); });
  ex.post_at(t0 + 10 * kMillisecond, [&] { order.push_back(1); });
  ex.post_at(t0 + 10 * kMillisecond, [&] { order.push_back(2); });  // same instant: insertion order
  ex.cancel(cancelled);
  ex.cancel(cancelled);  // twice: no-op
  ex.cancel(kNoTimer);
  ex.cancel(123456789);  // unknown: no-op
  EXPECT_FALSE(ex.run_until([] { return false; }, t0 + kBound));
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
  EXPECT_GE(ex.now(), t0 + 30 * kMillisecond);
  EXPECT_LT(ex.now(), t0 + kBound) << "ran dry instead of waiting for the limit";
}

TEST(AsioExecutorTest, CancellingAFiredTimerIsANoOp) {
  AsioExecutor ex;
  int fired = 0;
  TimerId id = ex.post_after(0, [&] { ++fired; });
  ex.run_until([&] { return fired == 1; }, ex.now() + kBound);
  ex.cancel(id);
  // A later timer reusing the slot is not affected by the stale id.
  TimerId id2 = ex.post_after(kMillisecond, [&] { ++fired; });
  ex.cancel(id);
  ex.run_until([&] { return fired == 2; }, ex.now() + kBound);
  EXPECT_EQ(fired, 2);
  (void)id2;
}

TEST(AsioExecutorTest, APastDeadlineFiresAtOnce) {
  AsioExecutor ex;
  bool fired = false;
  ex.post_at(0, [&] { fired = true; });
  EXPECT_TRUE(ex.run_until([&] { return fired; }, ex.now() + kBound));
}

TEST(AsioExecutorTest, ACallbackCanCancelATimerDueAtTheSameInstant) {
  AsioExecutor ex;
  const Time when = ex.now() + 5 * kMillisecond;
  TimerId second = kNoTimer;
  int ran = 0;
  ex.post_at(when, [&] {
    ++ran;
    ex.cancel(second);
  });
  second = ex.post_at(when, [&] { ran += 100; });
  ex.run_until([] { return false; }, ex.now() + kBound);
  EXPECT_EQ(ran, 1);
}

TEST(AsioExecutorTest, RunUntilStopsAtTheLimit) {
  AsioExecutor ex;
  bool fired = false;
  ex.post_after(kBound, [&] { fired = true; });
  const Time limit = ex.now() + 20 * kMillisecond;
  EXPECT_FALSE(ex.run_until([&] { return fired; }, limit));
  EXPECT_FALSE(fired);
  EXPECT_GE(ex.now(), limit);
}

TEST(AsioExecutorTest, RunUntilReturnsWhenNothingIsLeft) {
  AsioExecutor ex;
  EXPECT_FALSE(ex.run_until([] { return false; }));  // nothing at all: returns at once
  bool flag = false;
  ex.post([&] { flag = true; });
  EXPECT_TRUE(ex.run_until([&] { return flag; }));
  // A cancelled timer does not keep the loop busy.
  TimerId id = ex.post_after(kBound, [] {});
  ex.cancel(id);
  EXPECT_FALSE(ex.run_until([] { return false; }));
  EXPECT_LT(ex.now(), kBound);
}

TEST(AsioExecutorTest, WorkKeepsTheLoopWaitingForAnotherThread) {
  AsioExecutor ex;
  AsioExecutor::Work work(ex);
  bool done = false;
  // The other thread posts only once the loop has run a callback, so the loop
  // is already going when it has nothing but the Work to wait for.
  std::promise<void> loop_running;
  ex.post([&] { loop_running.set_value(); });
  std::thread other([&ex, w = std::move(work), &done, running = loop_running.get_future()]() mutable {
    running.wait();
    ex.post([&done, w = std::move(w)]() mutable {
      done = true;
      w.reset();
    });
  });
  EXPECT_TRUE(ex.run_until([&] { return done; }, ex.now() + kBound));
  other.join();
  EXPECT_FALSE(ex.run_until([] { return false; }));
}

TEST(AsioExecutorTest, SocketsWaitingOnTheLoopDoNotKeepItAliveButWorkDoes) {
  using boost::asio::ip::tcp;
  AsioExecutor ex;
  tcp::acceptor acceptor(ex.context(), tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0));
  std::optional<tcp::socket> server_side;
  acceptor.async_accept([&](const boost::system::error_code& ec, tcp::socket s) {
    if (!ec) server_side.emplace(std::move(s));
  });
  // A pending accept alone is nothing anyone waits for: the loop is idle at once.
  const Time t0 = ex.now();
  EXPECT_FALSE(ex.run_until([] { return false; }, t0 + kBound));
  EXPECT_LT(ex.now(), t0 + kBound / 2);
  // I/O that is ready runs while the loop is driven.
  tcp::socket client(ex.context());
  client.connect(acceptor.local_endpoint());
  EXPECT_TRUE(ex.run_until([&] { return server_side.has_value(); }, ex.now() + kBound));
  // With Work held for it, the loop waits for a byte another thread sends later.
  AsioExecutor::Work work(ex);
  bool got = false;
  char byte = 0;
  client.async_read_some(boost::asio::buffer(&byte, 1), [&](const boost::system::error_code& ec, std::size_t n) {
    got = !ec && n == 1;
    work.reset();
  });
  // The byte is sent once the loop runs with the read pending (a callback
  // posted after it has run), so the loop must wait for it.
  std::promise<void> loop_running;
  ex.post([&] { loop_running.set_value(); });
  std::thread sender([&, running = loop_running.get_future()] {
    running.wait();
    const char x = 'x';
    boost::asio::write(*server_side, boost::asio::buffer(&x, 1));
  });
  EXPECT_TRUE(ex.run_until([&] { return got; }, ex.now() + kBound));
  sender.join();
  EXPECT_EQ(byte, 'x');
}

TEST(AsioExecutorTest, PostIsThreadSafe) {
  AsioExecutor ex;
  constexpr int kThreads = 4, kEach = 2000;
  int count = 0;  // touched only on the executor
  std::vector<std::thread> threads;
  std::vector<AsioExecutor::Work> works;
  for (int t = 0; t < kThreads; ++t) works.emplace_back(ex);
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&ex, &count, w = std::move(works[t])]() mutable {
      for (int i = 0; i < kEach; ++i) ex.post([&count] { ++count; });
      w.reset();
    });
  EXPECT_TRUE(ex.run_until([&] { return count == kThreads * kEach; }, ex.now() + kBound));
  for (auto& t : threads) t.join();
}

TEST(AsioExecutorTest, TimersPostedFromAnotherThreadFire) {
  AsioExecutor ex;
  ex.start();
  std::atomic<int> fired{0};
  std::promise<void> all_fired;
  std::thread other([&] {
    for (int i = 0; i < 10; ++i)
      ex.post_after(i * kMillisecond, [&] {
        if (fired.fetch_add(1) + 1 == 10) all_fired.set_value();
      });
  });
  other.join();
  all_fired.get_future().wait_for(std::chrono::seconds(120));  // a hang guard only
  ex.stop();
  EXPECT_EQ(fired.load(), 10);
}

TEST(AsioExecutorTest, StartedExecutorRunsCallbacksOnItsOwnThread) {
  AsioExecutor ex;
  ex.start();
  EXPECT_TRUE(ex.started());
  std::thread::id where;
  bool in_thread = false;
  ex.run_sync([&] {
    where = std::this_thread::get_id();
    in_thread = ex.in_executor_thread();
  });
  EXPECT_NE(where, std::this_thread::get_id());
  EXPECT_TRUE(in_thread);
  EXPECT_FALSE(ex.in_executor_thread());
  ex.stop();
  ex.stop();  // idempotent
  EXPECT_FALSE(ex.started());
  // After stop the loop can be driven by the caller again.
  bool ran = false;
  ex.post([&] { ran = true; });
  EXPECT_TRUE(ex.run_until([&] { return ran; }));
}

Task<void> sleeper(Executor& ex, int* out) {
  co_await sleep_for(ex, 2 * kMillisecond);
  *out += 1;
  co_await sleep_for(ex, 2 * kMillisecond);
  *out += 1;
}

TEST(AsioExecutorTest, CoreCoroutinesRunOnIt) {
  AsioExecutor ex;
  int out = 0;
  {
    TaskScope scope(ex);
    scope.spawn(sleeper(ex, &out));
    EXPECT_TRUE(ex.run_until([&] { return scope.active() == 0; }, ex.now() + kBound));
  }
  EXPECT_EQ(out, 2);
}

}  // namespace
}  // namespace twinps::net
