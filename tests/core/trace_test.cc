// The Chrome trace writer: every file it writes is valid JSON, whatever the
// records hold (issue 9, point 5): numbers JSON cannot hold (NaN, +-Inf) are
// written as strings saying what they were, and names that are not valid
// UTF-8 have the bad bytes replaced (U+FFFD) instead of reaching the file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/runtime/trace.h"

namespace twinps {
namespace {

std::string temp_path(const char* name) {
  return ::testing::TempDir() + "/twinps_trace_" + name + "_" + std::to_string(::getpid()) + ".json";
}

nlohmann::json read(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);  // throws (fails the test) on invalid JSON
}

TEST(ChromeTraceWriterTest, NonFiniteNumbersAndInvalidUtf8StillMakeValidJson) {
  const std::string path = temp_path("nonfinite");
  {
    ChromeTraceWriter w(path);
    ASSERT_TRUE(w.ok()) << w.error();
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const double inf = std::numeric_limits<double>::infinity();
    const std::string bad_name = std::string("step\xff\xfe") + "\"quoted\"\n\x01";
    const std::string bad_key = "k\xc3";  // a truncated two-byte sequence
    w.span(TaskId::worker(0), "worker", bad_name, 1000, 500,
           {TraceArg{"nan", nan}, TraceArg{"inf", inf}, TraceArg{"minus_inf", -inf}, TraceArg{bad_key, 1},
            TraceArg{"text", 0, "caf\xe9"}});
    w.instant(TaskId::ps(1), "cat\x80", "ok", 2000, {TraceArg{"x", 0.25}});
    w.counter(TaskId::chief(), "loss", 3000, nan);
    w.set_info("task", std::string("chief\xff"));
    w.set_info("unix_origin_us", std::int64_t{1'700'000'000'000'000});
  }
  nlohmann::json doc = read(path);
  std::vector<nlohmann::json> events;
  for (const auto& e : doc["traceEvents"])
    if (e["ph"] != "M") events.push_back(e);
  ASSERT_EQ(events.size(), 3u);
  const auto& span = events[0];
  EXPECT_EQ(span["args"]["nan"], "NaN");
  EXPECT_EQ(span["args"]["inf"], "Infinity");
  EXPECT_EQ(span["args"]["minus_inf"], "-Infinity");
  EXPECT_EQ(span["args"]["k\xEF\xBF\xBD"], 1);  // the bad byte became U+FFFD
  EXPECT_EQ(span["args"]["text"], "caf\xEF\xBF\xBD");
  EXPECT_EQ(span["name"], "step\xEF\xBF\xBD\xEF\xBF\xBD\"quoted\"\n\x01");
  EXPECT_DOUBLE_EQ(span["ts"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(span["dur"].get<double>(), 0.5);
  EXPECT_EQ(events[1]["cat"], "cat\xEF\xBF\xBD");
  EXPECT_EQ(events[2]["args"]["value"], "NaN");
  EXPECT_EQ(doc["otherData"]["task"], "chief\xEF\xBF\xBD");
  EXPECT_EQ(doc["otherData"]["unix_origin_us"], 1'700'000'000'000'000);
  std::filesystem::remove(path);
}

// Tracks are named once, as Chrome's format wants: a process per job, a
// thread per task.
TEST(ChromeTraceWriterTest, NamesEachTrackOnce) {
  const std::string path = temp_path("tracks");
  {
    ChromeTraceWriter w(path);
    for (int i = 0; i < 3; ++i) w.instant(TaskId::worker(1), "c", "n", i);
    w.instant(TaskId::ps(0), "c", "n", 5);
    EXPECT_EQ(w.records(), 4u);
  }
  int thread_names = 0;
  const nlohmann::json doc = read(path);
  for (const auto& e : doc["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name") ++thread_names;
  EXPECT_EQ(thread_names, 2);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace twinps
