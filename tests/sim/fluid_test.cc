// Max-min fair sharing (flows on links, jobs on cores) against cases worked
// out by hand: two flows on one link, flows sharing one of two links, a
// window-bound flow, processor sharing with arrivals and departures.
#include "sim/fluid.h"

#include <gtest/gtest.h>

#include <vector>

#include "inmemory/deterministic_engine.h"

namespace twinps::sim {
namespace {

struct Harness {
  DeterministicEngine engine;
  NodeExecutor ex{engine, engine.add_node()};
  FluidSystem fluid{ex};
  std::vector<Time> finished;  // by activity index in start order

  // Starts an activity whose completion time is recorded at `index`.
  FluidSystem::ActivityId start(std::size_t index, double amount, std::vector<int> resources,
                                double bound = FluidSystem::kUnbounded, double weight = 1) {
    if (finished.size() <= index) finished.resize(index + 1, -1);
    return fluid.start(amount, resources, bound, weight, [this, index] { finished[index] = engine.now(); });
  }
  void at(Time t, std::function<void()> fn) {
    ex.post_at(t, [fn = std::move(fn)] { fn(); });
  }
  void run() { engine.run(); }
};

TEST(FluidTest, TwoFlowsOnOneLinkShareItEqually) {
  Harness h;
  const int link = h.fluid.add_resource(1.0);  // 1 byte per ns
  h.start(0, 1000, {link});
  h.start(1, 3000, {link});
  h.run();
  // 0.5 each until the first has its 1000 (t = 2000); the second then has
  // 2000 left alone at full rate.
  EXPECT_EQ(h.finished[0], 2000);
  EXPECT_EQ(h.finished[1], 4000);
  EXPECT_DOUBLE_EQ(h.fluid.busy_ns(link), 4000);
}

TEST(FluidTest, AFlowLimitedElsewhereLeavesTheRestOfASharedLink) {
  Harness h;
  const int l1 = h.fluid.add_resource(1.0), l2 = h.fluid.add_resource(0.25);
  auto a = h.start(0, 3000, {l1});
  auto b = h.start(1, 1000, {l1, l2});
  h.at(1, [&] {
    // Max-min: b is held to 0.25 by l2, so a gets the 0.75 l1 has left.
    EXPECT_DOUBLE_EQ(h.fluid.rate(b), 0.25);
    EXPECT_DOUBLE_EQ(h.fluid.rate(a), 0.75);
  });
  h.run();
  EXPECT_EQ(h.finished[0], 4000);  // 3000 / 0.75
  EXPECT_EQ(h.finished[1], 4000);  // 1000 / 0.25
}

TEST(FluidTest, AWindowBoundFlowTakesItsBoundAndLeavesTheRest) {
  Harness h;
  const int link = h.fluid.add_resource(1.0);
  // rate <= window / RTT: 1000 bytes per 10000 ns = 0.1 bytes/ns.
  auto slow = h.start(0, 1000, {link}, /*bound=*/0.1);
  auto fast = h.start(1, 1800, {link});
  h.at(1, [&] {
    EXPECT_DOUBLE_EQ(h.fluid.rate(slow), 0.1);
    EXPECT_DOUBLE_EQ(h.fluid.rate(fast), 0.9);
  });
  h.run();
  EXPECT_EQ(h.finished[1], 2000);   // 1800 / 0.9
  EXPECT_EQ(h.finished[0], 10000);  // the bound binds alone too
}

TEST(FluidTest, WeightsShareInProportion) {
  Harness h;
  const int link = h.fluid.add_resource(1.0);
  auto a = h.start(0, 1000, {link}, FluidSystem::kUnbounded, 1);
  auto b = h.start(1, 3000, {link}, FluidSystem::kUnbounded, 3);
  h.at(1, [&] {
    EXPECT_DOUBLE_EQ(h.fluid.rate(a), 0.25);
    EXPECT_DOUBLE_EQ(h.fluid.rate(b), 0.75);
  });
  h.run();
  EXPECT_EQ(h.finished[0], 4000);
  EXPECT_EQ(h.finished[1], 4000);
}

TEST(FluidTest, ProcessorSharingOnTwoCores) {
  Harness h;
  const int cpu = h.fluid.add_resource(2.0);  // 2 cores; a job uses at most 1
  // Jobs of 1, 2 and 3 ms: 2/3 of a core each until the first has done its
  // 1 ms (t = 1.5 ms); then two jobs, one core each: the second has 1 ms
  // left (t = 2.5 ms), the third 2 ms (t = 3.5 ms).
  h.start(0, 1e6, {cpu}, 1.0);
  h.start(1, 2e6, {cpu}, 1.0);
  h.start(2, 3e6, {cpu}, 1.0);
  h.run();
  EXPECT_EQ(h.finished[0], 1500000);
  EXPECT_EQ(h.finished[1], 2500000);
  EXPECT_EQ(h.finished[2], 3500000);
}

TEST(FluidTest, ProcessorSharingWithALateArrival) {
  Harness h;
  const int cpu = h.fluid.add_resource(1.0);
  // A (2 ms) runs alone for 1 ms; B (1 ms) arrives: half a core each, both
  // have 1 ms left, both end 2 ms later.
  h.start(0, 2e6, {cpu}, 1.0);
  h.at(1000000, [&] { h.start(1, 1e6, {cpu}, 1.0); });
  h.run();
  EXPECT_EQ(h.finished[0], 3000000);
  EXPECT_EQ(h.finished[1], 3000000);
}

TEST(FluidTest, OneJobOnManyCoresRunsAtOneCore) {
  Harness h;
  const int cpu = h.fluid.add_resource(8.0);
  h.start(0, 1e6, {cpu}, 1.0);
  h.run();
  EXPECT_EQ(h.finished[0], 1000000);
  EXPECT_DOUBLE_EQ(h.fluid.busy_ns(cpu), 1e6 / 8);
}

TEST(FluidTest, CancellingAFlowSpeedsUpTheOthers) {
  Harness h;
  const int link = h.fluid.add_resource(1.0);
  auto a = h.start(0, 1000, {link});
  h.start(1, 1000, {link});
  h.at(1000, [&] { h.fluid.cancel(a); });  // b has 500 left, now alone
  h.run();
  EXPECT_EQ(h.finished[0], -1) << "a cancelled activity never completes";
  EXPECT_EQ(h.finished[1], 1500);
}

TEST(FluidTest, ACapacityChangeTakesEffectMidTransfer) {
  Harness h;
  const int link = h.fluid.add_resource(1.0);
  h.start(0, 1000, {link});
  h.at(500, [&] { h.fluid.set_capacity(link, 0.25); });  // 500 left at 0.25
  h.run();
  EXPECT_EQ(h.finished[0], 2500);
}

TEST(FluidTest, ASolveTouchesOnlyTheComponentThatChanged) {
  Harness h;
  const int l1 = h.fluid.add_resource(1.0), l2 = h.fluid.add_resource(1.0);
  h.start(0, 1000, {l1});
  h.start(1, 1000, {l2});
  h.run();
  // Two solves at t = 0 would be one (both started in the same instant);
  // the completions (both at t = 1000) are one more. Each solve of the
  // independent links sees its own activity only.
  EXPECT_EQ(h.finished[0], 1000);
  EXPECT_EQ(h.finished[1], 1000);
  EXPECT_EQ(h.fluid.solves(), 2u);
  EXPECT_EQ(h.fluid.activities_solved(), 2u);
}

TEST(FluidTest, ALargeComponentIsSolvedOneLevelDeepAndStaysFair) {
  Harness h;
  // 300 flows share one link, each also crossing a link of its own: more
  // than kExactLimit activities, so solves are bounded; every flow still gets
  // 1/300 of the shared link and they end together.
  const int shared = h.fluid.add_resource(1.0);
  constexpr int kFlows = 300;
  static_assert(kFlows > FluidSystem::kExactLimit);
  for (int i = 0; i < kFlows; ++i) h.start(static_cast<std::size_t>(i), 1000, {shared, h.fluid.add_resource(1.0)});
  h.run();
  for (int i = 0; i < kFlows; ++i) EXPECT_EQ(h.finished[static_cast<std::size_t>(i)], 300000) << i;
  EXPECT_GT(h.fluid.bounded_solves(), 0u);
}

TEST(FluidTest, CallbacksMayStartTheNextActivity) {
  Harness h;
  const int link = h.fluid.add_resource(1.0);
  std::vector<Time> ends;
  std::function<void(int)> chain = [&](int left) {
    h.fluid.start(100, std::vector<int>{link}, FluidSystem::kUnbounded, 1, [&, left] {
      ends.push_back(h.engine.now());
      if (left > 1) chain(left - 1);
    });
  };
  chain(3);
  h.run();
  EXPECT_EQ(ends, (std::vector<Time>{100, 200, 300}));
}

}  // namespace
}  // namespace twinps::sim
