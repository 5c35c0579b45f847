// The real `twinps model` binary: a valid spec prints its variables per ps
// and a step's cost; a malformed one exits 2 naming file:line:column and field.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/sim/test_paths.h"
#include "tests/tools/process.h"

namespace twinps {
namespace {

using namespace std::chrono_literals;
using testing::Process;

Process model(std::vector<std::string> args) {
  args.insert(args.begin(), {testing::twinps_binary(), "model"});
  return Process::start(std::move(args));
}

TEST(ModelCliTest, ShowsTheTutorialSpecsVariablesOnTwoPs) {
  Process p = model({(sim::testing::source_dir() / "examples/tutorial/model.textproto").string(), "--ps", "2"});
  ASSERT_TRUE(p.wait(60s));
  ASSERT_EQ(p.exit_code(), 0) << p.err();
  EXPECT_NE(p.out().find("embedding/embeddings         8 x 20             2 shards  ps 0, 1"), std::string::npos)
      << p.out();
  EXPECT_NE(p.out().find("rows  7.7 distinct of 8 per step"), std::string::npos) << p.out();
}

TEST(ModelCliTest, AMalformedSpecExitsTwoNamingTheField) {
  const std::string dir = testing::temp_dir("model-cli");
  const std::string path = dir + "/model.textproto";
  std::ofstream(path) << "input { name: \"x\" dense { width: 2 } }\n"
                         "label { column: \"y\" }\n"
                         "layer { name: \"d\" input: \"z\" dense { units: 1 } }\n"
                         "head { input: \"d\" loss: BINARY_CROSS_ENTROPY }\n";
  Process p = model({path});
  ASSERT_TRUE(p.wait(60s));
  EXPECT_EQ(p.exit_code(), 2);
  EXPECT_NE(p.err().find(path + ":3:19: layer[0].input[0]: \"z\" names no input or earlier layer"), std::string::npos)
      << p.err();
  Process missing = model({dir + "/none.textproto"});
  ASSERT_TRUE(missing.wait(60s));
  EXPECT_EQ(missing.exit_code(), 2);
  EXPECT_NE(missing.err().find("none.textproto: cannot read the model spec"), std::string::npos) << missing.err();
  std::filesystem::remove_all(dir);
}

// Optimizer groups: each variable shows the rule its group gives it, and a
// group naming a layer or a variable the model does not have exits 2 at the
// name, with the field.
// examples/custom_model's layer type is registered by its own program, not
// by twinps: the stock binary refuses the spec at the type, exit 2.
TEST(ModelCliTest, ACustomLayerTypeTwinpsDoesNotHaveExitsTwoAtTheType) {
  const std::string spec = (sim::testing::source_dir() / "examples/custom_model/model.textproto").string();
  // The error is at the `type` field: its line in the file, column 5.
  std::ifstream in(spec);
  int type_line = 0;
  std::string line;
  for (int n = 1; type_line == 0 && std::getline(in, line); ++n)
    if (line == "    type: \"rbf\"") type_line = n;
  ASSERT_GT(type_line, 0) << "examples/custom_model/model.textproto has no line '    type: \"rbf\"'";
  Process p = model({spec});
  ASSERT_TRUE(p.wait(60s));
  EXPECT_EQ(p.exit_code(), 2);
  EXPECT_NE(p.err().find(spec + ":" + std::to_string(type_line) +
                         ":5: layer[0].custom.type: no custom layer type \"rbf\" is registered in this "
                         "program (it registers none; see docs/extending.md)"),
            std::string::npos)
      << p.err();
}

TEST(ModelCliTest, OptimizerGroupsShowPerVariableAndUnknownNamesExitTwo) {
  const std::string dir = testing::temp_dir("model-cli-groups");
  const std::string spec = "input { name: \"ids\" categorical { type: INT64 identity_buckets: 10 } }\n"
                           "label { column: \"y\" }\n"
                           "layer { name: \"e\" input: \"ids\" embedding { dim: 4 } }\n"
                           "layer { name: \"d\" input: \"e\" dense { units: 1 } }\n"
                           "head { input: \"d\" loss: BINARY_CROSS_ENTROPY }\n";
  const std::string good = dir + "/good.textproto";
  std::ofstream(good) << spec << "optimizer { layer: \"e\" adagrad {} }\n"
                      << "optimizer { adam {} learning_rate { constant: 0.01 } }\n";
  Process ok = model({good});
  ASSERT_TRUE(ok.wait(60s));
  ASSERT_EQ(ok.exit_code(), 0) << ok.err();
  EXPECT_NE(ok.out().find("ps 0  adagrad(lr=0.001"), std::string::npos) << ok.out();
  EXPECT_NE(ok.out().find("d/kernel"), std::string::npos) << ok.out();
  EXPECT_NE(ok.out().find("ps 0  adam(lr=0.01"), std::string::npos) << ok.out();

  const std::string bad = dir + "/bad.textproto";
  std::ofstream(bad) << spec << "optimizer { layer: \"embedding\" adagrad {} }\n"
                     << "optimizer { variable: \"d/weights\" sgd {} }\n"
                     << "optimizer { adam {} }\n";
  Process p = model({bad});
  ASSERT_TRUE(p.wait(60s));
  EXPECT_EQ(p.exit_code(), 2);
  EXPECT_NE(p.err().find(bad + ":6:13: optimizer[0].layer[0]: \"embedding\" names no layer"), std::string::npos)
      << p.err();
  EXPECT_NE(p.err().find(bad + ":7:13: optimizer[1].variable[0]: \"d/weights\" names no variable"), std::string::npos)
      << p.err();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace twinps
