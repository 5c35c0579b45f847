#include "tools/tune/busy_neighbours.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>

#include "absl/status/status.h"
#include "core/models/synthetic/synthetic.h"

namespace twinps::cli {

namespace {
constexpr const char* kComputing = "computing beside the calibration";
}  // namespace

StatusOr<BusyNeighbours> BusyNeighbours::start(double seconds, const std::string& dir) {
  BusyNeighbours s;
  const long cores = std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN));
  char limit[32];
  std::snprintf(limit, sizeof limit, "%.0f", seconds);
  for (long c = 0; c < cores; ++c) {
    s.neighbours_.push_back(
        Child::start({self_binary(), "calibrate", "--busy-neighbour", limit}, {}, dir, "neighbour" + std::to_string(c)));
    if (!s.neighbours_.back().wait_for_output(kComputing, std::chrono::seconds(30)))
      return absl::UnavailableError("a busy neighbour did not start: " + s.neighbours_.back().err());
  }
  return s;
}

int compute_as_a_neighbour(double seconds) {
  // A mid-sized shape of the grid's models: about 1 ms a call here, so the
  // clock is read often enough to stop on time.
  const Matrix w = Matrix::Constant(512, 256, 0.01f);
  std::printf("%s\n", kComputing);
  std::fflush(stdout);
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  float sink = 0;
  while (std::chrono::steady_clock::now() < end) sink += synthetic::compute_gradient(w, 64)(0, 0);
  return std::isnan(sink) ? 1 : 0;  // a NaN would mean the kernel broke
}

}  // namespace twinps::cli
