// Record and replay (issue 12 point 3): a real run writes what its
// coordinator observed as a scenario (`--record-faults`), and the simulator
// replays that scenario with the same outcome.
//
// The recorded run is `twinps sim --real` of a scenario in which worker:0 is
// killed (SIGKILL, restarted later) and worker:1 stopped (SIGSTOP, hung,
// resumed later). The recording must hold a kill of worker:0 and a pause of
// worker:1 — found from the coordinator's events, which know nothing of
// SIGKILL or SIGSTOP — and the real run's counters as expectations; the
// simulator's replay must meet every one of them.
#include <gtest/gtest.h>

#include <google/protobuf/text_format.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "scenario.pb.h"  // generated from sim/scenario.proto
#include "tests/sim/test_paths.h"
#include "tests/tools/process.h"
#include "tests/tools/read_file.h"

namespace twinps {
namespace {

using namespace std::chrono_literals;

struct CliRun {
  int exit_code = -1;
  std::string out, err;
};

CliRun twinps_run(const std::vector<std::string>& args) {
  auto p = testing::twinps(args);
  CliRun r;
  if (!p.wait(300s)) {  // a hang guard only: the runs take seconds
    p.stop();
    r.err = "did not end within 300 s: " + p.err();
    return r;
  }
  r.exit_code = p.exit_code();
  r.out = p.out();
  r.err = p.err();
  return r;
}

std::string testdata(const std::string& file) {
  return (sim::testing::source_dir() / "tests" / "tools" / "testdata" / file).string();
}

// Each expectation line of a run's output ("  ok    stat RETRIED >= 1  (observed: 1)"): its mark and what it checks.
std::vector<std::pair<std::string, std::string>> expectation_lines(const std::string& out) {
  std::vector<std::pair<std::string, std::string>> lines;
  static const std::regex kLine(R"(^  (ok|FAIL|n/a) +(.*)$)");
  const auto at = out.find("\nexpectations:\n");
  if (at == std::string::npos) return lines;
  std::istringstream in(out.substr(at + 15));
  std::string line;
  while (std::getline(in, line) && !line.empty()) {
    std::smatch m;
    if (std::regex_match(line, m, kLine)) lines.emplace_back(m[1], m[2]);
  }
  return lines;
}

// A summary row's value ("  worker failures / recoveries  2 / 2").
std::string summary_value(const std::string& out, const std::string& row) {
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    const auto at = line.find(row);
    if (at != std::string::npos && at <= 2) {
      std::string v = line.substr(at + row.size());
      return v.substr(v.find_first_not_of(' '));
    }
  }
  return "";
}

const scenario::StatCheck* find_stat(const scenario::Scenario& s, scenario::StatCheck::Counter c) {
  for (const auto& e : s.expect())
    if (e.has_stat() && e.stat().counter() == c) return &e.stat();
  return nullptr;
}

TEST(RecordReplayTest, AKilledAndAHungWorkerRecordedFromARealRunReplayWithTheSameOutcome) {
  const std::string dir = testing::temp_dir("record_replay");
  const std::string recorded_path = dir + "/recorded.textproto";
  const CliRun real = twinps_run({"sim", "--real", testdata("worker_killed_and_hung.textproto"), "--record-faults",
                               recorded_path});
  ASSERT_EQ(real.exit_code, 0) << real.out << real.err;
  EXPECT_EQ(summary_value(real.out, "worker failures / recoveries"), "2 / 2") << real.out;
  ASSERT_TRUE(std::filesystem::exists(recorded_path)) << real.out;
  const std::string text = testing::read_file(recorded_path);

  // A scenario file the loader reads (comments included).
  scenario::Scenario recorded;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &recorded)) << text;
  EXPECT_EQ(recorded.cluster().workers(), 3);
  EXPECT_EQ(recorded.cluster().ps(), 1);
  EXPECT_EQ(recorded.program_size(), 2);
  EXPECT_DOUBLE_EQ(recorded.coordinator().heartbeat_interval_s(), 0.5);
  // The step time measured: at least the injected 0.1 s of each step.
  EXPECT_GE(recorded.compute().step_time().constant_s(), 0.1) << text;

  // The faults as observed: worker:0 came back as a new incarnation (it
  // died), worker:1 as the same one after missing health checks (it hung).
  ASSERT_EQ(recorded.fault_size(), 2) << text;
  const scenario::Fault& killed = recorded.fault(0);
  const scenario::Fault& hung = recorded.fault(1);
  ASSERT_TRUE(killed.has_kill_worker()) << text;
  EXPECT_EQ(killed.kill_worker(), 0);
  ASSERT_TRUE(hung.has_pause()) << text;
  EXPECT_EQ(hung.pause(), "worker:1");
  // Each came back, after a while: the faults have ends.
  EXPECT_GT(killed.duration_s(), 0) << text;
  EXPECT_GT(hung.duration_s(), 0) << text;
  EXPECT_LT(killed.at_s(), hung.at_s()) << text;
  EXPECT_NE(text.find("worker:0 given up at"), std::string::npos) << text;
  EXPECT_NE(text.find("back as a new incarnation"), std::string::npos) << text;
  EXPECT_NE(text.find("worker:1 last answered at"), std::string::npos) << text;
  EXPECT_NE(text.find("back as the same incarnation"), std::string::npos) << text;

  // The outcome as expectations: the run's own counters.
  const auto* failures = find_stat(recorded, scenario::StatCheck::WORKER_FAILURES);
  const auto* recoveries = find_stat(recorded, scenario::StatCheck::WORKER_RECOVERIES);
  const auto* retried = find_stat(recorded, scenario::StatCheck::RETRIED);
  ASSERT_TRUE(failures && recoveries && retried) << text;
  EXPECT_EQ(failures->equals(), 2);
  EXPECT_EQ(recoveries->equals(), 2);
  EXPECT_GE(retried->at_least(), 1) << text;
  int rebuilt = 0, outcomes = 0, iterations = 0;
  for (const auto& e : recorded.expect()) {
    rebuilt += e.has_dataset_rebuilt();
    if (e.has_outcome()) {
      ++outcomes;  // "steps" (every schedule() returned) and "join"
      ASSERT_EQ(e.outcome().code_size(), 1);
      EXPECT_EQ(e.outcome().code(0), scenario::OK);
    }
    if (e.has_iterations()) {
      ++iterations;
      EXPECT_EQ(e.iterations().after(), "join");
      // 400 steps: the bounds hold them, less the retried ones that may have applied twice.
      EXPECT_LE(e.iterations().at_least(), 400);
      EXPECT_GE(e.iterations().at_least(), 390);
      EXPECT_GE(e.iterations().at_most(), 400);
    }
  }
  EXPECT_EQ(rebuilt, 2) << text;
  EXPECT_EQ(outcomes, 2) << text;
  EXPECT_EQ(iterations, 1) << text;

  // The replay: the simulator meets every expectation the real run wrote.
  const CliRun replay = twinps_run({"sim", recorded_path, "--no-progress"});
  EXPECT_EQ(replay.exit_code, 0) << replay.out << replay.err << text;
  const auto lines = expectation_lines(replay.out);
  // One line per expectation, and the time limit's first.
  ASSERT_EQ(lines.size(), static_cast<std::size_t>(recorded.expect_size()) + 1) << replay.out;
  EXPECT_NE(lines[0].second.find("finishes within the time limit"), std::string::npos) << replay.out;
  for (const auto& [mark, what] : lines) EXPECT_EQ(mark, "ok") << what << "\n" << replay.out << text;
  // It applied the recorded faults, and its outcome is the real run's.
  EXPECT_NE(replay.out.find("kill worker:0 until"), std::string::npos) << replay.out;
  EXPECT_NE(replay.out.find("pause worker:1 (SIGSTOP) until"), std::string::npos) << replay.out;
  EXPECT_EQ(summary_value(replay.out, "worker failures / recoveries"), "2 / 2") << replay.out;
  std::filesystem::remove_all(dir);
}

