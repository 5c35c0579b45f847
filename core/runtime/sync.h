#pragma once
// Suspension points for core coroutines. Each one resumes its waiter by posting
// to the node's Executor, never inline, so code that completes a promise or
// notifies waiters is never re-entered by them. Each awaiter unregisters itself
// when its frame is destroyed, so a destroyed coroutine is never resumed.
#include <coroutine>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "core/runtime/executor.h"

namespace twinps {

namespace detail {

// Waiters keyed by a ticket; the resume event looks the ticket up again, so an
// awaiter destroyed between the wake-up and the event is simply skipped.
class WaiterList {
 public:
  std::uint64_t add(std::coroutine_handle<> h) {
    auto id = next_++;
    waiting_.emplace(id, h);
    return id;
  }
  void remove(std::uint64_t id) {
    waiting_.erase(id);
    woken_.erase(id);
  }
  // Moves every waiter to "woken" and schedules its resumption.
  void wake_all(Executor& ex, const std::shared_ptr<WaiterList>& self) {
    for (auto& [id, h] : waiting_) {
      woken_.emplace(id, h);
      ex.post([weak = std::weak_ptr<WaiterList>(self), id = id] {
        if (auto list = weak.lock()) list->resume(id);
      });
    }
    waiting_.clear();
  }
  bool empty() const { return waiting_.empty(); }

 private:
  void resume(std::uint64_t id) {
    auto it = woken_.find(id);
    if (it == woken_.end()) return;
    auto h = it->second;
    woken_.erase(it);
    h.resume();
  }
  std::uint64_t next_ = 1;
  std::map<std::uint64_t, std::coroutine_handle<>> waiting_;
  std::map<std::uint64_t, std::coroutine_handle<>> woken_;
};

// Registers on await_suspend, unregisters on destruction.
struct WaiterTicket {
  std::shared_ptr<WaiterList> list;
  std::uint64_t id = 0;
  WaiterTicket() = default;
  WaiterTicket(const WaiterTicket&) = delete;
  WaiterTicket& operator=(const WaiterTicket&) = delete;
  WaiterTicket(WaiterTicket&& o) noexcept : list(std::move(o.list)), id(std::exchange(o.id, 0)) {}
  ~WaiterTicket() {
    if (list && id) list->remove(id);
  }
};

}  // namespace detail

// Like a condition variable for one thread: `co_await n.wait()` suspends until
// the next notify_all(). Callers re-check their condition in a loop.
class Notifier {
 public:
  explicit Notifier(Executor& ex) : executor_(&ex), waiters_(std::make_shared<detail::WaiterList>()) {}
  Notifier(const Notifier&) = delete;
  Notifier& operator=(const Notifier&) = delete;

  void notify_all() { waiters_->wake_all(*executor_, waiters_); }
  bool has_waiters() const { return !waiters_->empty(); }

  struct Awaiter {
    std::shared_ptr<detail::WaiterList> list;
    detail::WaiterTicket ticket;
    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<> h) {
      ticket.list = list;
      ticket.id = list->add(h);
    }
    void await_resume() noexcept { ticket.id = 0; }
  };
  Awaiter wait() { return Awaiter{waiters_, {}}; }

 private:
  Executor* executor_;
  std::shared_ptr<detail::WaiterList> waiters_;
};

template <typename T>
class Future;

namespace detail {
template <typename T>
struct FutureState {
  explicit FutureState(Executor& ex) : executor(&ex), waiters(std::make_shared<WaiterList>()) {}
  Executor* executor;
  std::optional<T> value;
  std::shared_ptr<WaiterList> waiters;
};
}  // namespace detail

// A single-assignment value with one consumer. The producer (often a transport
// callback) calls set(); the consumer co_awaits the Future and receives the
// value by move.
template <typename T>
class Promise {
 public:
  explicit Promise(Executor& ex) : state_(std::make_shared<detail::FutureState<T>>(ex)) {}

  Future<T> future() const { return Future<T>(state_); }
  bool is_set() const { return state_->value.has_value(); }

  // The first set() wins; later ones are ignored (e.g. a deadline racing a reply).
  bool set(T value) {
    if (state_->value) return false;
    state_->value.emplace(std::move(value));
    state_->waiters->wake_all(*state_->executor, state_->waiters);
    return true;
  }

 private:
  std::shared_ptr<detail::FutureState<T>> state_;
};

template <typename T>
class Future {
 public:
  Future() = default;
  explicit Future(std::shared_ptr<detail::FutureState<T>> s) : state_(std::move(s)) {}

  bool valid() const { return state_ != nullptr; }
  bool ready() const { return state_ && state_->value.has_value(); }
  const T& peek() const { return *state_->value; }

  struct Awaiter {
    std::shared_ptr<detail::FutureState<T>> state;
    detail::WaiterTicket ticket;
    bool await_ready() const noexcept { return state->value.has_value(); }
    void await_suspend(std::coroutine_handle<> h) {
      ticket.list = state->waiters;
      ticket.id = state->waiters->add(h);
    }
    T await_resume() {
      ticket.id = 0;
      return std::move(*state->value);
    }
  };
  Awaiter operator co_await() const { return Awaiter{state_, {}}; }

 private:
  std::shared_ptr<detail::FutureState<T>> state_;
};

// `co_await sleep_for(ex, d)`: resumes after `d` on the executor's clock. The
// timer is cancelled if the awaiting frame is destroyed first.
class SleepAwaiter {
 public:
  SleepAwaiter(Executor& ex, Time when) : executor_(ex), when_(when) {}
  SleepAwaiter(const SleepAwaiter&) = delete;
  SleepAwaiter& operator=(const SleepAwaiter&) = delete;
  ~SleepAwaiter() {
    if (timer_ != kNoTimer) executor_.cancel(timer_);
  }
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) {
    timer_ = executor_.post_at(when_, [this, h] {
      timer_ = kNoTimer;
      h.resume();
    });
  }
  void await_resume() noexcept {}

 private:
  Executor& executor_;
  Time when_;
  TimerId timer_ = kNoTimer;
};

inline SleepAwaiter sleep_for(Executor& ex, Duration d) { return SleepAwaiter(ex, add_saturating(ex.now(), d)); }
inline SleepAwaiter sleep_until(Executor& ex, Time t) { return SleepAwaiter(ex, t); }

}  // namespace twinps
