#pragma once
// Child processes for integration tests: the real `twinps` binary, started and
// stopped with the CLI's own process handling (tools/subprocess.h), so tests
// and the bench/tune commands share one implementation. A handle stops only
// the process it started.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "tools/subprocess.h"

namespace twinps::testing {

using Process = cli::Child;

// Path of the twinps binary under test (set by CMake).
inline std::string twinps_binary() { return TWINPS_BINARY; }

// A bound on how long a child may take before the test calls it hung: the
// plain build's bound, four times over in a sanitized build (a calibration
// that takes about a minute took 264 s alone under ASan + UBSan, 2026-12-02).
// A hang guard, never a speed assertion: the ctest timeout is scaled alike
// (tests/CMakeLists.txt).
inline constexpr std::chrono::seconds hang_bound(std::chrono::seconds plain) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return 4 * plain;
#else
  return plain;
#endif
}

// Starts the twinps binary under test with `args` (the command and its flags).
inline Process twinps(std::vector<std::string> args) {
  args.insert(args.begin(), twinps_binary());
  return Process::start(std::move(args));
}

namespace detail {
// The temp dirs this test process made. At exit they are removed if every
// test passed (a suite run again and again must not fill /tmp) and kept, with
// their paths printed, if one failed or TWINPS_KEEP_TEST_DIRS is set: the
// children's logs in them are what a failure is diagnosed from.
class TempDirs {
 public:
  static TempDirs& instance() {
    static TempDirs dirs;  // constructed after gtest's UnitTest, so destroyed before it
    return dirs;
  }
  void add(const std::string& path) {
    std::lock_guard lock(mu_);
    paths_.push_back(path);
  }
  ~TempDirs() {
    const bool keep = std::getenv("TWINPS_KEEP_TEST_DIRS") != nullptr || ::testing::UnitTest::GetInstance()->Failed();
    std::error_code ignored;
    for (const auto& p : paths_) {
      if (!keep) std::filesystem::remove_all(p, ignored);
      else if (std::filesystem::exists(p, ignored)) std::fprintf(stderr, "kept test dir %s\n", p.c_str());
    }
  }

 private:
  TempDirs() { ::testing::UnitTest::GetInstance(); }
  std::mutex mu_;
  std::vector<std::string> paths_;
};
}  // namespace detail

// A fresh empty directory under the system's temp dir, removed when the test
// process ends if all its tests passed (detail::TempDirs).
inline std::string temp_dir(const std::string& tag) {
  std::string path = cli::make_temp_dir(tag);
  detail::TempDirs::instance().add(path);
  return path;
}

}  // namespace twinps::testing
