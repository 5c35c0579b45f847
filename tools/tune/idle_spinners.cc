#include "tools/tune/idle_spinners.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "absl/status/status.h"

namespace twinps::cli {

namespace {
constexpr const char* kSpinning = "spinning at idle priority";
}  // namespace

StatusOr<IdleSpinners> IdleSpinners::start(double seconds, const std::string& dir) {
  IdleSpinners s;
  const long cores = std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN));
  char limit[32];
  std::snprintf(limit, sizeof limit, "%.0f", seconds);
  for (long c = 0; c < cores; ++c) {
    s.spinners_.push_back(
        Child::start({self_binary(), "calibrate", "--idle-spinner", limit}, {}, dir, "spinner" + std::to_string(c)));
    if (!s.spinners_.back().wait_for_output(kSpinning, std::chrono::seconds(30)))
      return absl::UnavailableError("an idle-priority spinner did not start: " + s.spinners_.back().err());
  }
  return s;
}

int spin_at_idle_priority(double seconds) {
  sched_param param{};
  param.sched_priority = 0;
  if (::sched_setscheduler(0, SCHED_IDLE, &param) != 0) {
    std::fprintf(stderr, "twinps calibrate --idle-spinner: SCHED_IDLE refused: %s\n", std::strerror(errno));
    return 1;
  }
  std::printf("%s\n", kSpinning);
  std::fflush(stdout);
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  volatile unsigned long spins = 0;
  // The clock is read every few million spins: the loop is the point.
  while (std::chrono::steady_clock::now() < end)
    for (int i = 0; i < (1 << 22); ++i) spins = spins + 1;
  return 0;
}

}  // namespace twinps::cli
