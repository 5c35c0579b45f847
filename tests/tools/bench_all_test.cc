// `twinps bench all`: the standard measurements beside the machine's limits
// in one run, written as a Markdown table; here its shortened set.
#include <gtest/gtest.h>

#include <filesystem>
#include <iterator>
#include <regex>
#include <string>

#include "tests/tools/process.h"
#include "tests/tools/read_file.h"

namespace twinps {
namespace {

using namespace std::chrono_literals;
using testing::Process;
using testing::twinps;

TEST(BenchAllTest, QuickRunReportsFiguresBesideTheMachinesLimits) {
  const std::string dir = testing::temp_dir("bench_all");
  const std::string report = dir + "/report.md";
  Process p = twinps({"bench", "all", "--quick", "--repeats", "1", "--window", "0.2", "--report", report});
  ASSERT_TRUE(p.wait(300s)) << "bench all did not finish";
  ASSERT_EQ(p.exit_code(), 0) << p.err();
  const std::string md = testing::read_file(report);
  EXPECT_NE(md.find("| figure | value | held against | ratio |"), std::string::npos) << md;
  // The limits, measured in this run, as positive rates.
  for (const char* limit : {"machine: one loopback TCP stream, 64 MiB \\| ", "machine: one Unix socket stream, 64 MiB \\| ",
                            "machine: memcpy, 256 MiB \\| "}) {
    std::smatch m;
    ASSERT_TRUE(std::regex_search(md, m, std::regex(std::string(limit) + "([0-9.]+) GB/s"))) << limit << "\n" << md;
    EXPECT_GT(std::stod(m[1]), 0) << limit;
  }
  // Push/pull held against the stream measured around it, with the ratio of the two.
  std::smatch ps;
  ASSERT_TRUE(std::regex_search(
      md, ps,
      std::regex(
          R"(bytes both ways \| ([0-9.]+) GB/s \| one loopback TCP stream just before and after: ([0-9.]+) GB/s \| ([0-9.]+)x)")))
      << md;
  EXPECT_GT(std::stod(ps[2]), 0);
  EXPECT_NEAR(std::stod(ps[3]), std::stod(ps[1]) / std::stod(ps[2]), 0.01 + 0.02 * std::stod(ps[3]));
  // The planes between processes of one host: TCP, the Unix socket, and the Unix socket with shared memory, each
  // against its own stream.
  EXPECT_TRUE(std::regex_search(
      md, std::regex(R"(1 ps x 1 workers, TCP: bytes both ways \| [0-9.]+ GB/s \| one loopback TCP stream just before)")))
      << md;
  EXPECT_TRUE(std::regex_search(
      md, std::regex(R"(1 ps x 1 workers, Unix socket: bytes both ways \| [0-9.]+ GB/s \| one Unix socket stream just before)")))
      << md;
  EXPECT_TRUE(std::regex_search(
      md,
      std::regex(R"(1 ps x 1 workers, shared memory: bytes both ways \| [0-9.]+ GB/s \| one Unix socket stream just before)")))
      << md;
  EXPECT_TRUE(std::regex_search(md, std::regex(R"(tutorial, .* \| [1-9][0-9]* examples/s)"))) << md;
  EXPECT_TRUE(std::regex_search(md, std::regex(R"(simulated / wall time \| [0-9.]+x)"))) << md;
  EXPECT_NE(md.find("load average"), std::string::npos) << md;
  std::filesystem::remove_all(dir);
}

TEST(BenchAllTest, BadFlagsExitTwoNamingThem) {
  Process bad_report = twinps({"bench", "all", "--quick", "--report", "/no/such/dir/report.md"});
  ASSERT_TRUE(bad_report.wait(60s));
  EXPECT_EQ(bad_report.exit_code(), 2);
  EXPECT_NE(bad_report.err().find("--report"), std::string::npos) << bad_report.err();
  Process bad_repeats = twinps({"bench", "all", "--repeats", "0"});
  ASSERT_TRUE(bad_repeats.wait(60s));
  EXPECT_EQ(bad_repeats.exit_code(), 2);
  EXPECT_NE(bad_repeats.err().find("--repeats"), std::string::npos) << bad_repeats.err();
}

}  // namespace
}  // namespace twinps
