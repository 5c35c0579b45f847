#pragma once
// The first half of core's runtime seam: a clock plus an event loop.
//
// The simulator implements it with a (time, sequence)-ordered event queue on
// one thread; the real runtime with a single-threaded Asio io_context onto
// which gRPC completions are posted. Either way every callback a node sees runs
// on that node's executor, one at a time, so core code never takes a lock.
#include <cstdint>
#include <functional>

#include "core/runtime/time.h"
#include "core/runtime/unique_function.h"

namespace twinps {

using TimerId = std::uint64_t;
inline constexpr TimerId kNoTimer = 0;

class Executor {
 public:
  virtual ~Executor() = default;

  virtual Time now() const = 0;

  // Runs `fn` after the callbacks already queued for the current instant.
  virtual void post(Callback fn) = 0;

  // Runs `fn` at `when` (at once if `when` has passed); the id cancels it.
  virtual TimerId post_at(Time when, Callback fn) = 0;

  TimerId post_after(Duration delay, Callback fn) { return post_at(add_saturating(now(), delay), std::move(fn)); }

  // Cancels a timer that has not fired; a no-op for one that has (or kNoTimer).
  virtual void cancel(TimerId id) = 0;

  // Drives the loop until `done()` holds (returns true), or until the clock
  // would pass `limit` or nothing is left to run (returns false). Only the
  // top of a program calls this, never a callback running on the loop.
  virtual bool run_until(const std::function<bool()>& done, Time limit = kTimeNever) = 0;
};

}  // namespace twinps