// `twinps train` on a real cluster (in one process, real gRPC) records its
// run as well: the tutorial, the coordinator's options, one `train` action;
// the simulator replays it (no failure to observe there: nothing acts on an
// in-process cluster's tasks).
TEST(RecordReplayTest, ATrainRunRecordsAScenarioTheSimulatorReplays) {
  const std::string dir = testing::temp_dir("record_train");
  const std::string path = dir + "/train.textproto";
  const CliRun train = twinps_run({"train", "--in-process", "--record-faults", path});
  ASSERT_EQ(train.exit_code, 0) << train.out << train.err;
  EXPECT_NE(train.out.find("no failure observed"), std::string::npos) << train.out;
  const std::string text = testing::read_file(path);
  scenario::Scenario recorded;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &recorded)) << text;
  EXPECT_TRUE(recorded.has_tutorial()) << text;
  EXPECT_EQ(recorded.cluster().workers(), 3);
  EXPECT_EQ(recorded.cluster().ps(), 2);
  EXPECT_EQ(recorded.fault_size(), 0) << text;
  ASSERT_EQ(recorded.program_size(), 1);
  EXPECT_TRUE(recorded.program(0).has_train());
  const auto* failures = find_stat(recorded, scenario::StatCheck::WORKER_FAILURES);
  ASSERT_NE(failures, nullptr) << text;
  EXPECT_EQ(failures->equals(), 0);
  const CliRun replay = twinps_run({"sim", path, "--no-progress"});
  EXPECT_EQ(replay.exit_code, 0) << replay.out << replay.err << text;
  for (const auto& [mark, what] : expectation_lines(replay.out)) EXPECT_EQ(mark, "ok") << what << "\n" << replay.out;
  std::filesystem::remove_all(dir);
}

