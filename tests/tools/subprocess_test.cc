// Child (tools/subprocess.h): the process handle bench, tune, calibrate and
// the integration tests share. Its output files live in a temp dir of its
// own unless the caller names one; that dir goes with the handle, so long
// sweeps do not fill /tmp (tens of thousands were left behind before).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

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
