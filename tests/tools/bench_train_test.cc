// `twinps bench train --model`: the training benchmark runs a user's model
// spec on data files, as `twinps train` would, and reports its examples/s;
// here the sparse-embedding benchmark's model shrunk to a 1,000-row table
// (the real 1M x 64 table takes minutes to create under ThreadSanitizer) on a
// small generated click log with uniform ids, one run in one process.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "tests/sim/test_paths.h"
#include "tests/tools/process.h"

namespace twinps {
namespace {

using namespace std::chrono_literals;
using testing::Process;

using testing::twinps;

TEST(BenchTrainTest, TrainsAModelSpecOnDataFilesAndReportsItsRate) {
  const std::string dir = testing::temp_dir("bench_train");
  Process gen = twinps({"datagen", "ctr", "--out", dir, "--examples", "20000", "--train-files", "2",
                        "--zipf-exponent", "0", "--max-vocabulary", "1000"});
  ASSERT_TRUE(gen.wait(120s));
  ASSERT_EQ(gen.exit_code(), 0) << gen.err();
  // examples/sparse_embedding/model.textproto with column C26's vocabulary
  // (--max-vocabulary) and the table cut to 1,000 x 8.
  std::string text;
  {
    std::ifstream in(sim::testing::source_dir() / "examples/sparse_embedding/model.textproto");
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"identity_buckets: 1000000", "identity_buckets: 1000"}, {"dim: 64", "dim: 8"}}) {
    const auto at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
  }
  const std::string spec = dir + "/model.textproto";
  std::ofstream(spec) << text;
  Process bench = twinps({"bench", "train", "--model", spec, "--train-data", dir + "/train-*", "--where",
                          "in-process", "--workers", "2", "--ps", "1", "--repeats", "1", "--steps-per-execution", "5"});
  ASSERT_TRUE(bench.wait(600s)) << "bench train did not finish";
  ASSERT_EQ(bench.exit_code(), 0) << bench.err() << bench.out();
  EXPECT_NE(bench.out().find(spec + " on " + dir + "/train-*"), std::string::npos)
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
