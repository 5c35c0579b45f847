// A host's cores scheduled tick by tick (sim/ticked_cores.h), against
// hand-computed times: where it differs from processor sharing is the point.
#include "sim/ticked_cores.h"

#include <gtest/gtest.h>

#include "inmemory/deterministic_engine.h"
#include "sim/fluid.h"
#include "sim/hosts.h"

namespace twinps::sim {
namespace {

constexpr Duration kMs = 1000000;

struct Bed {
  DeterministicEngine engine;
  NodeExecutor ex{engine, engine.add_node()};

  // Starts a job and records when it ends in `at`.
  TickedCores::JobId start(TickedCores& cores, std::size_t thread, Duration work, Time& at) {
    return cores.start(thread, work, [this, &at] { at = engine.now(); });
  }
};

TEST(TickedCoresTest, LinuxSliceGrowsWithTheLogOfTheCoresUpToEight) {
  EXPECT_EQ(TickedCores::linux_slice(1), 750000);
  EXPECT_EQ(TickedCores::linux_slice(2), 1500000);
  EXPECT_EQ(TickedCores::linux_slice(4), 2250000);
  EXPECT_EQ(TickedCores::linux_slice(8), 3000000);
  EXPECT_EQ(TickedCores::linux_slice(64), 3000000);
}

TEST(TickedCoresTest, SliceZeroTakesLinuxsDefaultForTheCores) {
  // One core: 0.75 ms. Thread 1 woken at 0.5 ms waits for thread 0's slice
  // to end (0.75 ms), not for the 4 ms tick; woken at 1 ms it preempts
  // thread 0 at once. Then the two take turns a slice each until thread 1's
  // 1 ms is done: 0.75..1.5 and 2.25..2.5 ms; 1..1.75 and 2.5..2.75 ms.
  for (const Duration wake : {kMs / 2, kMs}) {
    Bed bed;
    TickedCores cores(bed.ex, 1, 4 * kMs, 0);
    Time a = -1, b = -1;
    bed.start(cores, 0, 10 * kMs, a);
    bed.ex.post_at(wake, [&] { bed.start(cores, 1, kMs, b); });
    bed.engine.run();
    EXPECT_EQ(b, wake == kMs ? kMs * 11 / 4 : kMs * 5 / 2) << "woken at " << wake;
  }
}

TEST(TickedCoresTest, AJobWokenOntoBusyCoresWaitsForTheTickThenTakesTurns) {
  Bed bed;
  TickedCores cores(bed.ex, 2, kMs, kMs / 2);
  Time a = -1, b = -1, c = -1;
  // Threads 0 and 1 take cores 0 and 1; thread 2's job finds both busy (and
  // their jobs within their slice) and waits on core 0 (2 mod 2) until
  // thread 0's slice ends at 0.5 ms. From then the two take turns on core 0,
  // a slice each (0.5..1, 1..1.5 thread 0, 1.5..2): thread 2's job ends at
  // 2 ms, and thread 0's, 2 ms left, at 4 ms. Processor sharing would end
  // thread 2's at 1.5 ms (three jobs at 2/3 of a core each).
  bed.start(cores, 0, 3 * kMs, a);
  bed.start(cores, 1, 3 * kMs, b);
  bed.start(cores, 2, 1 * kMs, c);
  EXPECT_EQ(cores.queued(), 1u);
  bed.engine.run();
  EXPECT_EQ(c, 2 * kMs);
  EXPECT_EQ(b, 3 * kMs);
  EXPECT_EQ(a, 4 * kMs);
  EXPECT_DOUBLE_EQ(cores.busy_ns(), 7.0 * kMs);
}

TEST(TickedCoresTest, ACoreThatFreesDoesNotTakeAnotherCoresQueueBeforeTheTick) {
  Bed bed;
  // A slice longer than the tick: thread 0's slice does not end first.
  TickedCores cores(bed.ex, 2, 4 * kMs, 5 * kMs);
  Time a = -1, b = -1, c = -1;
  bed.start(cores, 0, 10 * kMs, a);  // core 0
  bed.start(cores, 1, kMs / 2, b);   // core 1, until 0.5 ms
  bed.ex.post_at(kMs / 10, [&] { bed.start(cores, 2, kMs, c); });  // queued on core 0, within thread 0's slice
  // Core 1 idles from 0.5 ms to the tick at 4 ms, where it takes thread 2's
  // job from core 0's queue: 4..5 ms. Processor sharing would have ended it
  // at 1.1 ms (0.1 ms at 2/3 of a core, the rest on the freed core).
  bed.engine.run();
  EXPECT_EQ(b, kMs / 2);
  EXPECT_EQ(c, 5 * kMs);
  EXPECT_EQ(a, 10 * kMs);
  EXPECT_DOUBLE_EQ(cores.busy_ns(), 11.5 * kMs);
}

TEST(TickedCoresTest, AJobWithinItsSliceIsNotSwitchedAtTheTickButAtItsSlicesEnd) {
  Bed bed;
  TickedCores cores(bed.ex, 1, 4 * kMs, 3 * kMs);
  Time a = -1, b = -1;
  // Thread 0's job starts at 3 ms: at the 4 ms tick it has run 1 ms of its
  // 3 ms slice and keeps the core; when the slice ends, at 6 ms, it gives
  // the core to thread 1 (queued since 3.5 ms): 6..7 ms, then thread 0's
  // last 3 ms. Switching only at ticks would have run thread 1 at 8..9 ms.
  bed.ex.post_at(3 * kMs, [&] { bed.start(cores, 0, 6 * kMs, a); });
  bed.ex.post_at(3 * kMs + kMs / 2, [&] { bed.start(cores, 1, kMs, b); });
  bed.engine.run();
  EXPECT_EQ(b, 7 * kMs);
  EXPECT_EQ(a, 10 * kMs);
}

TEST(TickedCoresTest, AJobWokenWhenTheRunningOneHasHadItsSlicePreemptsItAtOnce) {
  Bed bed;
  TickedCores cores(bed.ex, 1, 4 * kMs, kMs);
  Time a = -1, b = -1;
  // Thread 0's job has run 2 ms of its 1 ms slice when thread 1's wakes at
  // 2 ms: thread 1's runs 2..3 ms without waiting for the tick, then thread
  // 0's last 1 ms.
  bed.start(cores, 0, 3 * kMs, a);
  bed.ex.post_at(2 * kMs, [&] { bed.start(cores, 1, kMs, b); });
  bed.engine.run();
  EXPECT_EQ(b, 3 * kMs);
  EXPECT_EQ(a, 4 * kMs);
}

// The job a wake-up preempts waits in its core's queue, and an idle core
// takes it at the next tick, as it takes any queued job. (Until 2026-11-29
// nothing armed the tick for it: two long jobs took turns on one core while
// the other idled, and two workers' steps of 175 ms took 360.)
TEST(TickedCoresTest, APreemptedJobMovesToACoreIdleAtTheTick) {
  Bed bed;
  TickedCores cores(bed.ex, 2, 4 * kMs, kMs);
  Time a = -1, b = -1, c = -1;
  bed.start(cores, 0, 20 * kMs, a);  // core 0
  bed.start(cores, 1, 3 * kMs, b);   // core 1, until 3 ms
  // At 2 ms thread 2 (home core 0) finds thread 0 past its slice and
  // preempts it. At 3 ms thread 2's slice ends and thread 0 runs again, and
  // core 1 idles; at the 4 ms tick core 1 takes thread 2 (1 ms done, 19
  // left): it ends at 23 ms, thread 0 (2 ms done by 2 ms, 18 left from 3
  // ms) at 21 ms.
  bed.ex.post_at(2 * kMs, [&] { bed.start(cores, 2, 20 * kMs, c); });
  bed.engine.run();
  EXPECT_EQ(b, 3 * kMs);
  EXPECT_EQ(a, 21 * kMs);
  EXPECT_EQ(c, 23 * kMs);
}

TEST(TickedCoresTest, AThreadWithMoreWorkKeepsItsCoreAheadOfTheQueue) {
  Bed bed;
  TickedCores cores(bed.ex, 1, 10 * kMs, 10 * kMs);
  Time first = -1, second = -1, other = -1;
  // Thread 0 starts its next job from its first one's end (it never
  // sleeps); thread 1's job, queued meanwhile, gets the core only after.
  cores.start(0, kMs, [&] {
    first = bed.engine.now();
    bed.start(cores, 0, kMs, second);
  });
  bed.start(cores, 1, kMs, other);
  bed.engine.run();
  EXPECT_EQ(first, 1 * kMs);
  EXPECT_EQ(second, 2 * kMs);
  EXPECT_EQ(other, 3 * kMs);
}

TEST(TickedCoresTest, AThreadGoingOnToItsNextJobKeepsItsTurnsSlice) {
  Bed bed;
  TickedCores cores(bed.ex, 1, 10 * kMs, kMs);
  Time second = -1, other = -1;
  // Thread 0 runs 0.8 ms, then 2 ms more without sleeping: its turn (and
  // slice) began at 0, so thread 1, woken at 1.2 ms, preempts it at once
  // (1.2..2.2 ms) and thread 0 ends at 3.8 ms. Counted per job, the slice
  // would have protected thread 0 until 2.8 ms.
  cores.start(0, kMs * 4 / 5, [&] { bed.start(cores, 0, 2 * kMs, second); });
  bed.ex.post_at(kMs * 6 / 5, [&] { bed.start(cores, 1, kMs, other); });
  bed.engine.run();
  EXPECT_EQ(other, kMs * 11 / 5);
  EXPECT_EQ(second, kMs * 19 / 5);
}

TEST(TickedCoresTest, FractionalCoresShareTheUsableOnesAndACoreAloneRunsAtFullSpeed) {
  Bed bed;
  TickedCores cores(bed.ex, 1.5, 100 * kMs, 100 * kMs);
  Time a = -1, b = -1;
  // Thread 0 alone at full speed for 1 ms; with thread 1's 1.5 ms job both
  // cores run at 0.75: thread 1 ends at 3 ms, thread 0 has 0.5 ms left and
  // ends alone at 3.5 ms.
  bed.start(cores, 0, 3 * kMs, a);
  bed.ex.post_at(kMs, [&] { bed.start(cores, 1, kMs * 3 / 2, b); });
  bed.engine.run();
  EXPECT_EQ(b, 3 * kMs);
  EXPECT_EQ(a, kMs * 7 / 2);
}

TEST(TickedCoresTest, ACancelledJobFreesItsCore) {
  Bed bed;
  TickedCores cores(bed.ex, 1.5, 100 * kMs, 100 * kMs);  // two cores, at 0.75 each when both are busy
  Time a = -1, b = -1, c = -1;
  const auto first = bed.start(cores, 0, 3 * kMs, a);
  bed.start(cores, 1, 3 * kMs, b);
  bed.start(cores, 2, 3 * kMs, c);  // queued on core 0
  // At 1 ms the first job is dropped: thread 2's job takes core 0 at once.
  // Both cores at 0.75: thread 1's job ends at 4 ms; thread 2's has done
  // 2.25 ms by then and ends alone at full speed at 4.75 ms.
  bed.ex.post_at(kMs, [&] { cores.cancel(first); });
  bed.engine.run();
  EXPECT_EQ(a, -1);
  EXPECT_EQ(b, 4 * kMs);
  EXPECT_EQ(c, kMs * 19 / 4);
  EXPECT_DOUBLE_EQ(cores.busy_ns(), 8.75 * kMs);
}

TEST(TickedCoresTest, HostsScheduleTickByTickWhenTold) {
  DeterministicEngine engine;
  NodeExecutor ex{engine, engine.add_node()};
  FluidSystem fluid{ex};
  HostOptions options{HostOptions::Placement::kOneHost, 1, 2};
  options.scheduler = HostOptions::Scheduler::kTicked;
  options.tick = kMs;
  options.slice = kMs / 2;
  HostModel hosts(ClusterShape{3, 1}, options, ex, fluid);
  std::vector<Time> done(3, -1);
  // The first case above through a host: workers 0 and 1 (slots 1 and 2)
  // take the two cores, worker 2 (slot 3) waits for the tick.
  hosts.run(1, 3 * kMs, [&] { done[0] = engine.now(); });
  hosts.run(2, 3 * kMs, [&] { done[1] = engine.now(); });
  hosts.run(3, 1 * kMs, [&] { done[2] = engine.now(); });
  engine.run();
  EXPECT_EQ(done[2], 2 * kMs);
  EXPECT_EQ(done[1], 3 * kMs);
  EXPECT_EQ(done[0], 4 * kMs);
  EXPECT_EQ(hosts.task_cpu(3), kMs);
  EXPECT_DOUBLE_EQ(hosts.cpu_ns(0), 7.0 * kMs);
}

}  // namespace
}  // namespace twinps::sim
