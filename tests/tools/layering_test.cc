// core/ is the one program both modes run, so it may not reach for what only
// one mode has: the simulator (sim/), the real runtime (net/, gRPC, Asio),
// threads, wall clocks or <random> (a simulated run must replay exactly, so
// every random draw comes from core/runtime/random.h and every time from an
// Executor). This test reads every source under core/ and fails naming each
// file, line and what it reaches for.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/sim/test_paths.h"
#include "tests/tools/read_file.h"

namespace twinps {
namespace {

namespace fs = std::filesystem;

struct Violation {
  std::string file;
  int line = 0;
  std::string what;
};

// Headers core may not include (angle brackets), by prefix.
const std::vector<std::string>& forbidden_system_headers() {
  static const std::vector<std::string> kHeaders = {
      "thread", "mutex", "shared_mutex", "condition_variable", "future", "atomic", "semaphore", "stop_token",
      "barrier", "latch", "random", "chrono", "ctime", "time.h", "sys/time.h", "pthread.h", "boost/asio",
      "boost/process", "grpc", "grpcpp/", "asio", "spdlog/"};
  return kHeaders;
}

// Names core may not use, even through another header.
const std::vector<std::string>& forbidden_names() {
  static const std::vector<std::string> kNames = {
      "std::thread", "std::jthread", "std::mutex", "std::atomic", "std::async", "steady_clock", "system_clock",
      "high_resolution_clock", "random_device", "mt19937", "default_random_engine", "clock_gettime",
      "gettimeofday", "pthread_", "grpc::", "boost::asio", "asio::"};
  return kNames;
}

// A quoted include is core's own ("core/..."), Abseil's status types, or a
// header generated from one of core's protos ("model/model_spec.pb.h").
bool allowed_quoted_include(const std::string& path, const fs::path& core) {
  if (path.rfind("core/", 0) == 0 || path.rfind("absl/", 0) == 0) return true;
  const std::string suffix = ".pb.h";
  if (path.size() > suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0)
    return fs::exists(core / (path.substr(0, path.size() - suffix.size()) + ".proto"));
  return false;
}

// The line without its // comment (a comment may name what code may not use).
std::string code_of(const std::string& line) {
  const auto at = line.find("//");
  return at == std::string::npos ? line : line.substr(0, at);
}

// What one core source reaches for that core may not.
std::vector<Violation> check_source(const std::string& file, const std::string& text, const fs::path& core) {
  static const std::regex kInclude(R"(^\s*#\s*include\s*([<"])([^>"]+)[>"])");
  std::vector<Violation> out;
  std::istringstream in(text);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    std::smatch m;
    if (std::regex_search(line, m, kInclude)) {
      const std::string path = m[2];
      if (m[1] == "<") {
        for (const auto& h : forbidden_system_headers())
          if (path == h || (path.rfind(h, 0) == 0 && (h.back() == '/' || path[h.size()] == '/' || path[h.size()] == '.')))
            out.push_back({file, number, "includes <" + path + ">"});
      } else if (!allowed_quoted_include(path, core)) {
        out.push_back({file, number, "includes \"" + path + "\" (not core's)"});
      }
      continue;
    }
    const std::string code = code_of(line);
    for (const auto& name : forbidden_names())
      if (code.find(name) != std::string::npos) out.push_back({file, number, "uses " + name});
  }
  return out;
}

TEST(LayeringTest, CoreNamesNoSimNetThreadsClocksOrRandom) {
  const fs::path core = sim::testing::source_dir() / "core";
  int files = 0;
  std::vector<Violation> all;
  for (const auto& e : fs::recursive_directory_iterator(core)) {
    const auto ext = e.path().extension();
    if (!e.is_regular_file() || (ext != ".cc" && ext != ".h" && ext != ".in")) continue;
    ++files;
    for (auto& v : check_source(fs::relative(e.path(), core.parent_path()).string(), testing::read_file(e.path()), core))
      all.push_back(std::move(v));
  }
  EXPECT_GT(files, 50) << "core/ was not found at " << core;
  for (const auto& v : all) ADD_FAILURE() << v.file << ":" << v.line << ": core " << v.what;
}

// The checker itself catches each kind of reach, and passes what core uses.
TEST(LayeringTest, TheCheckerCatchesEachKind) {
  const fs::path core = sim::testing::source_dir() / "core";
  const std::string bad =
      "#include \"sim/network.h\"\n"
      "#include \"net/grpc_transport.h\"\n"
      "#include <thread>\n"
      "#include <chrono>\n"
      "#include <random>\n"
      "#include <boost/asio/io_context.hpp>\n"
      "#include <grpcpp/grpcpp.h>\n"
      "auto t = std::chrono::steady_clock::now();\n"
      "std::mt19937 gen;\n";
  EXPECT_EQ(check_source("x.cc", bad, core).size(), 9u);
  const std::string good =
      "#include <vector>\n"
      "#include <string_view>\n"
      "#include \"core/runtime/executor.h\"\n"
      "#include \"model/model_spec.pb.h\"\n"
      "#include \"absl/status/status.h\"\n"
      "// never std::thread here: an Executor runs everything\n"
      "Time t = executor.now();\n";
  for (const auto& v : check_source("y.cc", good, core)) ADD_FAILURE() << v.line << ": " << v.what;
}

}  // namespace
}  // namespace twinps
