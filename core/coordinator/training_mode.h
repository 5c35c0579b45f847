#pragma once
// How closures of one run may run relative to each other (issue 13):
//
//   * async: any worker takes the next closure as soon as it is idle
//     (TensorFlow's ParameterServerStrategy, today's behaviour);
//   * ssp (stale-synchronous parallel, bound s): a worker's clock is the
//     closures it completed; a worker at clock c takes its next closure only
//     while the slowest live worker is at c - s or later, so no worker runs
//     more than s closures ahead of the slowest;
//   * sync (TensorFlow's SyncReplicasOptimizer, in our words): the closures
//     run in steps; in step k every live worker runs one closure against the
//     same parameter version, its gradients are tagged k and summed on the ps
//     (core/ps/parameter_store.h), and once N of them completed (N = M - B
//     with B backup workers, or the live workers if fewer) the coordinator
//     has every ps apply the mean as ONE update and opens step k + 1. A
//     gradient tagged with a step already applied is dropped (counted), so
//     every applied gradient has staleness 0.
//
// SSP and the sync barrier live in the coordinator's dispatch (ClusterCoordinator::worker_loop),
// not in the closure queue or the ps: the coordinator is the one place that
// knows which workers are alive (a dead worker must leave the clock set, or
// the others would wait for it forever) and which worker completed which
// closure; the queue hands work to any idle worker without knowing them
// apart, and a ps sees pushes, not workers' progress. For sync the ps does
// the arithmetic (sums, means, dropping late gradients) and the coordinator
// decides when a step is complete: a ps cannot count workers (a sparse step
// may not touch every shard, and a dead worker's gradients never come), while
// the coordinator knows which closures completed, which workers are alive and
// whether more work is queued (SyncSteps below).
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

// The steps of sync mode: which workers are in the current step, how many
// of its closures completed, and whether it may be applied. Pure bookkeeping
// (no waiting, no messages): the coordinator asks may_start() before a worker
// takes a closure, tags the closure with start()'s step, reports its end with
// finish(), and applies the step on the parameter servers when ready().
class SyncSteps {
 public:
  SyncSteps(int workers, int backup_workers)
      : joined_(static_cast<std::size_t>(workers), false),
        live_(static_cast<std::size_t>(workers), true),
        workers_(workers),
        backup_(backup_workers) {}

  // The step closures started now belong to.
  std::int64_t step() const { return step_; }
  // Completed closures the current step waits for: workers - backup_workers,
  // or every live worker when fewer are live (a dead worker's gradients never come).
  int required() const;
  // Worker `w` may take a closure of the current step: it is live and has
  // not taken one in this step yet (one closure per worker and step).
  bool may_start(int w) const { return live_[index(w)] && !joined_[index(w)]; }
  // Worker `w` starts a closure of the current step; returns the step to tag it with.
  std::int64_t start(int w);
  // A closure of step `step` on worker `w` ended. Completed: its gradients
  // reached the ps. Not completed (retried elsewhere, cancelled, failed):
  // the worker may take another closure in this step. A closure of an older
  // step (a straggler's, whose gradients were dropped) changes nothing.
  void finish(int w, std::int64_t step, bool completed);
  // A dead worker leaves: the step no longer waits for it.
  void leave(int w) { live_[index(w)] = false; }
  // A recovered worker rejoins at the current step (if it completed a
  // closure of this step before it died, at the next one).
  void rejoin(int w) { live_[index(w)] = true; }
  // The current step may be applied: `required()` of its closures completed,
  // or at least one did, none is running and no work is queued (the end of
  // what was scheduled: waiting longer would hold its gradients back forever).
  bool ready(bool work_queued) const;
  // The current step was applied on every ps: the next one begins.
  void advance();

  std::int64_t completed() const { return completed_; }
  std::int64_t running() const { return running_; }
  int backup_workers() const { return backup_; }

 private:
  std::size_t index(int w) const { return static_cast<std::size_t>(w); }
  std::vector<bool> joined_;  // took a closure of the current step
  std::vector<bool> live_;
  int workers_;
  int backup_;
  std::int64_t step_ = 0;
  std::int64_t running_ = 0;    // closures of the current step in flight
  std::int64_t completed_ = 0;  // closures of the current step completed
};

}  // namespace twinps
