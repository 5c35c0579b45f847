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
  EXPECT_EQ(header, "worker,closure,function,start_s,duration_s,ok,program_start");
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

}  // namespace
}  // namespace twinps::sim
