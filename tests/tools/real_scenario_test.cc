// One twin: a scenario run by the simulator and the same scenario run on real
// processes (`twinps sim --real`: twinps serve processes, faults by SIGKILL,
// SIGSTOP and a transport cut on wall-clock time) pass the same
// expectations. Each expectation the real run can check holds in both runs;
// the others print "n/a: why" in the real run, never "ok".
//
// The subset here covers a worker kill, a hung worker, a ps kill, a
// partition and a ps recovered in place (restore, rollback), each a few
// seconds of real time. TWINPS_REAL_ALL=1 runs every
// scenario that does not say `sim_only`.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/sim/test_paths.h"
#include "tests/tools/process.h"

namespace twinps {
namespace {

using namespace std::chrono_literals;

struct SimRun {
  int exit_code = -1;
  std::string out, err;
  // Each expectation's mark ("ok", "FAIL", "n/a") by what it checks.
  std::map<std::string, std::string> marks;
};

// "  ok    stat RETRIED >= 1  (observed: 1)" -> marks["stat RETRIED >= 1"] = "ok".
std::map<std::string, std::string> expectation_marks(const std::string& out) {
  std::map<std::string, std::string> marks;
  static const std::regex kLine(R"(^  (ok|FAIL|n/a) +(.*?)  \((observed: |n/a: ).*\)$)");
  const auto at = out.find("\nexpectations:\n");
  if (at == std::string::npos) return marks;
  std::istringstream in(out.substr(at));
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_match(line, m, kLine)) continue;
    std::string what = m[2];
    // The time limit is of simulated time in one mode, wall-clock in the other.
    what = std::regex_replace(what, std::regex(" of wall-clock time"), "");
    marks[what] = m[1];
  }
  return marks;
}

// The lines of the "faults:" section of a run's output.
std::vector<std::string> fault_log(const std::string& out) {
  std::vector<std::string> lines;
  const auto at = out.find("\nfaults:\n");
  if (at == std::string::npos) return lines;
  std::istringstream in(out.substr(at + 9));
  std::string line;
  while (std::getline(in, line) && !line.empty()) lines.push_back(line);
  return lines;
}

SimRun run_sim(const std::vector<std::string>& args) {
  std::vector<std::string> all{"sim"};
  all.insert(all.end(), args.begin(), args.end());
  auto p = testing::twinps(all);
  SimRun r;
  // A hang guard only: a real run takes seconds.
  if (!p.wait(300s)) {
    p.stop();
    r.err = "did not end within 300 s: " + p.err();
    return r;
  }
  r.exit_code = p.exit_code();
  r.out = p.out();
  r.err = p.err();
  r.marks = expectation_marks(r.out);
  return r;
}

std::string scenario(const std::string& file) { return (sim::testing::scenarios_dir() / file).string(); }

// Returns the real run, run with `real_flags` besides.
SimRun expect_both_modes_agree(const std::string& file, const std::vector<std::string>& real_flags = {}) {
  SCOPED_TRACE(file);
  const SimRun simulated = run_sim({scenario(file), "--no-progress"});
  std::vector<std::string> real_args{"--real", scenario(file)};
  real_args.insert(real_args.end(), real_flags.begin(), real_flags.end());
  const SimRun real = run_sim(real_args);
  EXPECT_EQ(simulated.exit_code, 0) << simulated.out << simulated.err;
  EXPECT_EQ(real.exit_code, 0) << real.out << real.err;
  EXPECT_FALSE(simulated.marks.empty()) << simulated.out;
  // The same expectations, each either held in both runs or n/a in the real one.
  EXPECT_EQ(simulated.marks.size(), real.marks.size()) << simulated.out << real.out;
  int checked_in_both = 0, not_applicable = 0;
  for (const auto& [what, mark] : simulated.marks) {
    EXPECT_EQ(mark, "ok") << what;
    auto r = real.marks.find(what);
    if (r == real.marks.end()) {
      ADD_FAILURE() << "the real run did not report: " << what << "\n" << real.out;
      continue;
    }
    EXPECT_TRUE(r->second == "ok" || r->second == "n/a") << what << ": " << r->second << "\n" << real.out;
    checked_in_both += r->second == "ok";
    not_applicable += r->second == "n/a";
  }
  // Most of what a fault scenario expects is about the coordinator, which
  // means the same in real time: a scenario checked mostly "n/a" shows nothing.
  EXPECT_GT(checked_in_both, not_applicable) << real.out;
  // The real run applied the scenario's faults, when the simulator did, as
  // their logs say, line for line ("t=1.500 s  kill worker:0 until 3.500 s").
  EXPECT_EQ(fault_log(real.out), fault_log(simulated.out)) << real.out;
  return real;
}

