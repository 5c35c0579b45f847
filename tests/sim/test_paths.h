#pragma once
// Where the tests find the repository's scenarios and the built twinps binary,
// without build-system plumbing: the sources are found from this file's path,
// the binary beside the running test binary (both land in <build>/bin).
#include <unistd.h>

#include <climits>
#include <filesystem>
#include <string>

namespace twinps::sim::testing {

inline std::filesystem::path self_binary() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return {};
  buf[n] = '\0';
  return std::filesystem::path(buf);
}

inline std::filesystem::path source_dir() {
  std::filesystem::path here(__FILE__);
  // ccache's base_dir rewrites __FILE__ relative to the compiler's working
  // directory, the build directory: the parent of <build>/bin.
  if (here.is_relative()) here = self_binary().parent_path().parent_path() / here;
  return here.lexically_normal().parent_path().parent_path().parent_path();
}
inline std::filesystem::path scenarios_dir() { return source_dir() / "scenarios"; }

inline std::filesystem::path twinps_binary() {
  const std::filesystem::path self = self_binary();
  if (self.empty()) return "twinps";
  return self.parent_path() / "twinps";
}

}  // namespace twinps::sim::testing
