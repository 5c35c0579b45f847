// Training modes and staleness in real mode, as users run them: `twinps
// train --in-process` (every task in one process over real gRPC and the data
// plane) with --mode ssp keeps every gradient within the bound's promise and
// reports the staleness the ps measured in the summary and the report; bad
// modes and bounds, as flags or spec fields, exit 2 naming them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tests/sim/test_paths.h"
#include "tests/tools/process.h"

namespace twinps {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using testing::Process;

Process train(std::vector<std::string> args) {
  args.insert(args.begin(), {testing::twinps_binary(), "train"});
  return Process::start(args);
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

TEST(TrainingModeRealTest, SspOverGrpcKeepsEveryGradientWithinTheBoundAndReportsTheStaleness) {
  const std::string dir = testing::temp_dir("ssp-real");
  // The tutorial, 3 workers, one step per closure: bound 1 promises at most
  // (3 - 1) x (2 x 1 + 1) = 6 versions.
  Process p = train({"--in-process", "--workers", "3", "--ps", "2", "--mode", "ssp", "--staleness-bound", "1",
                     "--epochs", "3", "--steps-per-epoch", "20", "--steps-per-execution", "1", "--report",
                     dir + "/r.json"});
  ASSERT_TRUE(p.wait(120s));
  ASSERT_EQ(p.exit_code(), 0) << p.err();
  EXPECT_THAT(p.out(), HasSubstr("gradient staleness"));
  const auto st = read_json(dir + "/r.json")["staleness"];
  // Each of the 60 steps pushes a gradient per trainable shard it read.
  EXPECT_GE(st["gradients"].get<std::uint64_t>(), 60u) << st.dump();
  EXPECT_LE(st["max"].get<std::int64_t>(), 6) << st.dump();
  EXPECT_EQ(st["unmeasured"].get<std::uint64_t>(), 0u) << st.dump();
  std::uint64_t counted = 0;
  for (const auto& c : st["counts"]) counted += c.get<std::uint64_t>();
  EXPECT_EQ(counted, st["gradients"].get<std::uint64_t>());
  std::filesystem::remove_all(dir);
}

TEST(TrainingModeRealTest, SyncOverGrpcAppliesOnlyStalenessZeroGradientsAndReachesTheTutorialsAccuracy) {
  const std::string dir = testing::temp_dir("sync-real");
  // The tutorial, 3 workers of which 1 is a backup: each step is applied
  // once 2 of its closures completed; the third's gradients, if late, are dropped.
  Process p = train({"--in-process", "--workers", "3", "--ps", "2", "--mode", "sync", "--backup-workers", "1",
                     "--report", dir + "/r.json"});
  ASSERT_TRUE(p.wait(120s));
  ASSERT_EQ(p.exit_code(), 0) << p.err();
  EXPECT_THAT(p.out(), HasSubstr("gradient staleness"));
  EXPECT_THAT(p.out(), HasSubstr("sync steps applied"));
  const auto r = read_json(dir + "/r.json");
  const auto st = r["staleness"];
  EXPECT_GT(st["gradients"].get<std::uint64_t>(), 0u) << st.dump();
  EXPECT_EQ(st["max"].get<std::int64_t>(), 0) << st.dump();
  EXPECT_GT(r["sync_steps"].get<std::uint64_t>(), 0u);
  std::filesystem::remove_all(dir);
}

TEST(TrainingModeRealTest, BadModesAndBoundsExitTwoNamingTheFlagOrField) {
  const std::string dir = testing::temp_dir("ssp-bad");
  struct Case {
    std::vector<std::string> args;
    const char* says;
  } cases[] = {
      {{"--mode", "bsp"}, "--mode must be async, ssp or sync"},
      {{"--mode", "sync", "--backup-workers", "-1"}, "--backup-workers must not be negative"},
      {{"--backup-workers", "1"}, "--backup-workers is for --mode sync only"},
      {{"--mode", "sync", "--workers", "3", "--backup-workers", "3"},
       "--backup-workers (or the spec's training.backup_workers) 3 must be fewer than the workers (3)"},
      {{"--mode", "ssp", "--staleness-bound", "-1"}, "--staleness-bound must not be negative"},
      {{"--staleness-bound", "2"}, "--staleness-bound is for --mode ssp only"},
  };
  for (auto& c : cases) {
    c.args.insert(c.args.begin(), "--in-memory");
    Process p = train(c.args);
    ASSERT_TRUE(p.wait(60s));
    EXPECT_EQ(p.exit_code(), 2) << c.says << "\n" << p.err();
    EXPECT_THAT(p.err(), HasSubstr(c.says));
  }
  // The spec's training block: mode and bound checked as fields.
  const std::string tutorial = (sim::testing::source_dir() / "examples/tutorial/model.textproto").string();
  std::ifstream in(tutorial);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const auto& [training, says] : std::vector<std::pair<std::string, std::string>>{
           {"training { mode: \"bsp\" ", "training.mode"},
           {"training { backup_workers: 1 ", "training.backup_workers"},
           {"training { mode: \"sync\" backup_workers: -2 ", "training.backup_workers"},
           {"training { staleness_bound: 3 ", "training.staleness_bound"}}) {
    const std::string spec = dir + "/spec.textproto";
    std::string edited = text;
    edited.replace(edited.find("training {"), std::string("training {").size(), training);
    std::ofstream(spec) << edited;
    Process p = train({"--in-memory", "--model", spec, "--train-data", "builtin:tutorial"});
    ASSERT_TRUE(p.wait(60s));
    EXPECT_EQ(p.exit_code(), 2) << p.err();
    EXPECT_THAT(p.err(), HasSubstr(says));
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace twinps