// Bad flags and paths exit 2, naming them, before anything runs.
TEST(RecordReplayTest, BadRecordFlagsExitTwoNamingThem) {
  const std::string dir = testing::temp_dir("record_flags");
  const std::string scenario_file = testdata("worker_killed_and_hung.textproto");
  const CliRun simulated = twinps_run({"sim", scenario_file, "--record-faults", dir + "/x.textproto"});
  EXPECT_EQ(simulated.exit_code, 2);
  EXPECT_NE(simulated.err.find("--record-faults records a real run: use it with --real"), std::string::npos)
      << simulated.err;
  const CliRun no_dir = twinps_run({"sim", "--real", scenario_file, "--record-faults", dir + "/missing/x.textproto"});
  EXPECT_EQ(no_dir.exit_code, 2);
  EXPECT_NE(no_dir.err.find("--record-faults " + dir + "/missing/x.textproto: no directory"), std::string::npos)
      << no_dir.err;
  const CliRun a_dir = twinps_run({"sim", "--real", scenario_file, "--record-faults", dir});
  EXPECT_EQ(a_dir.exit_code, 2);
  EXPECT_NE(a_dir.err.find("is a directory"), std::string::npos) << a_dir.err;
  const CliRun in_memory = twinps_run({"train", "--in-memory", "--record-faults", dir + "/x.textproto"});
  EXPECT_EQ(in_memory.exit_code, 2);
  EXPECT_NE(in_memory.err.find("--record-faults records a real run"), std::string::npos) << in_memory.err;
  const CliRun train_no_dir = twinps_run({"train", "--in-process", "--record-faults", dir + "/missing/x.textproto"});
  EXPECT_EQ(train_no_dir.exit_code, 2);
  EXPECT_NE(train_no_dir.err.find("no directory"), std::string::npos) << train_no_dir.err;
  // Nothing was written.
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace twinps
