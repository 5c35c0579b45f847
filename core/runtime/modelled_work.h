#pragma once
// Lets work that a cost model priced take its time on the simulated clock:
// on the task's cores when the model shares CPU among a host's tasks (then
// its duration depends on what else runs there), otherwise as a sleep. On
// real hardware there is no cost model and the work itself took the time.
#include "core/runtime/runtime.h"
#include "core/runtime/sync.h"
#include "core/runtime/task.h"

namespace twinps {

// Spends `work` (the duration on an idle core) as `runtime.self`'s CPU.
// Requires a cost model; nothing happens for work <= 0.
inline Task<void> spend_modelled(Runtime& runtime, Duration work) {
  if (work <= 0) co_return;
  if (!runtime.cost->shares_cpu()) {
    co_await sleep_for(runtime.executor, work);
    co_return;
  }
  Promise<bool> done(runtime.executor);
  auto finished = done.future();
  runtime.cost->run(runtime.self, work, [done]() mutable { done.set(true); });
  co_await finished;
}

}  // namespace twinps
