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

int SyncSteps::required() const {
  const int live = static_cast<int>(std::count(live_.begin(), live_.end(), true));
  return std::min(workers_ - backup_, live);
}

std::int64_t SyncSteps::start(int w) {
  joined_[index(w)] = true;
  ++running_;
  return step_;
}

void SyncSteps::finish(int w, std::int64_t step, bool completed) {
  if (step != step_) return;
  --running_;
  if (completed) {
    ++completed_;
  } else {
    joined_[index(w)] = false;
  }
}

bool SyncSteps::ready(bool work_queued) const {
  if (completed_ == 0) return false;
  return completed_ >= required() || (running_ == 0 && !work_queued);
}

void SyncSteps::advance() {
  ++step_;
  running_ = 0;
  completed_ = 0;
  std::fill(joined_.begin(), joined_.end(), false);
}

}  // namespace twinps
