// Every scenario in scenarios/ passes its own expectations, and replays
// exactly: two runs with the same seed write the same trace (same hash);
// another seed gives another run.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "sim/expectations.h"
#include "sim/scenario_loader.h"
#include "sim/simulation.h"
#include "tests/sim/test_paths.h"

namespace twinps::sim {
namespace {

std::vector<std::string> scenario_files() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(testing::scenarios_dir()))
    if (e.path().extension() == ".textproto") out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

class ScenarioTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ScenarioTest, PassesItsExpectationsAndReplaysExactly) {
  const std::string path = (testing::scenarios_dir() / GetParam()).string();
  LoadedScenario loaded = load_scenario_file(path);
  ASSERT_TRUE(loaded.ok()) << loaded.errors.front().to_string();

  SimResult first = Simulation(loaded.scenario).run();
  ASSERT_TRUE(first.setup_error.ok()) << describe(first.setup_error);
  for (const auto& e : check_expectations(loaded.scenario, first))
    EXPECT_TRUE(e.passed) << path << ": " << e.what << " (observed: " << e.observed << ")";

  SimResult second = Simulation(loaded.scenario).run();
  EXPECT_EQ(first.trace_hash, second.trace_hash) << path << ": the same seed must replay the same run";
  EXPECT_EQ(first.events, second.events);
  EXPECT_EQ(first.end_time, second.end_time);
  EXPECT_GT(first.trace_records, 0u);
}

// A scenario whose faults are drawn from the seed: another seed, another run.
TEST(ScenarioSeedTest, AnotherSeedGivesAnotherRun) {
  LoadedScenario loaded = load_scenario_file((testing::scenarios_dir() / "random_faults.textproto").string());
  ASSERT_TRUE(loaded.ok());
  SimOptions a, b;
  a.seed = 1;
  b.seed = 2;
  SimResult one = Simulation(loaded.scenario, a).run();
  SimResult two = Simulation(loaded.scenario, b).run();
  EXPECT_NE(one.trace_hash, two.trace_hash);
  EXPECT_NE(one.faults, two.faults);
  EXPECT_EQ(one.trace_hash, Simulation(loaded.scenario, a).run().trace_hash);
}

INSTANTIATE_TEST_SUITE_P(Scenarios, ScenarioTest, ::testing::ValuesIn(scenario_files()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param.substr(0, info.param.find('.'));
                           std::replace_if(name.begin(), name.end(), [](char c) { return !std::isalnum(c); }, '_');
                           return name;
                         });

TEST(ScenarioSetTest, CoversTheIssuesList) {
  // The tutorial, the spec's whole-cluster cases, coordinator restart,
  // application error, straggler, hotspot and unbalanced shards.
  const auto files = scenario_files();
  EXPECT_GE(files.size(), 12u);
  for (const char* f : {"tutorial", "worker_preemption_between_functions", "worker_preemption_midst_function",
                        "two_workers_preempted", "worker_continuous_failure", "cancellation_with_worker_failure",
                        "ps_failure_raises_at_join", "ps_failure_raises_at_schedule",
                        "ps_failure_while_worker_recovers", "coordinator_restart", "application_error_cancels_queued",
                        "straggler", "hotspot", "unbalanced_shards"})
    EXPECT_NE(std::find(files.begin(), files.end(), std::string(f) + ".textproto"), files.end()) << f;
}

// With --trace the run is the same run: tracing to a file changes no event.
TEST(ScenarioTraceTest, WritingATraceDoesNotChangeTheRun) {
  LoadedScenario loaded = load_scenario_file((testing::scenarios_dir() / "cancellation_with_worker_failure.textproto").string());
  ASSERT_TRUE(loaded.ok());
  const std::string path = ::testing::TempDir() + "/scenario_trace_" + std::to_string(::getpid()) + ".json";
  SimResult plain = Simulation(loaded.scenario).run();
  ChromeTraceWriter writer(path);
  SimOptions o;
  o.trace = &writer;
  SimResult traced = Simulation(loaded.scenario, o).run();
  writer.close();
  EXPECT_EQ(plain.trace_hash, traced.trace_hash);
  EXPECT_GT(std::filesystem::file_size(path), 1000u);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace twinps::sim
