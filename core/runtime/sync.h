#pragma once
// Suspension points for core coroutines. Each one resumes its waiter by posting
// to the node's Executor, not inline, so code that completes a promise or
// notifies waiters is never re-entered by them (the one exception,
// Promise::set_and_resume, is for transport completions, which are events of
// their own). notify_all() posts one event per waiter and resumes none itself,
// so waking 10,000 waiters nests no frames. Every resumption goes through
// resume_now (resume.h). Each awaiter unregisters itself when its frame is
// destroyed, so a destroyed coroutine is never resumed.
#include <coroutine>
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>

#include <absl/container/inlined_vector.h>

#include "core/runtime/executor.h"
#include "core/runtime/resume.h"

namespace twinps {

namespace detail {

// Waiters in ticket order: a vector whose consumed front is skipped by an
// offset, so the usual wake-up (the oldest waiter first) pops the front in
// O(1). Not a deque: libstdc++'s deque allocates 576 bytes even when empty,
// and a WaiterList (two of these) is created for every call a node makes
// (5 % of a 1,000 x 100 simulation went to those allocations).
class TicketQueue {
 public:
  using Entry = std::pair<std::uint64_t, std::coroutine_handle<>>;
  void push_back(std::uint64_t id, std::coroutine_handle<> h) { entries_.emplace_back(id, h); }
  // The entry with this ticket, or null; tickets only grow, so a binary search.
  Entry* find(std::uint64_t id) {
    auto it = std::lower_bound(entries_.begin() + static_cast<std::ptrdiff_t>(head_), entries_.end(), id,
                               [](const Entry& e, std::uint64_t x) { return e.first < x; });
    return it != entries_.end() && it->first == id ? &*it : nullptr;
  }
  void erase(Entry* e) {
    const auto at = static_cast<std::size_t>(e - entries_.data());
    if (at == head_) {
      ++head_;
    } else {
      entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(at));
    }
    if (head_ == entries_.size()) clear();
  }
  bool empty() const { return head_ == entries_.size(); }
  void clear() {
    entries_.clear();
    head_ = 0;
  }
  Entry* begin() { return entries_.data() + head_; }
  Entry* end() { return entries_.data() + entries_.size(); }

 private:
  // Inline room for the usual one or two waiters: no allocation at all.
  absl::InlinedVector<Entry, 2> entries_;
  std::size_t head_ = 0;  // entries before it are consumed
};

// Waiters keyed by a ticket; the resume event looks the ticket up again, so an
// awaiter destroyed between the wake-up and the event is simply skipped.
// Tickets only grow and both lists keep them in order: waking n waiters
// costs O(n log n).
class WaiterList {
 public:
  std::uint64_t add(std::coroutine_handle<> h) {
    auto id = next_++;
    waiting_.push_back(id, h);
    return id;
  }
  void remove(std::uint64_t id) {
    erase(waiting_, id);
    erase(woken_, id);
  }
  // Moves every waiter to "woken" and schedules its resumption. `self` owns
  // this list (it may be an aliasing pointer into a larger state).
  void wake_all(Executor& ex, const std::shared_ptr<WaiterList>& self) {
    for (auto& [id, h] : waiting_) {
      woken_.push_back(id, h);
      ex.post([weak = std::weak_ptr<WaiterList>(self), id = id] {
        if (auto list = weak.lock()) list->resume(id);
      });
    }
    waiting_.clear();
  }
  // Resumes every waiter now, on the caller's stack. Only for callers that
  // run as an event of their own with nothing left to do afterwards (a
  // transport's completion), where re-entrance cannot hurt.
  void resume_all_now() {
    TicketQueue waiting = std::move(waiting_);
    waiting_.clear();
    for (auto& [id, h] : waiting) resume_now(h);
  }
  bool empty() const { return waiting_.empty(); }

 private:
  static void erase(TicketQueue& q, std::uint64_t id) {
    if (auto* e = q.find(id)) q.erase(e);
  }
  void resume(std::uint64_t id) {
    auto* e = woken_.find(id);
    if (!e) return;
    auto h = e->second;
    woken_.erase(e);
    resume_now(h);
  }
  std::uint64_t next_ = 1;
  TicketQueue waiting_;
  TicketQueue woken_;
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

  void notify_all() {
    if (!waiters_->empty()) waiters_->wake_all(*executor_, waiters_);
  }
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
// The value and its waiters in one allocation; the waiter list is reached
// through an aliasing pointer that shares the state's ownership.
template <typename T>
struct FutureState {
  explicit FutureState(Executor& ex) : executor(&ex) {}
  Executor* executor;
  std::optional<T> value;
  WaiterList waiters;
};
template <typename T>
std::shared_ptr<WaiterList> waiters_of(const std::shared_ptr<FutureState<T>>& state) {
  return std::shared_ptr<WaiterList>(state, &state->waiters);
}
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
    if (!state_->waiters.empty()) state_->waiters.wake_all(*state_->executor, detail::waiters_of(state_));
    return true;
  }
  // set(), resuming the consumer at once instead of in a later event. Only
  // from a callback that is an event of its own and does nothing after this
  // (a transport's `done`): it saves an event per call.
  bool set_and_resume(T value) {
    if (state_->value) return false;
    state_->value.emplace(std::move(value));
    auto keep = state_;  // the consumer may drop its Future while running
    keep->waiters.resume_all_now();
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
      ticket.list = detail::waiters_of(state);
      ticket.id = state->waiters.add(h);
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
      resume_now(h);
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
