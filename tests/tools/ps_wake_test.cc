// The ps's wake-up prices that `twinps calibrate` derives from its CPU and
// sleeps per call (tools/tune/ps_wake.h), on hand-made measurements.
#include "tools/tune/ps_wake.h"

#include <gtest/gtest.h>

namespace twinps::cli {
namespace {

// One caller: 20 us and a sleep a call. Two: 14 us and 0.25 sleeps a call,
// so a quarter woke it (20 us) and the rest cost (14 - 5) / 0.75 = 12 us.
TEST(PsWakeTest, TheAwakePriceSolvesTheMixOfWokenAndAwakeRequests) {
  double woke = 0;
  const auto awake = awake_price_us({20, 1.0, 60}, {14, 0.25, 40}, &woke);
  ASSERT_TRUE(awake.has_value());
  EXPECT_DOUBLE_EQ(woke, 0.25);
  EXPECT_DOUBLE_EQ(*awake, 12);
}

// More than 90 % woke it (or no sleeps were seen at all): no price.
TEST(PsWakeTest, NoAwakePriceWhenNearlyEveryRequestWokeThePs) {
  double woke = 0;
  EXPECT_FALSE(awake_price_us({20, 1.0, 60}, {19, 0.95, 40}, &woke).has_value());
  EXPECT_DOUBLE_EQ(woke, 0.95);
  EXPECT_FALSE(awake_price_us({20, 0.0, 60}, {19, 0.0, 40}, &woke).has_value());
  EXPECT_DOUBLE_EQ(woke, 1.0);
}

// Back to back a call every 60 us (20 of them the ps's: 40 us idle) at the
// calibrated 22 us; paced, the ps idles period - CPU and pays what it spent
// beyond the back-to-back call: 160 us idle -> 22 + 5, 970 -> 22 + 30.
TEST(PsWakeTest, TheIdleCurvePricesEachPaceByItsIdleTime) {
  const std::vector<PsPerCall> paced = {{20, 1, 60}, {25, 1, 185}, {50, 1, 1020}};
  const sim::CostCurve curve = idle_price_curve(paced, 22);
  EXPECT_EQ(curve, (sim::CostCurve{{40, 22}, {160, 27}, {970, 52}}));
}

// Measured out of order, cheaper after a longer idle (noise) or at an idle
// no longer than an earlier point's: sorted by idle time, the falling
// prices pooled (27 and 23 -> 25), a repeated idle time dropped.
TEST(PsWakeTest, TheIdleCurveIsIncreasingInBothIdleAndPrice) {
  const std::vector<PsPerCall> paced = {{20, 1, 60}, {50, 1, 1020}, {21, 1, 181}, {25, 1, 185}};
  const sim::CostCurve curve = idle_price_curve(paced, 20);
  // Sorted: (40, 20), (160, 21), (160, 25), (970, 50): nothing falls.
  EXPECT_EQ(curve, (sim::CostCurve{{40, 20}, {160, 21}, {970, 50}}));
  const sim::CostCurve pooled = idle_price_curve({{20, 1, 60}, {27, 1, 187}, {23, 1, 423}}, 20);
  EXPECT_EQ(pooled, (sim::CostCurve{{40, 20}, {160, 25}, {400, 25}}));
  EXPECT_TRUE(idle_price_curve({{20, 1, 60}}, 20).empty()) << "one pace is no curve";
}

}  // namespace
}  // namespace twinps::cli