TEST(RealScenarioTest, WorkerKilledMidstAFunction) { expect_both_modes_agree("worker_preemption_midst_function.textproto"); }

// The tutorial as TensorFlow's tutorial runs it, trained by the trainer on real processes.
TEST(RealScenarioTest, TheTutorial) { expect_both_modes_agree("tutorial.textproto"); }

TEST(RealScenarioTest, HungWorker) { expect_both_modes_agree("worker_hang.textproto"); }

TEST(RealScenarioTest, PsKilledRaisesAtJoin) { expect_both_modes_agree("ps_failure_raises_at_join.textproto"); }

// --data-plane picks where the real run's calls travel (tcp by default), and
// the summary says which: the same ps kill over gRPC alone.
TEST(RealScenarioTest, PsKilledRaisesAtJoinOverGrpcToo) {
  const SimRun real = expect_both_modes_agree("ps_failure_raises_at_join.textproto", {"--data-plane", "grpc"});
  EXPECT_TRUE(std::regex_search(real.out, std::regex("\n  data plane +grpc\n"))) << real.out;
}

TEST(RealScenarioTest, Partition) { expect_both_modes_agree("partition.textproto"); }

// Sync training with a straggler and one backup worker: about 7 s of real time.
TEST(RealScenarioTest, SyncWithABackupWorker) { expect_both_modes_agree("sync_backup_worker.textproto"); }
// A ps killed and restarted on its address mid-training, recovered in place
// without a coordinator restart (P10-P15): the tutorial trains to its
// accuracy bound in both modes.
TEST(RealScenarioTest, PsRestoredInPlace) { expect_both_modes_agree("ps_failure_restore.textproto"); }

TEST(RealScenarioTest, PsRolledBackInPlace) { expect_both_modes_agree("ps_failure_rollback.textproto"); }

// Stale-synchronous training (bound 1) with a 4x straggler and a second one
// for 5 s: no gradient more than the bound allows behind, the straggler still
// served, in both modes (about 20 s of real time).
TEST(RealScenarioTest, SspWithStragglers) { expect_both_modes_agree("ssp_straggler.textproto"); }

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// The real run's summary shows the staleness histogram, as the simulated one
// does, and --report writes it: sync with a backup worker applied only fresh
// gradients and dropped the straggler's late ones.
TEST(RealScenarioTest, TheSummaryAndTheReportShowTheStalenessHistogram) {
  const std::string dir = testing::temp_dir("real_staleness");
  const SimRun real = run_sim({"--real", scenario("sync_backup_worker.textproto"), "--report", dir + "/r.json"});
  ASSERT_EQ(real.exit_code, 0) << real.out << real.err;
  EXPECT_TRUE(std::regex_search(real.out, std::regex("\n  data plane +tcp\n"))) << "the default\n" << real.out;
  const auto row = real.out.find("  gradient staleness ");
  ASSERT_NE(row, std::string::npos) << real.out;
  const std::string line = real.out.substr(row, real.out.find('\n', row) - row);
  EXPECT_NE(line.find("max 0, mean 0.00 over "), std::string::npos) << line;
  EXPECT_NE(line.find("dropped as late"), std::string::npos) << line;
  EXPECT_NE(real.out.find("  sync steps applied "), std::string::npos) << real.out;
  const auto r = read_json(dir + "/r.json");
  EXPECT_EQ(r.at("run"), "real");
  EXPECT_EQ(r.at("mode"), "sync");
  EXPECT_EQ(r.at("staleness").at("max"), 0);
  EXPECT_GT(r.at("staleness").at("dropped").get<int>(), 0);
  EXPECT_NE(line.find("(" + std::to_string(r.at("staleness").at("dropped").get<int>()) + " dropped as late)"),
            std::string::npos)
      << line << "\n" << r.at("staleness").dump();
  std::filesystem::remove_all(dir);
}

