// Cost profiles: a scenario's `cost_profile` fills the costs it leaves unset
// (its own settings win, field by field); a profile that cannot be read or is
// malformed is an input error naming the file and position; Compute.per_gflop_s
// charges a step's floating-point work on the simulated clock.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/models/synthetic/synthetic.h"
#include "sim/report.h"
#include "sim/scenario_loader.h"
#include "sim/simulation.h"
#include "sim/workload.h"

namespace twinps::sim {
namespace {

// A directory of its own per test (ctest runs tests in parallel).
std::filesystem::path test_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const auto dir = std::filesystem::path(::testing::TempDir()) /
                   ("twinps_profile_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

std::string write(const std::filesystem::path& path, const std::string& content) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << content;
  return path.string();
}

class CostProfileTest : public ::testing::Test {
 protected:
  void TearDown() override { std::filesystem::remove_all(test_dir()); }
};

constexpr char kScenario[] = R"(
cluster { workers: 2 ps: 1 }
model { variable { name: "w" shape: [4, 4] } }
program { schedule { count: 2 } }
program { join {} }
)";

constexpr char kProfile[] = R"(
measured_on: "test"
network { host_bandwidth_gbps: 25 host_latency_us: 40 }
compute { per_example_s: 0.001 per_gflop_s: 2 }
ps_service { per_request_us: 7 threads: 2 }
)";

TEST_F(CostProfileTest, FillsWhatTheScenarioLeavesUnsetAndTheScenarioWins) {
  write(test_dir() / "profiles" / "p.textproto", kProfile);
  const std::string path = write(test_dir() / "s.textproto",
                                 std::string(kScenario) + "cost_profile: \"profiles/p.textproto\"\n"
                                                          "network { host_latency_us: 3 }\n"
                                                          "ps_service { threads: 4 }\n");
  const LoadedScenario loaded = load_scenario_file(path);
  ASSERT_TRUE(loaded.ok()) << loaded.errors.front().to_string();
  const auto& s = loaded.scenario;
  EXPECT_EQ(s.network().host_bandwidth_gbps(), 25);  // from the profile
  EXPECT_EQ(s.network().host_latency_us(), 3);       // the scenario's own
  EXPECT_EQ(s.compute().per_example_s(), 0.001);
  EXPECT_EQ(s.compute().per_gflop_s(), 2);
  EXPECT_EQ(s.ps_service().per_request_us(), 7);
  EXPECT_EQ(s.ps_service().threads(), 4);
  EXPECT_FALSE(s.compute().has_step_time());  // neither sets it: the default stays
}

TEST_F(CostProfileTest, AMissingProfileIsReportedAtTheScenarioField) {
  const std::string path =
      write(test_dir() / "s.textproto", std::string(kScenario) + "cost_profile: \"nowhere.textproto\"\n");
  const LoadedScenario loaded = load_scenario_file(path);
  ASSERT_FALSE(loaded.ok());
  const std::string e = loaded.errors.front().to_string();
  EXPECT_NE(e.find(path + ":6:1: cost_profile: \"nowhere.textproto\" ("), std::string::npos) << e;
  EXPECT_NE(e.find("cannot read the cost profile: No such file or directory"), std::string::npos) << e;
}

TEST_F(CostProfileTest, ADirectoryIsNotAProfile) {
  std::filesystem::create_directories(test_dir() / "dir.textproto");
  const std::string path =
      write(test_dir() / "s.textproto", std::string(kScenario) + "cost_profile: \"dir.textproto\"\n");
  const LoadedScenario loaded = load_scenario_file(path);
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.errors.front().message.find("is a directory, not a cost profile file"), std::string::npos)
      << loaded.errors.front().to_string();
}

TEST_F(CostProfileTest, ErrorsInsideTheProfileNameItsFileLineAndColumn) {
  const std::string profile = write(test_dir() / "p.textproto", "network {\n  host_bandwith_gbps: 3\n}\n");
  const std::string path = write(test_dir() / "s.textproto", std::string(kScenario) + "cost_profile: \"p.textproto\"\n");
  LoadedScenario loaded = load_scenario_file(path);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.errors.front().to_string(),
            profile + ":2:21: Message type \"twinps.scenario.Network\" has no field named \"host_bandwith_gbps\".");

  write(test_dir() / "p.textproto", "compute {\n  per_gflop_s: -1 }\n");
  loaded = load_scenario_file(path);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.errors.front().to_string(),
            profile + ":2:3: compute.per_gflop_s: per_gflop_s must not be negative (got -1)");
}

TEST_F(CostProfileTest, PerTaskSettingsBelongInTheScenario) {
  auto r = parse_profile("compute { straggler { worker: 0 factor: 2 } }\n", "p.textproto");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.errors.front().to_string(),
            "p.textproto:1:11: compute.straggler[0]: a cost profile describes every worker alike; stragglers belong "
            "in a scenario");
  r = parse_profile("network { host_link { task: \"ps:0\" bandwidth_gbps: 1 } }\n", "p.textproto");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.errors.front().field, "network.host_link[0]");
}

