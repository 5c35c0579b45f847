#pragma once
// Time as core sees it: integer nanoseconds on the node's clock. The simulator's
// clock starts at 0; the real runtime counts from process start. Core never
// reads a wall clock itself — it asks its Executor.
#include <cstdint>
#include <limits>

namespace twinps {

using Time = std::int64_t;      // nanoseconds on the node's clock
using Duration = std::int64_t;  // nanoseconds

inline constexpr Duration kNanosecond = 1;
inline constexpr Duration kMicrosecond = 1000;
inline constexpr Duration kMillisecond = 1000 * kMicrosecond;
inline constexpr Duration kSecond = 1000 * kMillisecond;
inline constexpr Time kTimeNever = std::numeric_limits<Time>::max();

constexpr double to_seconds(Duration d) { return static_cast<double>(d) / kSecond; }
constexpr Duration from_seconds(double s) { return static_cast<Duration>(s * kSecond); }

// Saturating add so that `now + timeout` never overflows when timeout is "never".
constexpr Time add_saturating(Time t, Duration d) {
  if (d > 0 && t > kTimeNever - d) return kTimeNever;
  return t + d;
}

}  // namespace twinps
