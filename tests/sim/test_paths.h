#pragma once
// Where the tests find the repository's scenarios and the built twinps binary,
// without build-system plumbing: the sources are found from this file's path,
// the binary beside the running test binary (both land in <build>/bin).
#include <unistd.h>

#include <climits>
#include <filesystem>
#include <string>

namespace twinps::sim::testing {

inline std::filesystem::path source_dir() {
  return std::filesystem::path(__FILE__).parent_path().parent_path().parent_path();
}
inline std::filesystem::path scenarios_dir() { return source_dir() / "scenarios"; }

inline std::filesystem::path twinps_binary() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "twinps";
  buf[n] = '\0';
  return std::filesystem::path(buf).parent_path() / "twinps";
}

}  // namespace twinps::sim::testing