// The plane the prices were measured over: one `twinps serve --data-plane`
// takes, or an error at its line naming the ones it may be.
TEST_F(CostProfileTest, DataPlaneNamesAServePlane) {
  auto r = parse_profile("measured_on: \"x\"\ndata_plane: \"tcp-unix\"\n", "p.textproto");
  ASSERT_TRUE(r.ok()) << r.errors.front().to_string();
  EXPECT_EQ(r.profile.data_plane(), "tcp-unix");
  r = parse_profile("measured_on: \"x\"\ndata_plane: \"udp\"\n", "p.textproto");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.errors.front().to_string(),
            "p.textproto:2:1: data_plane: must be tcp, tcp-unix, tcp-only, grpc or tcp-all, not \"udp\"");
}

TEST_F(CostProfileTest, AnEmptyNameIsAnError) {
  auto r = parse_scenario(std::string(kScenario) + "cost_profile: \"\"\n", "s.textproto");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.errors.front().to_string(), "s.textproto:6:1: cost_profile: must name a cost profile file");
}

// One worker, one step at a time: its duration is the compute cost plus the
// pull and push. per_gflop_s adds step_flops / 1e9 * per_gflop_s to it, in
// both fidelities.
double median_step_s(scenario::Fidelity fidelity, double per_gflop_s) {
  auto parsed = parse_scenario(R"(
cluster { workers: 1 ps: 1 }
model { batch_size: 64 variable { name: "w" shape: [256, 128] } }
compute { step_time { constant_s: 0.001 } }
program { schedule { count: 5 } }
program { join {} }
)",
                               "s.textproto");
  EXPECT_TRUE(parsed.ok());
  parsed.scenario.set_fidelity(fidelity);
  parsed.scenario.mutable_compute()->set_per_gflop_s(per_gflop_s);
  Simulation sim(parsed.scenario);
  return summarize_steps(sim.run()).p50_s;
}

TEST(PerGflopTest, ChargesTheStepsFlopsInBothFidelities) {
  auto spec = model_spec(parse_scenario(R"(model { batch_size: 64 variable { name: "w" shape: [256, 128] } })",
                                        "m")
                             .scenario.model());
  ASSERT_TRUE(spec.ok());
  const double gflop = synthetic::step_flops(*spec) / 1e9;  // 4 x 64 x 256 x 128 = 8.4 MFLOP
  EXPECT_NEAR(gflop, 4.0 * 64 * 256 * 128 / 1e9, 1e-12);
  for (auto fidelity : {scenario::NUMERIC, scenario::TIMING_ONLY}) {
    const double base = median_step_s(fidelity, 0);
    const double charged = median_step_s(fidelity, 3);
    EXPECT_NEAR(charged - base, 3 * gflop, 1e-6) << scenario::Fidelity_Name(fidelity);
  }
}

// The median step of the scenario `text` (it must parse).
double median_step_of(const std::string& text) {
  auto parsed = parse_scenario(text, "s.textproto");
  EXPECT_TRUE(parsed.ok()) << (parsed.errors.empty() ? "" : parsed.errors.front().to_string());
  Simulation sim(parsed.scenario);
  return summarize_steps(sim.run()).p50_s;
}

// The median step of one worker training a rows x cols variable at batch 64
// for 5 steps of 1 ms, plus a "gradient" kernel priced by `kernel` (its fields).
double step_with_kernel_s(std::int64_t rows, std::int64_t cols, const std::string& kernel) {
  const std::string text = "cluster { workers: 1 ps: 1 }\n"
                           "model { batch_size: 64 variable { name: \"w\" shape: [" +
                           std::to_string(rows) + ", " + std::to_string(cols) +
                           "] } }\n"
                           "compute { step_time { constant_s: 0.001 } kernel { kind: \"gradient\" " + kernel + " } }\n"
                           "program { schedule { count: 5 } }\n"
                           "program { join {} }\n";
  return median_step_of(text);
}

// A "gradient" kernel priced per input element: a synthetic step builds a
// batch x rows input per variable, so widening the variable (more FLOPs, the
// same input) adds nothing to that term, and doubling its rows doubles it.
double step_with_input_price_s(std::int64_t rows, std::int64_t cols, double per_ginput_s) {
  return step_with_kernel_s(rows, cols, "per_ginput_s: " + std::to_string(per_ginput_s));
}

