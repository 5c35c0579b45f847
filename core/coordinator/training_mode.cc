#include "core/coordinator/training_mode.h"

#include <algorithm>
#include <limits>

namespace twinps {

const char* training_mode_name(TrainingMode mode) {
  switch (mode) {
    case TrainingMode::kAsync: return "async";
    case TrainingMode::kSsp: return "ssp";
    case TrainingMode::kSync: return "sync";
  }
  return "?";
}

std::int64_t SspClock::slowest() const {
  std::int64_t low = std::numeric_limits<std::int64_t>::max();
  for (std::size_t i = 0; i < clocks_.size(); ++i)
    if (live_[i]) low = std::min(low, clocks_[i]);
  return low == std::numeric_limits<std::int64_t>::max() ? 0 : low;
}

void SspClock::rejoin(int w) {
  const auto i = static_cast<std::size_t>(w);
  bool others = false;
  for (std::size_t j = 0; j < live_.size(); ++j) others = others || (j != i && live_[j]);
  if (others) {
    live_[i] = false;
    clocks_[i] = slowest();
  }
  live_[i] = true;
}

}  // namespace twinps
