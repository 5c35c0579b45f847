#pragma once
// How much memory this process may still use: the smallest of its address
// space and data limits (ulimit -v / -d, less what it already uses), its
// cgroup's memory.max (containers, systemd), and the machine's physical
// memory. `twinps sim` compares a scenario's estimate with it before running
// (sim/resource_estimate.h).
#include <sys/resource.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace twinps::cli {

struct MemoryLimit {
  double bytes = 0;  // 0: none found
  std::string source;
};

namespace detail {
// A "Key:   123 kB" line of a /proc file, in bytes; 0 if absent.
inline double proc_kb(const char* path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key + ":", 0) == 0) return std::atof(line.c_str() + key.size() + 1) * 1024.0;
  return 0;
}
inline double file_number(const char* path) {
  std::ifstream in(path);
  std::string v;
  if (!(in >> v) || v == "max") return 0;
  return std::atof(v.c_str());
}
}  // namespace detail

inline MemoryLimit memory_limit() {
  MemoryLimit best;
  auto consider = [&](double bytes, std::string source) {
    if (bytes > 0 && (best.bytes == 0 || bytes < best.bytes)) best = MemoryLimit{bytes, std::move(source)};
  };
  rlimit r{};
  if (::getrlimit(RLIMIT_AS, &r) == 0 && r.rlim_cur != RLIM_INFINITY)
    consider(static_cast<double>(r.rlim_cur) - detail::proc_kb("/proc/self/status", "VmSize"),
             "the address-space limit (ulimit -v) less what this process maps already");
  if (::getrlimit(RLIMIT_DATA, &r) == 0 && r.rlim_cur != RLIM_INFINITY)
    consider(static_cast<double>(r.rlim_cur) - detail::proc_kb("/proc/self/status", "VmData"),
             "the data-segment limit (ulimit -d) less what this process uses already");
  const double rss = detail::proc_kb("/proc/self/status", "VmRSS");
  if (double cg = detail::file_number("/sys/fs/cgroup/memory.max"); cg > 0)
    consider(cg - rss, "the cgroup's memory.max");
  else if (double cg1 = detail::file_number("/sys/fs/cgroup/memory/memory.limit_in_bytes"); cg1 > 0 && cg1 < 1e18)
    consider(cg1 - rss, "the cgroup's memory limit");
  consider(detail::proc_kb("/proc/meminfo", "MemTotal") - rss, "the machine's physical memory");
  return best;
}

}  // namespace twinps::cli
