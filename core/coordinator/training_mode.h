#pragma once
// How closures of one run may run relative to each other (issue 13):
//
//   * async: any worker takes the next closure as soon as it is idle
//     (TensorFlow's ParameterServerStrategy, today's behaviour);
//   * ssp (stale-synchronous parallel, bound s): a worker's clock is the
//     closures it completed; a worker at clock c takes its next closure only
//     while the slowest live worker is at c - s or later, so no worker runs
//     more than s closures ahead of the slowest;
//   * sync (every step's gradients aggregated on the ps before one update):
//     not implemented; asking for it is refused (see docs/semantics.md).
//
// SSP lives in the coordinator's dispatch (ClusterCoordinator::worker_loop),
// not in the closure queue or the ps: the coordinator is the one place that
// knows which workers are alive (a dead worker must leave the clock set, or
// the others would wait for it forever) and which worker completed which
// closure; the queue hands work to any idle worker without knowing them
// apart, and a ps sees pushes, not workers' progress.
#include <cstdint>
#include <string>
#include <vector>

namespace twinps {

enum class TrainingMode { kAsync, kSsp, kSync };

// "async", "ssp", "sync".
const char* training_mode_name(TrainingMode mode);

// The clocks of SSP: one per worker, and which workers are in the set.
// Pure bookkeeping (no waiting): the coordinator asks may_start() before a
// worker takes a closure and waits for a change when it says no.
class SspClock {
 public:
  SspClock(int workers, std::int64_t bound) : clocks_(static_cast<std::size_t>(workers), 0),
                                               live_(static_cast<std::size_t>(workers), true), bound_(bound) {}

  // Worker `w` completed a closure.
  void tick(int w) { ++clocks_[static_cast<std::size_t>(w)]; }
  // A dead worker leaves the set: the others no longer wait for it.
  void leave(int w) { live_[static_cast<std::size_t>(w)] = false; }
  // A recovered worker rejoins at the slowest live worker's clock (its own if
  // it is alone), so it neither blocks the others nor runs far ahead.
  void rejoin(int w);
  // Worker `w` (live) may start a closure: it is at most `bound` ahead of the slowest live worker.
  bool may_start(int w) const { return clock(w) - slowest() <= bound_; }

  std::int64_t clock(int w) const { return clocks_[static_cast<std::size_t>(w)]; }
  bool live(int w) const { return live_[static_cast<std::size_t>(w)]; }
  // The slowest live worker's clock (0 when none is live).
  std::int64_t slowest() const;
  std::int64_t bound() const { return bound_; }

 private:
  std::vector<std::int64_t> clocks_;
  std::vector<bool> live_;
  std::int64_t bound_;
};

}  // namespace twinps
