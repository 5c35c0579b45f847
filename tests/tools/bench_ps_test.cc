// `twinps bench ps --optimizer`: what a push does on the ps, so that a
// comparison with a store-only server (ps-lite's default handler) is like
// for like.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "tests/tools/process.h"

namespace twinps {
namespace {

using namespace std::chrono_literals;
using testing::Process;
using testing::twinps;

TEST(BenchPsTest, EachOptimizerChoiceRunsAndSaysWhichItWas) {
  struct Case {
    const char* optimizer;
    const char* pull;  // rows: a store-only ps assigns sparse pushes row by row
  };
  for (const Case c : {Case{"none", "dense"}, Case{"none", "rows"}, Case{"adam", "dense"}}) {
    SCOPED_TRACE(std::string(c.optimizer) + ", " + c.pull + " pulls");
    // Two seconds of warmup: the load generator must have started and
    // connected before the window opens, under ThreadSanitizer too.
    Process p = twinps({"bench", "ps", "--optimizer", c.optimizer, "--values-per-key", "65536", "--rows", "64",
                        "--pull", c.pull, "--repeats", "1", "--window", "0.5", "--warmup", "2"});
    ASSERT_TRUE(p.wait(120s)) << "bench ps did not finish";
    ASSERT_EQ(p.exit_code(), 0) << p.err();
    const std::string out = p.out();
    EXPECT_NE(out.find(std::string("optimizer ") + c.optimizer), std::string::npos) << out;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(push->pull pairs/s\s+([0-9]+))"))) << out;
    EXPECT_GT(std::stoi(m[1]), 0) << out;
  }
}

// The figure beside the machine's limit for one connection, measured just
// before and after the windows: one loopback TCP stream, and one Unix socket
// stream on the default plane (which uses it between tasks of one host).
TEST(BenchPsTest, PrintsTheStreamsAroundItsWindowsAndTheRatioToThem) {
  Process p = twinps({"bench", "ps", "--values-per-key", "65536", "--repeats", "1", "--window", "0.5", "--warmup", "2"});
  ASSERT_TRUE(p.wait(120s)) << "bench ps did not finish";
  ASSERT_EQ(p.exit_code(), 0) << p.err();
  const std::string out = p.out();
  std::smatch wire;
  ASSERT_TRUE(std::regex_search(out, wire, std::regex(R"(GB/s \(push\+pull bytes\)\s+([0-9.]+))"))) << out;
  for (const std::string name : {"loopback TCP", "Unix socket"}) {
    SCOPED_TRACE(name);
    std::smatch s, r;
    ASSERT_TRUE(std::regex_search(
        out, s,
        std::regex("one " + name + R"( stream GB/s, before and after\s+([0-9.]+)\s+\(([0-9.]+) before, ([0-9.]+) after\))")))
        << out;
    const double stream = std::stod(s[1]), before = std::stod(s[2]), after = std::stod(s[3]);
    EXPECT_GT(before, 0);
    EXPECT_GT(after, 0);
    EXPECT_NEAR(stream, (before + after) / 2, 0.002);
    ASSERT_TRUE(std::regex_search(out, r, std::regex("push\\+pull bytes / one " + name + R"( stream\s+([0-9.]+)x)"))) << out;
    EXPECT_NEAR(std::stod(r[1]), std::stod(wire[1]) / stream, 0.01 + 0.01 * std::stod(r[1]));
  }
}

}  // namespace
}  // namespace twinps
