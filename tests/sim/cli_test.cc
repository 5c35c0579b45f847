// The real `twinps sim` binary on malformed inputs: exit code 2 and a message
// on stderr naming the file (and line:column where there is one); a scenario
// whose expectation fails exits 1 naming it.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/sim/test_paths.h"

namespace twinps::sim {
namespace {

struct CliRun {
  int exit_code = -1;
  std::string out, err;
};

// ctest runs each test as its own process, in parallel: every file a test
// writes lives in a directory of its own.
std::filesystem::path test_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const auto dir = std::filesystem::path(::testing::TempDir()) /
                   ("twinps_cli_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

CliRun run_twinps(const std::string& args) {
  const auto dir = test_dir();
  const auto out = dir / "cli_out.txt", err = dir / "cli_err.txt";
  const std::string cmd = testing::twinps_binary().string() + " " + args + " >" + out.string() + " 2>" + err.string() +
                          " </dev/null";
  const int status = std::system(cmd.c_str());
  CliRun r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  auto slurp = [](const std::filesystem::path& p) {
    std::ifstream f(p);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  };
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

std::string write(const std::string& name, const std::string& content) {
  const auto p = test_dir() / name;
  std::ofstream f(p, std::ios::binary);
  f << content;
  return p.string();
}

class SimCliTest : public ::testing::Test {
 protected:
  void TearDown() override { std::filesystem::remove_all(test_dir()); }
};

const char kValid[] = "cluster { workers: 2 ps: 1 }\nmodel { variable { name: \"w\" shape: [4, 4] } }\n"
                      "program { schedule { count: 2 } }\nprogram { join {} label: \"j\" }\n";

TEST_F(SimCliTest, MalformedInputsExitTwoNamingTheFile) {
  struct Case {
    std::string what, path, expect_in_stderr;
  };
  const std::string dir = test_dir().string();
  write("bad_profile.textproto", "compute { per_gflop_s: x }\n");  // included by a case below
  const Case cases[] = {
      {"unknown field", write("unknown_field.textproto", "cluster { workers: 2 ps: 1 nodes: 3 }\n"),
       "unknown_field.textproto:1:33: Message type \"twinps.scenario.Cluster\" has no field named \"nodes\"."},
      {"unknown variable", write("unknown_variable.textproto", std::string(kValid) + "fault { at_s: 1 hotspot { variable: \"lr\" } }\n"),
       "unknown_variable.textproto:5:27: fault[0].hotspot.variable: unknown variable \"lr\""},
      {"worker out of range", write("worker_range.textproto", std::string(kValid) + "fault { at_s: 1 kill_worker: 2 }\n"),
       "worker_range.textproto:5:17: fault[0].kill_worker: worker index 2 is out of range"},
      {"negative time", write("negative_time.textproto", std::string(kValid) + "fault { at_s: -1 kill_ps: 0 }\n"),
       "negative_time.textproto:5:9: fault[0].at_s: at_s must not be negative"},
      {"missing file", dir + "/no_such_scenario.textproto", "no_such_scenario.textproto: cannot read the scenario"},
      {"missing cost profile", write("with_profile.textproto", std::string(kValid) + "cost_profile: \"nowhere.textproto\"\n"),
       "with_profile.textproto:5:1: cost_profile: \"nowhere.textproto\""},
      {"malformed cost profile",
       write("bad_profile_user.textproto", std::string(kValid) + "cost_profile: \"bad_profile.textproto\"\n"),
       "bad_profile.textproto:1:24: Expected double"},
      {"a directory", dir, "is a directory"},
      {"binary garbage", write("garbage.bin", std::string("\x7f" "ELF\x02\x01\x01\x00\x00\x00", 10)),
       "garbage.bin:1:8: binary data"},
      {"binary garbage without NUL", write("garbage2.bin", "\xde\xad\xbe\xef\x01\x02\x03"), "garbage2.bin:1:1:"},
  };
  for (const auto& c : cases) {
    CliRun r = run_twinps("sim '" + c.path + "'");
    EXPECT_EQ(r.exit_code, 2) << c.what << "\n" << r.err;
    EXPECT_NE(r.err.find(c.expect_in_stderr), std::string::npos) << c.what << ": stderr was\n" << r.err;
  }
}

TEST_F(SimCliTest, BadFlagsAndOutputPathsExitTwo) {
  const std::string ok = write("ok.textproto", kValid);
  EXPECT_EQ(run_twinps("sim").exit_code, 2);
  EXPECT_EQ(run_twinps("sim '" + ok + "' --seed banana").exit_code, 2);
  CliRun r = run_twinps("sim '" + ok + "' --trace /no/such/dir/t.json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("/no/such/dir/t.json"), std::string::npos) << r.err;
  EXPECT_EQ(run_twinps("sim '" + ok + "' --csv /no/such/dir/s.csv").exit_code, 2);
}

TEST_F(SimCliTest, ARunPrintsItsSummaryAndWritesTraceAndCsv) {
  const std::string ok = write("ok.textproto", kValid);
  const std::string trace = (test_dir() / "trace.json").string(), csv = (test_dir() / "steps.csv").string();
  CliRun r = run_twinps("sim '" + ok + "' --trace " + trace + " --csv " + csv);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const char* row : {"simulated time", "step time p50 / p99", "closures", "ps:0", "events processed",
                          "trace hash", "simulated / wall time"})
    EXPECT_NE(r.out.find(row), std::string::npos) << row << "\n" << r.out;
  std::ifstream t(trace);
  const std::string json((std::istreambuf_iterator<char>(t)), std::istreambuf_iterator<char>());
  EXPECT_EQ(json.rfind("{\"displayTimeUnit\"", 0), 0u);
  EXPECT_NE(json.find("\"thread_name\""), std::string::npos);
  std::ifstream c(csv);
  std::string header;
  std::getline(c, header);
  EXPECT_EQ(header, "worker,closure,function,start_s,duration_s,ok,program_start,gradients,max_staleness");
}

TEST_F(SimCliTest, AnExpectationThatDoesNotHoldExitsOneNamingIt) {
  const std::string bad =
      write("bad_expectation.textproto", std::string(kValid) + "expect { iterations { after: \"j\" equals: 5 } }\n");
  CliRun r = run_twinps("sim '" + bad + "'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("iterations after \"j\" == 5 (observed: 2)"), std::string::npos) << r.err;
}

TEST_F(SimCliTest, SameSeedSameHash) {
  const std::string scenario = (testing::scenarios_dir() / "partition.textproto").string();
  auto hash = [](const std::string& out) {
    auto at = out.find("trace hash");
    return at == std::string::npos ? std::string() : out.substr(at, out.find('\n', at) - at);
  };
  CliRun a = run_twinps("sim '" + scenario + "' --seed 5"), b = run_twinps("sim '" + scenario + "' --seed 5");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_FALSE(hash(a.out).empty());
  EXPECT_EQ(hash(a.out), hash(b.out));
}

// ---- issue 9

// Every trace the simulator writes is valid JSON (point 5), for scenarios with
// faults, errors, restarts and a paused task.
TEST_F(SimCliTest, EveryTraceTheSimulatorWritesParsesAsJson) {
  for (const char* name : {"tutorial", "random_faults", "coordinator_restart", "ps_hang_raises_unavailable"}) {
    const std::string trace = (test_dir() / (std::string(name) + ".json")).string();
    CliRun r = run_twinps("sim '" + (testing::scenarios_dir() / (std::string(name) + ".textproto")).string() +
                          "' --trace " + trace);
    EXPECT_EQ(r.exit_code, 0) << name << "\n" << r.err;
    std::ifstream t(trace);
    nlohmann::json doc;
    ASSERT_NO_THROW(doc = nlohmann::json::parse(t)) << name;
    EXPECT_GT(doc["traceEvents"].size(), 10u) << name;
  }
}

// A run that makes no progress says so and exits non-zero, without a
// throughput or speed-up (point 3).
TEST_F(SimCliTest, ARunWithoutProgressFailsAndReportsNoThroughput) {
  const std::string stuck = write("stuck.textproto",
                                  "cluster { workers: 2 ps: 1 }\nmodel { variable { name: \"w\" shape: [4, 4] } }\n"
                                  "compute { step_time { constant_s: 10 } }\n"
                                  "program { schedule { count: 4 } }\nprogram { join {} }\ntime_limit_s: 5\n");
  CliRun r = run_twinps("sim '" + stuck + "'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no progress to report: the program did not finish within its time limit (5.000 s); 0 "
                       "training steps, 0 of 4 closures completed"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.out.find("simulated / wall time"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0 (no training step finished: no throughput)"), std::string::npos) << r.out;

  CliRun bench = run_twinps("bench sim --workers 4 --ps 1 --seconds 0.5 --step-time 10");
  EXPECT_EQ(bench.exit_code, 1) << bench.out;
  EXPECT_NE(bench.err.find("no progress"), std::string::npos) << bench.err;
  EXPECT_EQ(bench.out.find("steps/s"), std::string::npos) << bench.out;
}

// An expectation over nothing fails as vacuous rather than passing (point 6).
TEST_F(SimCliTest, AnExpectationOverNothingFailsAsVacuous) {
  const std::string idle = write("idle.textproto",
                                 "cluster { workers: 2 ps: 1 }\nmodel { variable { name: \"w\" shape: [4, 4] } }\n"
                                 "program { sleep_s: 1 }\nexpect { all_closures_resolved: true }\n"
                                 "expect { invariants: true }\n");
  CliRun r = run_twinps("sim '" + idle + "'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("every closure resolved (observed: vacuous: the program got no RemoteValue to check)"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("invariants hold (observed: vacuous"), std::string::npos) << r.err;
}

// Scenarios too big for the machine are refused before they run, naming the
// field, the estimate and the limit (point 8).
TEST_F(SimCliTest, AScenarioThatCannotFitIsRefusedNamingTheField) {
  struct Case {
    const char* what;
    std::string text, flags, field;
  };
  const Case cases[] = {
      {"65536 workers in 0.3 GiB",
       "fidelity: TIMING_ONLY\ncluster { workers: 65536 ps: 4 }\nmodel { variable { name: \"e\" shape: [1000, 8] } }\n"
       "program { schedule { count: 10 } }\nprogram { join {} }\n",
       "--max-memory-gb 0.3", "cluster.workers: the run would need about 663 MiB of memory, most of it for the state "
                              "of 65541 tasks; this run may use 307 MiB (--max-memory-gb)"},
      {"a batch of a million",
       "cluster { workers: 2 ps: 1 }\nmodel { variable { name: \"w\" shape: [1000, 64] } batch_size: 1000000 }\n"
       "program { schedule { count: 100 } }\nprogram { join {} }\n",
       "--max-memory-gb 6", "model.batch_size: the run would need about"},
      {"65536 rows per step, many steps",
       "fidelity: TIMING_ONLY\ncluster { workers: 2 ps: 1 }\n"
       "model { variable { name: \"e\" shape: [1000000, 64] rows_per_step: 65536 } }\n"
       "program { schedule { count: 200000 } }\nprogram { join {} }\n",
       "", "model.variable[0].rows_per_step: the run would take about 11.0 min of CPU time"},
  };
  for (const auto& c : cases) {
    CliRun r = run_twinps("sim '" + write("big.textproto", c.text) + "' " + c.flags);
    EXPECT_EQ(r.exit_code, 2) << c.what << "\n" << r.out;
    EXPECT_NE(r.err.find(c.field), std::string::npos) << c.what << ": stderr was\n" << r.err;
  }
}

// When memory runs out anyway (the limits lifted, a small ulimit), the CLI
// reports it and exits 1: no uncaught std::bad_alloc, no SIGABRT (point 8).
TEST_F(SimCliTest, RunningOutOfMemoryIsReportedNotAborted) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer reserves more address space than the ulimit this test sets";
#else
  const std::string big = write("huge.textproto",
                                "fidelity: TIMING_ONLY\ncluster { workers: 65536 ps: 4 }\n"
                                "model { variable { name: \"e\" shape: [1000, 8] } }\n"
                                "program { schedule { count: 10 } }\nprogram { join {} }\n");
  const auto dir = test_dir();
  const std::string cmd = "ulimit -v 400000; exec " + testing::twinps_binary().string() + " sim '" + big +
                          "' --no-limits --no-progress >" + (dir / "o.txt").string() + " 2>" + (dir / "e.txt").string();
  const int status = std::system(("/bin/sh -c \"" + cmd + "\"").c_str());
  ASSERT_TRUE(WIFEXITED(status)) << "killed by a signal: status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 1);
  std::ifstream e(dir / "e.txt");
  const std::string err((std::istreambuf_iterator<char>(e)), std::istreambuf_iterator<char>());
  EXPECT_NE(err.find("out of memory"), std::string::npos) << err;
  EXPECT_EQ(err.find("terminate called"), std::string::npos) << err;
#endif
}

}  // namespace
}  // namespace twinps::sim

// ---- issue 10: a model spec in the simulator

namespace twinps::sim {
namespace {

constexpr char kFashionDir[] = "/usr/share/datasets/fashion-mnist";

// The flags `twinps train` and `twinps sim` share for examples/fashion_mnist, shortened.
std::string fashion_flags() {
  const std::string d = kFashionDir;
  return " --train-data " + d + "/train-images-idx3-ubyte.gz --train-labels " + d +
         "/train-labels-idx1-ubyte.gz --eval-data " + d + "/t10k-images-idx3-ubyte.gz --eval-labels " + d +
         "/t10k-labels-idx1-ubyte.gz --epochs 1 --steps-per-epoch 20 --steps-per-execution 10 --eval-mode direct";
}

std::string line_of(const std::string& out, const std::string& key) {
  auto at = out.find(key);
  return at == std::string::npos ? std::string() : out.substr(at, out.find('\n', at) - at);
}

// The line's last word: "parameter hash   00ab..." (sim), "parameter hash: 00ab..." (train).
std::string hex_after(const std::string& line) {
  const auto at = line.find_last_of(" :");
  return at == std::string::npos ? std::string() : line.substr(at + 1);
}

// The Must-show of issue 10 as a user runs it: `twinps sim` of a scenario
// naming the spec (relative to the scenario file), one worker, ends with the
// parameters `twinps train --in-memory --workers 1` ends with, same seed.
TEST_F(SimCliTest, ASpecScenarioWithOneWorkerEndsWithTheInMemoryTrainsParameters) {
  if (!std::filesystem::exists(std::string(kFashionDir) + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Debian's dataset-fashion-mnist is not installed (" << kFashionDir << ")";
  const auto spec = testing::source_dir() / "examples" / "fashion_mnist" / "model.textproto";
  const std::string scenario =
      write("fashion.textproto", "name: \"fashion\"\ncluster { workers: 1 ps: 2 }\nmodel_spec: \"" +
                                     std::filesystem::relative(spec, test_dir()).string() + "\"\n");
  CliRun sim = run_twinps("sim '" + scenario + "' --seed 3" + fashion_flags());
  ASSERT_EQ(sim.exit_code, 0) << sim.err << sim.out;
  CliRun train =
      run_twinps("train --in-memory --workers 1 --ps 2 --seed 3 --model '" + spec.string() + "'" + fashion_flags());
  ASSERT_EQ(train.exit_code, 0) << train.err << train.out;
  const std::string sim_hash = hex_after(line_of(sim.out, "parameter hash"));
  EXPECT_EQ(sim_hash.size(), 16u) << sim.out;
  EXPECT_EQ(sim_hash, hex_after(line_of(train.out, "parameter hash:"))) << sim.out << train.out;
  EXPECT_NE(line_of(sim.out, "evaluation").find("accuracy"), std::string::npos) << sim.out;
  EXPECT_NE(line_of(sim.out, "iterations").find("20"), std::string::npos) << sim.out;

  // --model replaces a scenario's workload (the tutorial's here) with the spec.
  CliRun over = run_twinps("sim '" + (testing::scenarios_dir() / "tutorial.textproto").string() + "' --model '" +
                           spec.string() + "'" + fashion_flags());
  EXPECT_NE(over.exit_code, 2) << over.err;
  EXPECT_NE(over.out.find("parameter hash"), std::string::npos) << over.out << over.err;
}

TEST_F(SimCliTest, SpecInputProblemsExitTwoNamingThem) {
  const auto spec = (testing::source_dir() / "examples" / "fashion_mnist" / "model.textproto").string();
  const std::string bad_spec = write("bad_spec.textproto", "batch_size: 4\nlayer { nme: \"x\" }\n");
  const std::string scenario = write("s.textproto", "cluster { workers: 1 ps: 1 }\nmodel_spec: \"missing.textproto\"\n");
  const std::string ok = write("ok.textproto", kValid);
  const std::string no_data = write("no_data.textproto", "cluster { workers: 1 ps: 1 }\nmodel_spec: \"" + spec + "\"\n");
  struct Case {
    std::string args, expect_in_stderr;
  };
  for (const Case& c : std::vector<Case>{
           {"sim '" + ok + "' --model '" + bad_spec + "'", "bad_spec.textproto:2:12"},
           {"sim '" + scenario + "'", "missing.textproto"},
           {"sim '" + no_data + "'", "--train-data is required"},
           {"sim '" + ok + "' --model '" + spec + "' --train-data x", "schedule needs a synthetic `model`"},
           {"sim '" + ok + "' --epochs 3", "--epochs applies to a scenario with a model spec"},
       }) {
    SCOPED_TRACE(c.args);
    CliRun r = run_twinps(c.args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(c.expect_in_stderr), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace twinps::sim

// ---- issue 13: `twinps sim --report`, per epoch, for the training modes notebook

namespace twinps::sim {
namespace {

nlohmann::json read_report(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// The staleness histogram's buckets hold every measured gradient.
void expect_histogram_adds_up(const nlohmann::json& st) {
  std::uint64_t sum = 0;
  for (const auto& c : st.at("counts")) sum += c.get<std::uint64_t>();
  EXPECT_EQ(sum, st.at("gradients").get<std::uint64_t>()) << st.dump();
  EXPECT_EQ(st.at("counts").size(), st.at("bounds").size() + 1) << st.dump();
}

// A model spec's run: one entry per epoch with its end time, throughput,
// iterations and held-out accuracy, the SSP mode the flags chose, and the
// staleness histogram; the same seed writes the same report (but its wall time).
TEST_F(SimCliTest, ReportHasEveryEpochsTimeStepsPerSecondAccuracyAndTheStalenessHistogram) {
  if (!std::filesystem::exists(std::string(kFashionDir) + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Debian's dataset-fashion-mnist is not installed (" << kFashionDir << ")";
  const auto scenario = (testing::source_dir() / "notebooks" / "training_modes.textproto").string();
  const std::string d = kFashionDir;
  const std::string args = "sim '" + scenario + "' --no-progress --train-data " + d +
                           "/train-images-idx3-ubyte.gz --train-labels " + d + "/train-labels-idx1-ubyte.gz --eval-data " +
                           d + "/t10k-images-idx3-ubyte.gz --eval-labels " + d +
                           "/t10k-labels-idx1-ubyte.gz --epochs 3 --steps-per-epoch 10 --steps-per-execution 5 "
                           "--eval-steps 2 --shuffle-buffer 100 --mode ssp --staleness-bound 1 --report ";
  const std::string first = (test_dir() / "first.json").string(), second = (test_dir() / "second.json").string();
  CliRun run = run_twinps(args + first);
  ASSERT_EQ(run.exit_code, 0) << run.err << run.out;
  const auto r = read_report(first);
  EXPECT_EQ(r.at("run"), "simulated");
  EXPECT_EQ(r.at("scenario"), "training_modes");
  EXPECT_EQ(r.at("mode"), "ssp");
  EXPECT_EQ(r.at("staleness_bound"), 1);
  EXPECT_EQ(r.at("workers"), 4);
  EXPECT_EQ(r.at("batch_size"), 64);
  EXPECT_EQ(r.at("finished"), true);
  EXPECT_EQ(r.at("iterations"), 30);
  ASSERT_EQ(r.at("epochs").size(), 3u) << r.dump(1);
  double previous = 0;
  for (int i = 0; i < 3; ++i) {
    const auto& e = r.at("epochs")[static_cast<std::size_t>(i)];
    SCOPED_TRACE(e.dump());
    EXPECT_EQ(e.at("epoch"), i);
    EXPECT_EQ(e.at("iterations"), 10 * (i + 1));
    EXPECT_GT(e.at("time").get<double>(), previous);
    previous = e.at("time").get<double>();
    EXPECT_GT(e.at("steps_per_second").get<double>(), 0);
    EXPECT_DOUBLE_EQ(e.at("steps_per_second").get<double>() * 64, e.at("examples_per_second").get<double>());
    const double accuracy = e.at("eval").at("accuracy").get<double>();
    EXPECT_GT(accuracy, 0);
    EXPECT_LE(accuracy, 1);
    EXPECT_EQ(e.at("eval").at("examples"), 128.0);
  }
  EXPECT_LE(previous, r.at("end_time").get<double>());
  const auto& st = r.at("staleness");
  EXPECT_GT(st.at("gradients").get<std::uint64_t>(), 0u);
  expect_histogram_adds_up(st);
  EXPECT_EQ(r.at("stats").at("completed"), 12) << "30 steps, 5 per closure; 3 evaluations of 2 batches, one a closure";
  // The summary shows the same histogram.
  EXPECT_NE(run.out.find("gradient staleness            max " + std::to_string(st.at("max").get<int>())),
            std::string::npos)
      << run.out;

  CliRun again = run_twinps(args + second);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  auto a = r, b = read_report(second);
  a.erase("wall_s");
  b.erase("wall_s");
  EXPECT_EQ(a, b) << "a simulated run's report depends on its seed only";
}

// A synthetic model's scenario has no epochs; its report still has the
// training mode's numbers: sync with a backup worker applies only fresh
// gradients and drops the straggler's.
TEST_F(SimCliTest, ReportOfASyncScenarioHasItsStepsAndDroppedGradients) {
  const std::string report = (test_dir() / "sync.json").string();
  CliRun run = run_twinps("sim '" + (testing::scenarios_dir() / "sync_backup_worker.textproto").string() +
                          "' --no-progress --report " + report);
  ASSERT_EQ(run.exit_code, 0) << run.err << run.out;
  const auto r = read_report(report);
  EXPECT_EQ(r.at("mode"), "sync");
  EXPECT_EQ(r.at("backup_workers"), 1);
  EXPECT_TRUE(r.at("epochs").empty());
  EXPECT_EQ(r.at("staleness").at("max"), 0);
  EXPECT_GT(r.at("staleness").at("dropped").get<int>(), 0);
  EXPECT_GT(r.at("stats").at("sync_steps").get<int>(), 0);
  EXPECT_EQ(r.at("stats").at("completed"), 200);
  expect_histogram_adds_up(r.at("staleness"));
}

TEST_F(SimCliTest, AReportPathThatCannotBeWrittenExitsTwoNamingTheFlag) {
  const std::string scenario = (testing::scenarios_dir() / "sync_backup_worker.textproto").string();
  for (const std::string extra : {"", " --real"}) {
    SCOPED_TRACE(extra);
    CliRun r = run_twinps("sim '" + scenario + "'" + extra + " --report /nonexistent-dir/r.json");
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("--report: cannot open '/nonexistent-dir/r.json'"), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find("summary:"), std::string::npos) << "refused before running";
  }
}

}  // namespace
}  // namespace twinps::sim
