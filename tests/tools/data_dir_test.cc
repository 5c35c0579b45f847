// The data twinps ships (scenarios, models, profiles) is found outside the
// checkout: beside the binary (share/twinps, in the build tree and after
// `cmake --install`) and through TWINPS_DATA_DIR; a path found nowhere is
// reported with where it was looked for.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/tools/process.h"

namespace twinps {
namespace {

using namespace std::chrono_literals;
using testing::Process;
namespace fs = std::filesystem;

// Runs `command` (a shell command line) in `dir`, as a user outside the checkout would.
Process run_in(const std::string& dir, const std::string& command, std::vector<std::string> env = {}) {
  return Process::start({"/bin/sh", "-c", "cd '" + dir + "' && exec " + command}, env);
}

std::string twinps() { return "'" + testing::twinps_binary() + "'"; }

TEST(DataDirTest, ShippedScenariosAreFoundBesideTheBinary) {
  const std::string elsewhere = testing::temp_dir("data-elsewhere");
  Process sim = run_in(elsewhere, twinps() + " sim scenarios/tutorial.textproto --no-progress");
  ASSERT_TRUE(sim.wait(120s));
  EXPECT_EQ(sim.exit_code(), 0) << sim.err();
  EXPECT_NE(sim.out().find("expectations:"), std::string::npos) << sim.out();

  Process tune = run_in(elsewhere, twinps() + " tune --model scenarios/models/dense_heavy.textproto --workers 2 "
                                              "--ps 1 --shards 1 --partitioners fixed "
                                              "--profile scenarios/profiles/reference.textproto");
  ASSERT_TRUE(tune.wait(120s));
  EXPECT_EQ(tune.exit_code(), 0) << tune.err();
  EXPECT_NE(tune.out().find("recommended:"), std::string::npos) << tune.out();
}

TEST(DataDirTest, TwinpsDataDirIsSearchedAndAMissingFileSaysWhereItLooked) {
  const std::string data = testing::temp_dir("data-env");
  fs::create_directories(data + "/scenarios");
  std::ofstream(data + "/scenarios/mine.textproto")
      << "cluster { workers: 1 ps: 1 }\nmodel { variable { name: \"w\" shape: [4, 4] } }\n"
         "program { schedule { count: 2 } }\nprogram { join {} }\n";
  const std::string elsewhere = testing::temp_dir("data-env-cwd");
  Process found = run_in(elsewhere, twinps() + " sim scenarios/mine.textproto --no-progress", {"TWINPS_DATA_DIR=" + data});
  ASSERT_TRUE(found.wait(60s));
  EXPECT_EQ(found.exit_code(), 0) << found.err();

  Process missing = run_in(elsewhere, twinps() + " sim scenarios/nowhere.textproto", {"TWINPS_DATA_DIR=" + data});
  ASSERT_TRUE(missing.wait(60s));
  EXPECT_EQ(missing.exit_code(), 2);
  EXPECT_NE(missing.err().find("nowhere.textproto: cannot read the scenario"), std::string::npos) << missing.err();
  EXPECT_NE(missing.err().find("looked in the current directory, " + data), std::string::npos) << missing.err();
}

// Directories removed when the scope ends (an ASSERT returns early).
struct RemovedAtExit {
  std::vector<std::string> paths;
  ~RemovedAtExit() {
    std::error_code ignored;
    for (const auto& p : paths) fs::remove_all(p, ignored);
  }
};

TEST(DataDirTest, CmakeInstallShipsTheDataAndTheInstalledBinaryFindsIt) {
  const fs::path build = fs::path(testing::twinps_binary()).parent_path().parent_path();
  const std::string prefix = testing::temp_dir("install");
  const std::string elsewhere = testing::temp_dir("install-cwd");
  // The binary and its data (the install component "runtime", ~170 MB; the
  // libraries for find_package are the test examples.custom_model's): they
  // go when the test ends, however it ends.
  const RemovedAtExit cleanup{{prefix, elsewhere}};
  Process install = Process::start(
      {"/usr/bin/env", "cmake", "--install", build.string(), "--prefix", prefix, "--component", "runtime"});
  ASSERT_TRUE(install.wait(300s));
  ASSERT_EQ(install.exit_code(), 0) << install.err() << install.out();
  for (const char* f : {"bin/twinps", "share/twinps/scenarios/tutorial.textproto",
                        "share/twinps/scenarios/models/dense_heavy.textproto",
                        "share/twinps/scenarios/models/embedding_heavy.textproto",
                        "share/twinps/scenarios/profiles/reference.textproto", "share/twinps/docs/semantics.md",
                        "share/twinps/examples/ctr/model.textproto", "share/twinps/examples/fashion_mnist/model.textproto",
                        "share/twinps/examples/tutorial/model.textproto", "share/twinps/README.md"})
    EXPECT_TRUE(fs::exists(fs::path(prefix) / f)) << f;

  const std::string installed = "'" + prefix + "/bin/twinps'";
  Process version = run_in(elsewhere, installed + " --version");
  ASSERT_TRUE(version.wait(30s));
  EXPECT_NE(version.out().find("data (scenarios, models, profiles): " + prefix + "/share/twinps"), std::string::npos)
      << version.out();

  // tune --validate's default models are found: the run gets past loading
  // them and stops at the next input, an unwritable --csv (exit 2, nothing run).
  Process validate = run_in(elsewhere, installed + " tune --validate --quick --csv /no/such/dir/out.csv");
  ASSERT_TRUE(validate.wait(60s));
  EXPECT_EQ(validate.exit_code(), 2);
  EXPECT_EQ(validate.err().find("cannot read"), std::string::npos) << validate.err();
  EXPECT_NE(validate.err().find("cannot write /no/such/dir/out.csv"), std::string::npos) << validate.err();
}

}  // namespace
}  // namespace twinps
