#pragma once
// Drives an executor from the top of a program until a coroutine finishes:
// the bridge from a plain main() (or a test) into core's coroutines. Only the
// outermost caller may use it, never code running on the loop.
#include <optional>

#include "core/runtime/executor.h"
#include "core/runtime/task.h"

namespace twinps {

namespace detail {
template <typename T>
Task<void> store_result(Task<T> task, std::optional<T>* out) {
  out->emplace(co_await std::move(task));
}
}  // namespace detail

// The task's result, or nullopt if `limit` passed or the loop ran dry first
// (the task is then destroyed unfinished).
template <typename T>
std::optional<T> block_on(Executor& executor, Task<T> task, Time limit = kTimeNever) {
  std::optional<T> result;
  TaskScope scope(executor);
  scope.spawn(detail::store_result(std::move(task), &result));
  executor.run_until([&] { return result.has_value(); }, limit);
  return result;
}

}  // namespace twinps
