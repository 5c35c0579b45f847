// `twinps bench train --model`: the training benchmark runs a user's model
// spec on data files, as `twinps train` would, and reports its examples/s;
// here the sparse-embedding benchmark (1M x 64 table, uniform ids) on a small
// generated click log, shortened to one run in one process.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>

#include "tests/sim/test_paths.h"
#include "tests/tools/process.h"

namespace twinps {
namespace {

using namespace std::chrono_literals;
using testing::Process;

Process twinps(std::vector<std::string> args) {
  args.insert(args.begin(), testing::twinps_binary());
  return Process::start(std::move(args));
}

TEST(BenchTrainTest, TrainsAModelSpecOnDataFilesAndReportsItsRate) {
  const std::string dir = testing::temp_dir("bench_train");
  Process gen = twinps({"datagen", "ctr", "--out", dir, "--examples", "20000", "--train-files", "2",
                        "--zipf-exponent", "0"});
  ASSERT_TRUE(gen.wait(120s));
  ASSERT_EQ(gen.exit_code(), 0) << gen.err();
  const std::string spec = (sim::testing::source_dir() / "examples/sparse_embedding/model.textproto").string();
  Process bench = twinps({"bench", "train", "--model", spec, "--train-data", dir + "/train-*", "--where",
                          "in-process", "--workers", "2", "--ps", "1", "--repeats", "1", "--steps-per-execution", "5"});
  ASSERT_TRUE(bench.wait(600s)) << "bench train did not finish";
  ASSERT_EQ(bench.exit_code(), 0) << bench.err() << bench.out();
  EXPECT_NE(bench.out().find("sparse_embedding/model.textproto on " + dir + "/train-*"), std::string::npos)
      << bench.out();
  std::smatch m;
  const std::string out = bench.out();
  ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(in-process, steps-per-execution 5 +([0-9]+) examples/s)")))
      << out;
  EXPECT_GT(std::stod(m[1].str()), 0.0);
  std::filesystem::remove_all(dir);
}

TEST(BenchTrainTest, ModelWithoutDataExitsTwo) {
  Process p = twinps({"bench", "train", "--model", "spec.textproto"});
  ASSERT_TRUE(p.wait(30s));
  EXPECT_EQ(p.exit_code(), 2) << p.err();
  EXPECT_NE(p.err().find("--model and --train-data go together"), std::string::npos) << p.err();
}

}  // namespace
}  // namespace twinps
