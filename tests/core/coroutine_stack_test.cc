// The stack stays bounded however many awaits a coroutine makes (resume.h's
// rule). Each test runs on a thread of its own with a small stack (256 KiB):
// a frame per iteration would overflow it long before the end (and
// AddressSanitizer reports stack-overflow), so finishing at all proves the
// bound; the measured peak depth is checked as well.
#include <gtest/gtest.h>
#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <functional>

#include "core/coordinator/cluster_coordinator.h"
#include "inmemory/in_memory_cluster.h"
#include "inmemory/deterministic_engine.h"
#include "core/runtime/block_on.h"
#include "core/runtime/sync.h"
#include "core/runtime/task.h"

namespace twinps {
namespace {

constexpr std::size_t kSmallStack = 256 * 1024;
// The deepest a test may go below its thread's entry. Generous for
// sanitizer builds' larger frames, and far below what one frame per
// iteration would need (100,000 iterations x >= 64 bytes = 6 MB).
constexpr std::uintptr_t kDepthBound = 64 * 1024;

// The deepest frame seen below the thread's entry point.
struct StackDepth {
  std::uintptr_t base = 0;
  std::uintptr_t peak = 0;
  void note() {
    const auto here = reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
    if (base > here) peak = std::max(peak, base - here);
  }
};
StackDepth* g_depth = nullptr;  // the running test's (one test at a time)

// Runs `body` on a new thread whose stack is `stack_bytes`, and returns the
// peak depth it noted.
std::uintptr_t run_on_small_stack(std::size_t stack_bytes, std::function<void()> body) {
  struct Job {
    std::function<void()> body;
    StackDepth depth;
  } job{std::move(body), {}};
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  EXPECT_EQ(pthread_attr_setstacksize(&attr, stack_bytes), 0);
  pthread_t thread;
  auto entry = [](void* p) -> void* {
    auto* j = static_cast<Job*>(p);
    j->depth.base = reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
    g_depth = &j->depth;
    j->body();
    g_depth = nullptr;
    return nullptr;
  };
  EXPECT_EQ(pthread_create(&thread, &attr, entry, &job), 0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
  std::printf("[ stack    ] peak depth %zu bytes of a %zu-byte stack\n", static_cast<std::size_t>(job.depth.peak),
              stack_bytes);
  return job.depth.peak;
}

// One node's executor on a fresh engine.
struct OneNode {
  DeterministicEngine engine;
  NodeExecutor executor{engine, engine.add_node()};
};

Task<std::int64_t> leaf(std::int64_t i) {
  g_depth->note();
  co_return i;
}

Task<std::int64_t> nested_chain(int depth) {
  if (depth == 0) co_return co_await leaf(0);
  co_return 1 + co_await nested_chain(depth - 1);
}

TEST(CoroutineStackTest, ALoopOf100000AwaitedTasksThatCompleteAtOnceKeepsTheStackFlat) {
  std::int64_t sum = -1;
  const auto peak = run_on_small_stack(kSmallStack, [&] {
    OneNode node;
    auto loop = []() -> Task<std::int64_t> {
      std::int64_t s = 0;
      for (std::int64_t i = 0; i < 100000; ++i) s += co_await leaf(i);
      co_return s;
    };
    sum = block_on(node.executor, loop()).value_or(-1);
  });
  EXPECT_EQ(sum, std::int64_t{100000} * 99999 / 2);
  EXPECT_GT(peak, 0u);
  EXPECT_LT(peak, kDepthBound);
}

TEST(CoroutineStackTest, AChainOf100000NestedTasksKeepsTheStackFlat) {
  std::int64_t depth = -1;
  const auto peak = run_on_small_stack(kSmallStack, [&] {
    OneNode node;
    depth = block_on(node.executor, nested_chain(100000)).value_or(-1);
  });
  EXPECT_EQ(depth, 100000);
  EXPECT_LT(peak, kDepthBound);
}

TEST(CoroutineStackTest, TenThousandWaitersWokenByOneNotifyAllAllRunAtAFlatStack) {
  int resumed = 0;
  const auto peak = run_on_small_stack(kSmallStack, [&] {
    OneNode node;
    Notifier notifier(node.executor);
    TaskScope scope(node.executor);
    bool released = false;
    auto waiter = [&]() -> Task<void> {
      while (!released) co_await notifier.wait();
      g_depth->note();
      ++resumed;
    };
    for (int i = 0; i < 10000; ++i) scope.spawn(waiter());
    node.engine.run();  // every waiter is now suspended on the notifier
    ASSERT_TRUE(notifier.has_waiters());
    released = true;
    notifier.notify_all();
    node.engine.run();
    EXPECT_EQ(scope.active(), 0u);
  });
  EXPECT_EQ(resumed, 10000);
  EXPECT_LT(peak, kDepthBound);
}

// The pattern that overflowed: a program scheduling closures in a loop
// through the coordinator, whose queue (capacity 2) is full almost every
// time, then joining. Each schedule() completes at once or after a wake-up.
TEST(CoroutineStackTest, OneMillionClosuresThroughAQueueOfCapacityTwo) {
  constexpr std::int64_t kClosures = 1000000;
  std::int64_t ran = 0;
  bool joined = false;
  const auto peak = run_on_small_stack(kSmallStack, [&] {
    FunctionRegistry registry;
    registry.add_step("count", [&ran](StepContext&) -> Task<StatusOr<Value>> {
      ++ran;
      g_depth->note();
      co_return Value{};
    });
    InMemoryClusterOptions options;
    options.shape = ClusterShape{2, 1};
    options.coordinator.queue_capacity = 2;
    InMemoryCluster cluster(registry, options);
    auto program = [](ClusterCoordinator& c) -> Task<bool> {
      if (!(co_await c.start({}, OptimizerConfig{}, {})).ok()) co_return false;
      for (std::int64_t i = 0; i < kClosures; ++i) {
        g_depth->note();
        if (!(co_await c.schedule("count")).ok()) co_return false;
      }
      co_return (co_await c.join()).ok();
    };
    joined = cluster.run(program(cluster.coordinator())).value_or(false);
  });
  EXPECT_TRUE(joined);
  EXPECT_EQ(ran, kClosures);
  EXPECT_LT(peak, kDepthBound);
}

}  // namespace
}  // namespace twinps
