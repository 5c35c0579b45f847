#pragma once
// The coordinator's closure queue (spec C5–C10, C22, E2–E5): one global FIFO of
// bounded capacity, one tagged FIFO per worker for resource closures, the
// in-flight count, and the first error.
//
// Dispatch is by pull, as in TensorFlow, but deterministic: idle workers wait
// in `next_work`, and whenever work appears the lowest-index idle worker gets
// it — its own tagged work first, then the head of the global FIFO.
#include <cstddef>
#include <deque>
#include <map>
#include <set>
#include <memory>
#include <optional>
#include <vector>

#include "core/coordinator/closure.h"
#include "core/runtime/status.h"
#include "core/runtime/sync.h"
#include "core/runtime/task.h"

namespace twinps {

inline constexpr char kCancelledClosureMessage[] =
    "The corresponding function is cancelled. Please reschedule the function.";

class ClosureQueue {
 public:
  // capacity == 0 means unbounded.
  ClosureQueue(Executor& ex, std::size_t capacity, int num_workers);

  // What a worker is handed: a resource closure, a closure, or the order to stop.
  struct Work {
    std::shared_ptr<Closure> closure;
    std::optional<ResourceClosure> resource;
    bool stop = false;
  };

  // ---- coordinator side
  // Suspends while the global FIFO is full (C5).
  Task<void> wait_for_space();
  void put(std::shared_ptr<Closure> closure);
  // Suspends until the queue is empty with nothing in flight, or an error is pending (E4).
  Task<void> wait_until_idle_or_error();
  // Suspends until nothing is in flight (E2 step 2).
  Task<void> wait_until_nothing_in_flight();
  // Empties the global FIFO, marking every closure CANCELLED (E2 step 3).
  std::size_t cancel_queued();
  bool has_error() const { return error_.has_value(); }
  // The pending error, if any (not cleared).
  const Status* pending_error() const { return error_ ? &*error_ : nullptr; }
  // Returns the pending error and clears it (E2 step 5).
  Status take_error();
  bool idle() const { return queue_.empty() && in_flight_ == 0; }

  // ---- worker side
  Future<Work> next_work(int worker);
  void put_tagged(int worker, ResourceClosure closure);
  void clear_tagged(int worker);  // R8: a dead worker's pending resource closures are dropped
  // A taken closure finished successfully.
  void mark_finished();
  // A taken closure failed with a user error; only the first error is kept (C22).
  void mark_failed(Status error);
  // A taken closure must run again: back to the tail, or cancelled if an error is pending (C9).
  void put_back(std::shared_ptr<Closure> closure);
  // An error found outside any closure (a worker's recovery failing because a
  // ps is down, spec W3/P4); raised like a closure's, the first one kept.
  void report_error(Status error);
  // A taken closure ended because its generation was cancelled (E6): it keeps its own result.
  void mark_cancelled_in_flight();
  // No work is handed out while paused (a ps being restored or rolled back,
  // P11); what is queued or put back waits, and resume() hands it out.
  void pause() { paused_ = true; }
  void resume();
  // Every idle worker, and every later next_work, gets the stop order.
  void stop();

  std::size_t queued() const { return queue_.size(); }
  int in_flight() const { return in_flight_; }
  std::size_t capacity() const { return capacity_; }

 private:
  void dispatch();
  void finish_in_flight();

  Executor& executor_;
  std::size_t capacity_;
  std::deque<std::shared_ptr<Closure>> queue_;
  std::vector<std::deque<ResourceClosure>> tagged_;
  std::set<int> with_tagged_;          // the workers whose tagged_ is not empty
  std::map<int, Promise<Work>> idle_;  // ordered by worker index: lowest first
  int in_flight_ = 0;
  std::optional<Status> error_;
  bool stopped_ = false;
  bool paused_ = false;
  Notifier changed_;
};

}  // namespace twinps
