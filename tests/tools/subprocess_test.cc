// Child (tools/subprocess.h): the process handle bench, tune, calibrate and
// the integration tests share. Its output files live in a temp dir of its
// own unless the caller names one; that dir goes with the handle, so long
// sweeps do not fill /tmp (tens of thousands were left behind before).
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "tests/tools/process.h"

namespace twinps {
namespace {

using namespace std::chrono_literals;
using testing::Process;
namespace fs = std::filesystem;

TEST(ChildTest, ItsOwnOutputDirGoesWithTheHandle) {
  fs::path dir;
  {
    Process echo = Process::start({"/bin/echo", "hello"});
    ASSERT_TRUE(echo.wait(30s));
    EXPECT_EQ(echo.exit_code(), 0);
    EXPECT_EQ(echo.out(), "hello\n");
    dir = fs::path(echo.out_file()).parent_path();
    ASSERT_TRUE(fs::exists(dir));
    Process moved = std::move(echo);  // the dir follows the handle
    EXPECT_TRUE(fs::exists(dir));
    EXPECT_EQ(moved.out(), "hello\n");
  }
  EXPECT_FALSE(fs::exists(dir)) << dir;
}

TEST(ChildTest, ACallersDirStays) {
  const std::string dir = testing::temp_dir("child-dir");
  {
    Process echo = Process::start({"/bin/echo", "kept"}, {}, dir, "echo");
    ASSERT_TRUE(echo.wait(30s));
    EXPECT_EQ(echo.out_file(), dir + "/echo.out");
  }
  EXPECT_TRUE(fs::exists(dir + "/echo.out"));
  fs::remove_all(dir);
}

TEST(ChildTest, AProgramThatCannotStartExits127WithTheReason) {
  Process missing = Process::start({"/nonexistent/twinps-child"});
  EXPECT_FALSE(missing.started());
  EXPECT_EQ(missing.exit_code(), 127);
  EXPECT_EQ(missing.err(), "cannot start /nonexistent/twinps-child: No such file or directory\n");
}

TEST(ChildTest, ExtraEnvironmentEntriesAddToOrReplaceThisProcesss) {
  ::setenv("TWINPS_CHILD_TEST_KEPT", "kept", 1);
  ::setenv("TWINPS_CHILD_TEST_REPLACED", "old", 1);
  Process env = Process::start({"/usr/bin/env"}, {"TWINPS_CHILD_TEST_REPLACED=new", "TWINPS_CHILD_TEST_ADDED=added"});
  ASSERT_TRUE(env.wait(30s));
  ::unsetenv("TWINPS_CHILD_TEST_KEPT");
  ::unsetenv("TWINPS_CHILD_TEST_REPLACED");
  std::vector<std::string> ours;
  std::istringstream lines(env.out());
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("TWINPS_CHILD_TEST_", 0) == 0) ours.push_back(line);
  std::sort(ours.begin(), ours.end());
  EXPECT_EQ(ours, (std::vector<std::string>{"TWINPS_CHILD_TEST_ADDED=added", "TWINPS_CHILD_TEST_KEPT=kept",
                                            "TWINPS_CHILD_TEST_REPLACED=new"}));
}

// Starting a child must not write-protect this process's memory: after
// fork() every page takes a fault on its next write, even once the child
// has exec'd (12 us a page here, tools/subprocess.h). Counted in faults of
// this thread, not timed.
TEST(ChildTest, StartingOneLeavesThisProcesssPagesWritable) {
  constexpr std::size_t kPage = 4096, kPages = 8192;  // 32 MiB
  std::vector<char> memory(kPages * kPage, 1);
  auto write_every_page = [&memory](char value) {
    for (std::size_t i = 0; i < memory.size(); i += kPage) memory[i] = value;
  };
  auto minor_faults = [] {
    rusage usage{};
    ::getrusage(RUSAGE_THREAD, &usage);
    return usage.ru_minflt;
  };
  write_every_page(2);  // every page faulted in before counting
  Process child = Process::start({"/bin/true"});
  ASSERT_TRUE(child.wait(30s));
  const long before = minor_faults();
  write_every_page(3);
  EXPECT_LT(minor_faults() - before, static_cast<long>(kPages / 8));
}

TEST(ScratchDirTest, GoesWithItsContentsWhenTheHandleDoes) {
  std::string path;
  {
    const cli::ScratchDir scratch("scratch-test");
    path = scratch.path();
    ASSERT_TRUE(fs::is_directory(path));
    fs::create_directories(path + "/nested");
    std::ofstream(path + "/nested/log") << "output";
  }
  EXPECT_FALSE(fs::exists(path));
}

}  // namespace
}  // namespace twinps
