// Training modes in the simulator (core/coordinator/training_mode.h) and the
// staleness the ps measures (core/ps/staleness.h): scenarios/ssp_straggler
// keeps every gradient within its bound-derived promise where the same run
// asynchronously does not, replays with its pinned trace hash;
// scenarios/sync_backup_worker applies only staleness-0 gradients, drops the
// straggler's and is not held back by it, where sync without a backup worker
// is; and bad mode fields are refused naming the field.
#include <gtest/gtest.h>

#include <string>

#include "sim/expectations.h"
#include "sim/report.h"
#include "sim/scenario_loader.h"
#include "sim/simulation.h"
#include "tests/sim/test_paths.h"

namespace twinps::sim {
namespace {

LoadedScenario ssp_straggler() {
  return load_scenario_file((testing::scenarios_dir() / "ssp_straggler.textproto").string());
}

TEST(TrainingModeSimTest, SspStragglerKeepsEveryGradientWithinTheBoundAndReplaysItsPinnedTrace) {
  LoadedScenario loaded = ssp_straggler();
  ASSERT_TRUE(loaded.ok()) << loaded.errors.front().to_string();
  SimResult r = Simulation(loaded.scenario).run();
  ASSERT_TRUE(r.setup_error.ok()) << describe(r.setup_error);
  for (const auto& e : check_expectations(loaded.scenario, r))
    EXPECT_TRUE(e.passed) << e.what << " (observed: " << e.observed << ")";
  // Bound 1, 4 workers: (4 - 1) x (2 x 1 + 1) = 9 versions at most.
  EXPECT_LE(r.stats.staleness.max, 9);
  EXPECT_GT(r.stats.ssp_waits, 0u) << "the fast workers waited for the slow one";
  // Every completed closure pushed the gradients of what it read; the ps
  // counted the same ones (no closure failed after pushing).
  EXPECT_EQ(r.stats.staleness, r.ps_staleness);
  EXPECT_GE(r.stats.staleness.total, 400u) << "200 closures, a dense and an embedding gradient each at least";
  EXPECT_EQ(r.stats.staleness.unmeasured, 0u);
  // Pinned: the same seed gives this run, event for event.
  EXPECT_EQ(r.trace_hash, 0xc30d777ac7455e2dull) << std::hex << r.trace_hash;
  EXPECT_EQ(Simulation(loaded.scenario).run().trace_hash, r.trace_hash);
}

TEST(TrainingModeSimTest, TheSameRunAsynchronouslyIsStalerAndFaster) {
  LoadedScenario loaded = ssp_straggler();
  ASSERT_TRUE(loaded.ok());
  SimResult ssp = Simulation(loaded.scenario).run();
  loaded.scenario.mutable_coordinator()->set_mode(scenario::ASYNC);
  loaded.scenario.mutable_coordinator()->clear_staleness_bound();
  SimResult async = Simulation(loaded.scenario).run();
  EXPECT_GT(async.stats.staleness.max, 9) << async.stats.staleness.describe();
  EXPECT_GT(async.stats.staleness.mean(), ssp.stats.staleness.mean());
  EXPECT_LT(async.end_time, ssp.end_time) << "SSP's price: fast workers wait";
  EXPECT_EQ(async.stats.ssp_waits, 0u);
}

LoadedScenario sync_backup_worker() {
  return load_scenario_file((testing::scenarios_dir() / "sync_backup_worker.textproto").string());
}

TEST(TrainingModeSimTest, SyncWithABackupWorkerAppliesOnlyFreshGradientsAndDropsTheStragglers) {
  LoadedScenario loaded = sync_backup_worker();
  ASSERT_TRUE(loaded.ok()) << loaded.errors.front().to_string();
  SimResult r = Simulation(loaded.scenario).run();
  ASSERT_TRUE(r.setup_error.ok()) << describe(r.setup_error);
  for (const auto& e : check_expectations(loaded.scenario, r))
    EXPECT_TRUE(e.passed) << e.what << " (observed: " << e.observed << ")";
  EXPECT_EQ(r.stats.staleness.max, 0) << r.stats.staleness.describe();
  EXPECT_GT(r.stats.staleness.total, 0u);
  EXPECT_GT(r.stats.staleness.dropped, 0u);
  // What the closures were told is what the ps did: every gradient it
  // aggregated was applied (the last step too, before join returned), and
  // it dropped the same late ones.
  EXPECT_EQ(r.stats.staleness, r.ps_staleness);
  // More steps than the 50 a barrier on all four workers allows: the three
  // fast ones step without the straggler.
  EXPECT_GT(r.stats.sync_steps, 50u);
  // Pinned: the same seed gives this run, event for event (as in scenario_test.cc).
  EXPECT_EQ(r.trace_hash, 0xc7c1c8e3a37ed680ull) << std::hex << r.trace_hash;
  EXPECT_EQ(Simulation(loaded.scenario).run().trace_hash, r.trace_hash);
}

TEST(TrainingModeSimTest, SyncWithoutABackupWorkerWaitsForTheStragglerEveryStep) {
  LoadedScenario loaded = sync_backup_worker();
  ASSERT_TRUE(loaded.ok());
  SimResult backup = Simulation(loaded.scenario).run();
  loaded.scenario.mutable_coordinator()->clear_backup_workers();
  SimResult all = Simulation(loaded.scenario).run();
  ASSERT_TRUE(all.setup_error.ok()) << describe(all.setup_error);
  // One closure per worker and step, every step waits for all four: 50 steps of 4.
  EXPECT_EQ(all.stats.sync_steps, 50u);
  for (std::uint64_t n : all.stats.closures_per_worker) EXPECT_EQ(n, 50u);
  EXPECT_EQ(all.stats.staleness.dropped, 0u);
  EXPECT_EQ(all.stats.staleness.max, 0);
  EXPECT_GT(all.end_time, backup.end_time) << "the backup worker's gain: steps do not wait for the straggler";
}

// A sync step's apply runs the optimizer over the rows its pushes only
// aggregated, so it pays for their values as the pushes do: one row of 16
// floats (64 bytes) per push and per row the step updates. Without that,
// a profile's per-KiB scatter price (calibrate's per_row_pushed_kib_us)
// would reach the pushes and never the applies.
TEST(TrainingModeSimTest, SyncStepsPayTheValuesOfTheRowsTheyApply) {
  auto run = [](double kib_us) {
    const std::string text = R"(cluster { workers: 2 ps: 1 }
model { variable { name: "embedding" shape: [100000, 16] rows_per_step: 1 } optimizer { kind: ADAGRAD } }
hosts { placement: ONE_HOST cores: 0 }
coordinator { mode: SYNC }
program { schedule { count: 20 } label: "steps" }
program { join {} label: "join" }
ps_service { apply { optimizer: ADAGRAD per_row_pushed_kib_us: )" + std::to_string(kib_us) + " } }\n";
    LoadedScenario loaded = parse_scenario(text, "sync_rows.textproto");
    EXPECT_TRUE(loaded.ok()) << (loaded.errors.empty() ? "" : loaded.errors.front().to_string());
    return Simulation(loaded.scenario).run();
  };
  const SimResult free = run(0), priced = run(1024);  // 1,000 ns per byte
  ASSERT_TRUE(free.setup_error.ok()) << describe(free.setup_error);
  ASSERT_TRUE(priced.setup_error.ok()) << describe(priced.setup_error);
  ASSERT_EQ(priced.stats.sync_steps, 10u);
  // 20 pushes of one row, and 10 steps that each apply the one or two
  // distinct rows their two pushes carried.
  const double per_row = 1000 * 64;
  const auto extra = static_cast<double>(priced.ps.at(0).service.busy - free.ps.at(0).service.busy);
  EXPECT_GE(extra, per_row * (20 + 10) - 100) << "the steps' rows are paid for";
  EXPECT_LE(extra, per_row * (20 + 20) + 100);
}

TEST(TrainingModeSimTest, BadModeFieldsAreRefusedNamingTheField) {
  const std::string base = R"(cluster { workers: 2 ps: 1 }
model { variable { name: "w" shape: [4, 1] } }
program { schedule { count: 2 } }
)";
  struct Case {
    const char* coordinator;
    const char* field;
    const char* message;
  } cases[] = {
      {"coordinator { mode: SYNC backup_workers: 2 }", "coordinator.backup_workers", "fewer than the workers (2)"},
      {"coordinator { mode: SYNC backup_workers: -1 }", "coordinator.backup_workers", "must not be negative"},
      {"coordinator { backup_workers: 1 }", "coordinator.backup_workers", "SYNC only"},
      {"coordinator { mode: SSP staleness_bound: -1 }", "coordinator.staleness_bound", "must not be negative"},
      {"coordinator { staleness_bound: 2 }", "coordinator.staleness_bound", "SSP only"},
  };
  for (const auto& c : cases) {
    LoadedScenario loaded = parse_scenario(base + c.coordinator, "bad.textproto");
    ASSERT_FALSE(loaded.ok()) << c.coordinator;
    const std::string text = loaded.errors.front().to_string();
    EXPECT_NE(text.find(c.field), std::string::npos) << text;
    EXPECT_NE(text.find(c.message), std::string::npos) << text;
  }
}

TEST(TrainingModeSimTest, TheSummaryAndTheCsvShowTheStaleness) {
  LoadedScenario loaded = ssp_straggler();
  ASSERT_TRUE(loaded.ok());
  SimResult r = Simulation(loaded.scenario).run();
  bool found = false;
  for (const auto& [k, v] : summary_rows(r))
    if (k == "gradient staleness") {
      found = true;
      EXPECT_EQ(v, r.stats.staleness.describe());
    }
  EXPECT_TRUE(found);
  std::int64_t max_in_steps = 0;
  for (const auto& s : r.steps) max_in_steps = std::max(max_in_steps, s.max_staleness);
  EXPECT_EQ(max_in_steps, r.stats.staleness.max) << "the per-closure maxima the CSV writes";
}

}  // namespace
}  // namespace twinps::sim
