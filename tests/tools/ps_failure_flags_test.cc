// The ps failure policy (docs/semantics.md P10) as users set it: bad values
// of `--ps-failure-policy` (train, sim) and of the model spec's
// training.ps_failure / ps_recovery_wait_s exit 2 naming the flag or field.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/sim/test_paths.h"
#include "tests/tools/process.h"

namespace twinps {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using testing::Process;

TEST(PsFailurePolicyFlagsTest, BadPoliciesExitTwoNamingTheFlagOrField) {
  {
    Process p = testing::twinps({"train", "--in-memory", "--ps-failure-policy", "repair"});
    ASSERT_TRUE(p.wait(60s));
    EXPECT_EQ(p.exit_code(), 2) << p.err();
    EXPECT_THAT(p.err(), HasSubstr("--ps-failure-policy must be raise, restore or rollback, not 'repair'"));
  }
  {
    const std::string scenario = (sim::testing::scenarios_dir() / "ps_failure_restore.textproto").string();
    Process p = testing::twinps({"sim", scenario, "--no-progress", "--ps-failure-policy", "repair"});
    ASSERT_TRUE(p.wait(60s));
    EXPECT_EQ(p.exit_code(), 2) << p.err();
    EXPECT_THAT(p.err(), HasSubstr("--ps-failure-policy must be raise, restore or rollback"));
  }
  const std::string dir = testing::temp_dir("ps-failure-flags");
  const std::string tutorial = (sim::testing::source_dir() / "examples/tutorial/model.textproto").string();
  std::ifstream in(tutorial);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const auto& [training, says] : std::vector<std::pair<std::string, std::string>>{
           {"training { ps_failure: \"repair\" ", "training.ps_failure"},
           {"training { ps_failure: \"restore\" ps_recovery_wait_s: 0 ", "training.ps_recovery_wait_s"}}) {
    const std::string spec = dir + "/spec.textproto";
    std::string edited = text;
    edited.replace(edited.find("training {"), std::string("training {").size(), training);
    std::ofstream(spec) << edited;
    Process p = testing::twinps({"train", "--in-memory", "--model", spec, "--train-data", "builtin:tutorial"});
    ASSERT_TRUE(p.wait(60s));
    EXPECT_EQ(p.exit_code(), 2) << p.err();
    EXPECT_THAT(p.err(), HasSubstr(says));
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace twinps