// A model spec on real processes (`twinps sim --real` of a scenario with a
// `model_spec`): the trainer of the simulated run drives `twinps serve`
// workers whose steps take the scenario's compute time, and the report has
// every epoch's time from the start, throughput and held-out accuracy.
TEST(RealScenarioTest, AModelSpecTrainsOnRealProcessesAndReportsEveryEpoch) {
  const std::string d = "/usr/share/datasets/fashion-mnist";
  if (!std::filesystem::exists(d + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Debian's dataset-fashion-mnist is not installed (" << d << ")";
  const std::string dir = testing::temp_dir("real_spec");
  const SimRun real = run_sim({"--real", (sim::testing::source_dir() / "notebooks" / "training_modes.textproto").string(),
                               "--train-data", d + "/train-images-idx3-ubyte.gz", "--train-labels",
                               d + "/train-labels-idx1-ubyte.gz", "--eval-data", d + "/t10k-images-idx3-ubyte.gz",
                               "--eval-labels", d + "/t10k-labels-idx1-ubyte.gz", "--epochs", "2", "--steps-per-epoch",
                               "10", "--steps-per-execution", "5", "--eval-steps", "2", "--shuffle-buffer", "100",
                               "--mode", "ssp", "--staleness-bound", "1", "--report", dir + "/r.json"});
  ASSERT_EQ(real.exit_code, 0) << real.out << real.err;
  ASSERT_EQ(real.marks.count("\"train\" ends with OK"), 1u) << real.out;
  EXPECT_EQ(real.marks.at("\"train\" ends with OK"), "ok") << real.out;
  EXPECT_NE(real.out.find("  evaluation "), std::string::npos) << real.out;
  EXPECT_NE(real.out.find("  gradient staleness "), std::string::npos) << real.out;
  const auto r = read_json(dir + "/r.json");
  EXPECT_EQ(r.at("run"), "real");
  EXPECT_EQ(r.at("mode"), "ssp");
  EXPECT_EQ(r.at("iterations"), 20);
  ASSERT_EQ(r.at("epochs").size(), 2u) << r.dump(1);
  double previous = 0;
  for (const auto& e : r.at("epochs")) {
    SCOPED_TRACE(e.dump());
    // Times count from the program's start, not the machine's clock.
    EXPECT_GT(e.at("time").get<double>(), previous);
    EXPECT_LE(e.at("time").get<double>(), r.at("end_time").get<double>());
    previous = e.at("time").get<double>();
    EXPECT_GT(e.at("steps_per_second").get<double>(), 0);
    EXPECT_GT(e.at("eval").at("accuracy").get<double>(), 0);
  }
  EXPECT_EQ(r.at("stats").at("completed"), 8) << "20 steps, 5 per closure; 2 evaluations of 2 batches, one a closure";
  EXPECT_GT(r.at("staleness").at("gradients").get<int>(), 0);
  std::filesystem::remove_all(dir);
}

// Exactly-once visitation under two worker kills (issue 13, point 3): the
// visits the real ps applied are one per example and epoch, as in the
// simulator, checked in both runs (never n/a). About 8 s of real time.
TEST(RealScenarioTest, ExactlyOnceVisitsUnderWorkerKills) {
  const SimRun real = expect_both_modes_agree("exactly_once_worker_kill.textproto");
  int visits_checked = 0;
  for (const auto& [what, mark] : real.marks) {
    if (what.rfind("every example's visits", 0) != 0) continue;
    EXPECT_EQ(mark, "ok") << what << "\n" << real.out;
    ++visits_checked;
  }
  EXPECT_EQ(visits_checked, 3) << real.out;
}

// The same for a model the trainer trains (the tutorial's 200 records, three
// passes, two workers killed): every record trained on 3 times, in both modes.
TEST(RealScenarioTest, ExactlyOnceVisitsOfATrainedModelUnderWorkerKills) {
  const SimRun real = expect_both_modes_agree("exactly_once_tutorial_worker_kill.textproto");
  ASSERT_EQ(real.marks.count("every example's visits after \"train\" == 3"), 1u) << real.out;
  EXPECT_EQ(real.marks.at("every example's visits after \"train\" == 3"), "ok") << real.out;
  EXPECT_NE(real.out.find("200 examples: 200 x3"), std::string::npos) << real.out;
}

// ps:1 killed for good under restore, then rollback: the recovery waits 3 s
// for it and gives up; training ends with UNAVAILABLE naming ps:1 and the
// wait, in both modes, and the summary's recovery row says so.
TEST(RealScenarioTest, APsThatNeverComesBackEndsTheRunNamingIt) {
  expect_both_modes_agree("ps_failure_never_back.textproto");
  for (const std::string policy : {"restore", "rollback"}) {
    SCOPED_TRACE(policy);
    const SimRun real = run_sim({"--real", scenario("ps_failure_never_back.textproto"), "--ps-failure-policy", policy});
    EXPECT_EQ(real.exit_code, 0) << real.out << real.err;
    ASSERT_FALSE(real.marks.empty()) << real.out << real.err;
    for (const auto& [what, mark] : real.marks) EXPECT_TRUE(mark == "ok" || mark == "n/a") << what << ": " << mark;
    const std::string row = "ps " + policy + " ";
    const auto at = real.out.find(row);
    ASSERT_NE(at, std::string::npos) << real.out;
    const std::string line = real.out.substr(at, real.out.find('\n', at) - at);
    EXPECT_NE(line.find("ps:1 failed"), std::string::npos) << line;
    EXPECT_NE(line.find("ps:1 failed and did not answer again on its address within 3 s (ps_failure " + policy),
              std::string::npos)
        << line;
  }
}

// Every scenario that runs in both modes, with TWINPS_REAL_ALL=1 (20 of
// them: 4 min 17 s of real time here on 2026-11-26).
TEST(RealScenarioTest, EveryScenarioThatRunsInBothModes) {
  const char* all = std::getenv("TWINPS_REAL_ALL");
  if (!all || std::string(all) != "1") GTEST_SKIP() << "set TWINPS_REAL_ALL=1 to run every two-mode scenario";
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(sim::testing::scenarios_dir()))
    if (e.path().extension() == ".textproto") files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  int ran = 0;
  for (const auto& f : files) {
    const SimRun real = run_sim({"--real", scenario(f)});
    if (real.exit_code == 2 && real.err.find("runs on the simulator only") != std::string::npos) continue;
    expect_both_modes_agree(f);
    ++ran;
  }
  EXPECT_GE(ran, 10);
}

// A real run's expectations that hold only in simulated time say so.
TEST(RealScenarioTest, SimulatedOnlyExpectationsPrintNotApplicable) {
  const SimRun real = run_sim({"--real", scenario("ps_failure_raises_at_join.textproto")});
  ASSERT_EQ(real.marks.count("the coordinator's invariants hold"), 1u) << real.out;
  EXPECT_EQ(real.marks.at("the coordinator's invariants hold"), "n/a");
  EXPECT_NE(real.out.find("n/a: the invariants read every push"), std::string::npos) << real.out;
}

// A scenario that only the simulator can run is refused, saying why.
TEST(RealScenarioTest, ASimOnlyScenarioIsRefusedSayingWhy) {
  const SimRun r = run_sim({"--real", scenario("one_host.textproto")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("runs on the simulator only: it checks step times that come from the simulated host"),
            std::string::npos)
      << r.err;
  const SimRun seeded = run_sim({"--real", scenario("partition.textproto"), "--seed", "3"});
  EXPECT_EQ(seeded.exit_code, 2);
  EXPECT_NE(seeded.err.find("--seed does not apply to --real"), std::string::npos) << seeded.err;
  const SimRun simulated_plane = run_sim({scenario("partition.textproto"), "--data-plane", "grpc"});
  EXPECT_EQ(simulated_plane.exit_code, 2);
  EXPECT_NE(simulated_plane.err.find("--data-plane is where a real run's calls travel: use it with --real"),
            std::string::npos)
      << simulated_plane.err;
  const SimRun bad_plane = run_sim({"--real", scenario("partition.textproto"), "--data-plane", "udp"});
  EXPECT_EQ(bad_plane.exit_code, 2);
  EXPECT_NE(bad_plane.err.find("--data-plane"), std::string::npos) << bad_plane.err;
  EXPECT_NE(bad_plane.err.find("udp"), std::string::npos) << bad_plane.err;
}

// A scenario without sim_only that real processes cannot run is refused,
// naming the field and what to do.
TEST(RealScenarioTest, AnUnmarkedSimulatorOnlyScenarioIsRefusedNamingTheField) {
  const std::string dir = testing::temp_dir("real_scenario");
  const std::string path = dir + "/slow_link.textproto";
  {
    std::ofstream f(path);
    f << "cluster { workers: 1 ps: 1 }\n"
         "model { variable { name: \"w\" shape: [2, 2] } }\n"
         "program { schedule { count: 2 } }\n"
         "program { join {} }\n"
         "fault { at_s: 0.1 duration_s: 1 slow_link { task: \"ps:0\" factor: 10 } }\n";
  }
  const SimRun r = run_sim({"--real", path});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("fault[0] slow_link"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("mark it sim_only"), std::string::npos) << r.err;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace twinps
