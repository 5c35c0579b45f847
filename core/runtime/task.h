#pragma once
// Core's coroutine types. A `Task<T>` is a lazily started coroutine that
// produces a T; awaiting it runs it to completion and then resumes the
// awaiter. A `TaskScope` owns the root tasks a node has spawned and destroys
// whatever is still suspended when the node goes away (a simulated crash, a
// shutdown), which in turn destroys every frame those roots await.
//
// Nothing here knows whether time is simulated: suspension points are the
// awaitables in sync.h, which resume through the node's Executor.
//
// How control passes between coroutines without growing the stack: see
// resume.h.
#include <cassert>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <utility>

#include "core/runtime/executor.h"
#include "core/runtime/frame_pool.h"
#include "core/runtime/resume.h"

namespace twinps {

template <typename T = void>
class Task;

namespace detail {

struct TaskPromiseBase : PooledFrame {
  std::coroutine_handle<> continuation;  // the awaiter; null while nobody awaits
  std::exception_ptr error;

  std::suspend_always initial_suspend() noexcept { return {}; }

  struct FinalAwaiter {
    bool await_ready() noexcept { return false; }
    template <typename P>
    void await_suspend(std::coroutine_handle<P> self) noexcept {
      transfer_to(self.promise().continuation);
    }
    void await_resume() noexcept {}
  };
  FinalAwaiter final_suspend() noexcept { return {}; }
  void unhandled_exception() noexcept { error = std::current_exception(); }
};

template <typename T>
struct TaskPromise : TaskPromiseBase {
  std::optional<T> value;
  Task<T> get_return_object() noexcept;
  template <typename U>
  void return_value(U&& v) {
    value.emplace(std::forward<U>(v));
  }
  T take() {
    if (error) std::rethrow_exception(error);
    return std::move(*value);
  }
};

template <>
struct TaskPromise<void> : TaskPromiseBase {
  Task<void> get_return_object() noexcept;
  void return_void() noexcept {}
  void take() {
    if (error) std::rethrow_exception(error);
  }
};

}  // namespace detail

template <typename T>
class [[nodiscard]] Task {
 public:
  using promise_type = detail::TaskPromise<T>;
  using Handle = std::coroutine_handle<promise_type>;

  Task() = default;
  explicit Task(Handle h) : handle_(h) {}
  Task(Task&& o) noexcept : handle_(std::exchange(o.handle_, {})) {}
  Task& operator=(Task&& o) noexcept {
    if (this != &o) {
      if (handle_) handle_.destroy();
      handle_ = std::exchange(o.handle_, {});
    }
    return *this;
  }
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;
  ~Task() {
    if (handle_) handle_.destroy();
  }

  bool valid() const { return static_cast<bool>(handle_); }
  bool done() const { return handle_ && handle_.done(); }

  struct Awaiter {
    Handle handle;
    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<> awaiting) noexcept {
      handle.promise().continuation = awaiting;
      detail::transfer_to(handle);
    }
    T await_resume() { return handle.promise().take(); }
  };
  Awaiter operator co_await() & noexcept { return Awaiter{handle_}; }
  Awaiter operator co_await() && noexcept { return Awaiter{handle_}; }

  // For drivers (tests, block_on): start or resume by hand, then read the result.
  Handle handle() const { return handle_; }
  T result() { return handle_.promise().take(); }

 private:
  Handle handle_;
};

namespace detail {
template <typename T>
Task<T> TaskPromise<T>::get_return_object() noexcept {
  return Task<T>(std::coroutine_handle<TaskPromise<T>>::from_promise(*this));
}
inline Task<void> TaskPromise<void>::get_return_object() noexcept {
  return Task<void>(std::coroutine_handle<TaskPromise<void>>::from_promise(*this));
}
}  // namespace detail

// Owns detached root tasks. Spawned tasks start on the executor (never inline,
// so spawning from a callback cannot re-enter the caller). Destroying the scope
// destroys the frames of every task that has not finished.
class TaskScope {
 public:
  explicit TaskScope(Executor& executor) : executor_(executor), alive_(std::make_shared<bool>(true)) {}
  TaskScope(const TaskScope&) = delete;
  TaskScope& operator=(const TaskScope&) = delete;
  ~TaskScope() { destroy_all(); }

  void spawn(Task<void> task);

  // Destroys every unfinished root; afterwards the scope accepts new spawns.
  void destroy_all();

  std::size_t active() const { return count_; }
  Executor& executor() const { return executor_; }

 private:
  struct Root;
  struct RootPromise;
  Root start_root(Task<void> task);

  Executor& executor_;
  std::shared_ptr<bool> alive_;
  RootPromise* head_ = nullptr;  // intrusive list of live roots
  std::size_t count_ = 0;
};

struct TaskScope::RootPromise : detail::PooledFrame {
  TaskScope* scope = nullptr;
  RootPromise* prev = nullptr;
  RootPromise* next = nullptr;

  Root get_return_object() noexcept;
  std::suspend_always initial_suspend() noexcept { return {}; }
  std::suspend_never final_suspend() noexcept {
    unlink();
    return {};
  }
  void return_void() noexcept {}
  // An exception escaping a spawned task is a programming error in core.
  void unhandled_exception() noexcept { std::terminate(); }

  void unlink() noexcept {
    if (!scope) return;
    if (prev) prev->next = next; else scope->head_ = next;
    if (next) next->prev = prev;
    --scope->count_;
    scope = nullptr;
  }
};

struct TaskScope::Root {
  using promise_type = RootPromise;
  std::coroutine_handle<RootPromise> handle;
};

inline TaskScope::Root TaskScope::RootPromise::get_return_object() noexcept {
  return Root{std::coroutine_handle<RootPromise>::from_promise(*this)};
}

inline TaskScope::Root TaskScope::start_root(Task<void> task) { co_await std::move(task); }

inline void TaskScope::spawn(Task<void> task) {
  auto root = start_root(std::move(task)).handle;
  RootPromise& p = root.promise();
  p.scope = this;
  p.next = head_;
  if (head_) head_->prev = &p;
  head_ = &p;
  ++count_;
  // Start on the executor. If the scope dies first, it has already destroyed
  // the frame; the weak flag keeps this event from touching it.
  executor_.post([root, alive = std::weak_ptr<bool>(alive_)]() {
    if (alive.expired()) return;
    resume_now(root);
  });
}

inline void TaskScope::destroy_all() {
  // Reset the flag first so start events posted for these roots become no-ops.
  alive_ = std::make_shared<bool>(true);
  while (head_) {
    RootPromise* p = head_;
    p->unlink();
    std::coroutine_handle<RootPromise>::from_promise(*p).destroy();
  }
}

}  // namespace twinps
