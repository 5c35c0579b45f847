// scenario.message_faults in the simulator: pushes duplicated and reordered
// on their way to the parameter servers are applied once each, the run
// replays exactly, and without the faults nothing is duplicated.
#include <gtest/gtest.h>

#include "sim/scenario_loader.h"
#include "sim/simulation.h"
#include "tests/sim/test_paths.h"

namespace twinps::sim {
namespace {

scenario::Scenario duplicated_pushes() {
  const auto loaded = load_scenario_file((testing::scenarios_dir() / "duplicated_pushes.textproto").string());
  EXPECT_TRUE(loaded.ok()) << (loaded.errors.empty() ? "" : loaded.errors.front().to_string());
  return loaded.scenario;
}

TEST(MessageFaultsTest, DuplicatedAndReorderedPushesAreAppliedOnceEach) {
  const SimResult r = Simulation(duplicated_pushes()).run();
  ASSERT_TRUE(r.finished);
  EXPECT_GT(r.message_faults.duplicated, 50u);
  EXPECT_GT(r.message_faults.delayed, 50u);
  EXPECT_GT(r.duplicate_pushes_dropped, 0u) << "duplicates must reach the ps and be dropped there";
  ASSERT_TRUE(r.final_iterations.has_value());
  EXPECT_EQ(*r.final_iterations, 300) << "each of the 300 steps counted once";
}

TEST(MessageFaultsTest, TheSameSeedReplaysTheSameFaults) {
  const SimResult a = Simulation(duplicated_pushes()).run();
  const SimResult b = Simulation(duplicated_pushes()).run();
  EXPECT_EQ(a.trace_hash, b.trace_hash);
  EXPECT_EQ(a.message_faults.duplicated, b.message_faults.duplicated);
  EXPECT_EQ(a.duplicate_pushes_dropped, b.duplicate_pushes_dropped);
}

TEST(MessageFaultsTest, WithoutThePlanNothingIsDuplicated) {
  scenario::Scenario s = duplicated_pushes();
  s.clear_message_faults();
  const SimResult r = Simulation(s).run();
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(r.message_faults.calls, 0u);
  EXPECT_EQ(r.duplicate_pushes_dropped, 0u);
  EXPECT_EQ(r.final_iterations, 300);
}

}  // namespace
}  // namespace twinps::sim