TEST(KernelPriceTest, InputElementsArePricedByBatchTimesRows) {
  for (std::int64_t cols : {4, 128}) {
    const double base = step_with_input_price_s(256, cols, 0);
    const double charged = step_with_input_price_s(256, cols, 1000);
    EXPECT_NEAR(charged - base, 1000 * 64.0 * 256 / 1e9, 1e-6) << cols << " columns";
  }
  const double base = step_with_input_price_s(512, 4, 0);
  EXPECT_NEAR(step_with_input_price_s(512, 4, 1000) - base, 1000 * 64.0 * 512 / 1e9, 1e-6);
}

// The beyond-the-cache term: per GFLOP and per doubling of the operands
// (weights and the batch x rows input) past `cache_bytes`, nothing for
// operands within it, off without a cache size.
TEST(KernelPriceTest, OperandsBeyondTheCachePayPerGflopPerDoubling) {
  const double gflop = 4.0 * 64 * 256 * 128 / 1e9;
  auto step_s = [](const std::string& kernel) { return step_with_kernel_s(256, 128, kernel); };  // 128 KiB of weights
  const double base = step_s("");
  // 128 KiB of weights and a 64 x 256 input (64 KiB): 192 KiB over a 48 KiB cache, two doublings.
  EXPECT_NEAR(step_s("per_gflop_per_doubling_s: 10 cache_bytes: 49152") - base, 10 * gflop * 2, 1e-6);
  // Over a 96 KiB cache: one.
  EXPECT_NEAR(step_s("per_gflop_per_doubling_s: 10 cache_bytes: 98304") - base, 10 * gflop, 1e-6);
  // Within a 1 MiB cache, or with no cache size: nothing.
  EXPECT_NEAR(step_s("per_gflop_per_doubling_s: 10 cache_bytes: 1048576") - base, 0, 1e-9);
  EXPECT_NEAR(step_s("per_gflop_per_doubling_s: 10") - base, 0, 1e-9);
}

// The median step of one worker training a 256 x 128 variable (128 KiB) in
// `shards` shards on two ps, every task on one host of 4 cores, with
// `assembly` as the messages' data_assembly curve.
double step_with_assembly_s(int shards, const std::string& assembly) {
  const std::string text = "cluster { workers: 1 ps: 2 }\n"
                           "model { batch_size: 64 variable { name: \"w\" shape: [256, 128] } partitioner { "
                           "fixed_shards: " + std::to_string(shards) + " } }\n"
                           "hosts { placement: ONE_HOST cores: 4 }\n"
                           "compute { step_time { constant_s: 0.001 } }\n"
                           "messages { data_send { per_message_us: 5 } " + assembly + " }\n"
                           "program { schedule { count: 5 } }\n"
                           "program { join {} }\n";
  return median_step_of(text);
}

// A variable of several shards costs its worker a copy after the pull's
// replies and one before the push (the curve at its 128 KiB, half way
// between its points: 300 us each);
// a variable of one shard moves, and the curve costs it nothing.
TEST(AssemblyTest, AVariableOfSeveralShardsPaysTheCurveOnItsPullAndItsPush) {
  const std::string curve = "data_assembly { bytes: 65536 us: 100 } data_assembly { bytes: 196608 us: 500 }";
  for (int shards : {2, 1}) {
    const double base = step_with_assembly_s(shards, "");
    const double charged = step_with_assembly_s(shards, curve);
    EXPECT_NEAR(charged - base, shards > 1 ? 2 * 300e-6 : 0, 1e-9) << shards << " shards";
  }
}

TEST(AssemblyTest, ACurveGoingBackwardsIsAnErrorNamingThePoint) {
  auto parsed = parse_scenario(
      "cluster { workers: 1 ps: 1 }\nmodel { variable { name: \"w\" shape: [1] } }\n"
      "messages { data_assembly { bytes: 4096 us: 1 } data_assembly { bytes: 1024 us: 2 } }\n"
      "program { schedule { count: 1 } }\n",
      "s.textproto");
  ASSERT_EQ(parsed.errors.size(), 1u);
  EXPECT_NE(parsed.errors.front().to_string().find("s.textproto:3:"), std::string::npos)
      << parsed.errors.front().to_string();
  EXPECT_NE(parsed.errors.front().to_string().find("messages.data_assembly[1].bytes: must be positive and above the "
                                                   "previous point's (got 1024)"),
            std::string::npos)
      << parsed.errors.front().to_string();
}

TEST(KernelPriceTest, ANegativeCacheSizeIsAnErrorNamingTheField) {
  auto parsed = parse_scenario(
      "cluster { workers: 1 ps: 1 }\nmodel { variable { name: \"w\" shape: [1] } }\n"
      "compute { kernel { kind: \"gradient\" cache_bytes: -1 } }\n"
      "program { schedule { count: 1 } }\n",
      "s.textproto");
  ASSERT_EQ(parsed.errors.size(), 1u);
  EXPECT_EQ(parsed.errors.front().to_string(),
            "s.textproto:3:37: compute.kernel[0].cache_bytes: cache_bytes must be a finite size >= 0");
}

}  // namespace
}  // namespace twinps::sim
