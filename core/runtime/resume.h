#pragma once
// The resumption rule: why the stack never grows with a loop of awaits.
// ---------------------------------------------------------------------
// Control passes between coroutines in two ways:
//  - a *transfer*: a coroutine awaits a Task (control goes to the task) or a
//    Task finishes (control goes back to its awaiter). The coroutine giving up
//    control has just suspended and runs nothing more, so the next one need
//    not run inside its frame.
//  - a *resumption*: something that is not a coroutine (an executor event, a
//    transport completion) wakes a suspended coroutine.
// A resumption calls `resume_now(h)`, which runs `h` and then, in a loop on
// its own stack frame, every coroutine control is transferred to, until one
// suspends on something else (a timer, a future, a notifier). A transfer only
// records the next coroutine in that loop's slot (`transfer_to`) and
// suspends. So a loop of `co_await` on Tasks that complete at once, or a chain
// of 100,000 nested Tasks, runs at a constant stack depth. Symmetric transfer
// (await_suspend returning the next handle) would give the same guarantee only
// where the compiler turns it into a tail call, which GCC does not do without
// optimisation or under AddressSanitizer. No code in core may call
// `coroutine_handle::resume()` other than through `resume_now`.
#include <cassert>
#include <coroutine>
#include <utility>

namespace twinps {

namespace detail {

// The slot of the innermost resume_now loop running on this thread (each
// real-mode node runs its executor on a thread of its own; the simulator has
// one thread), or null outside any.
inline thread_local std::coroutine_handle<>* transfer_slot = nullptr;

}  // namespace detail

// Resumes `h`, then every coroutine control is transferred to from it, until
// one suspends on an event (see the rule above). Safe to call from within a
// running coroutine: the inner loop has its own slot.
inline void resume_now(std::coroutine_handle<> h) {
  std::coroutine_handle<> next = h;
  struct SlotGuard {
    std::coroutine_handle<>* outer;
    explicit SlotGuard(std::coroutine_handle<>* slot) : outer(std::exchange(detail::transfer_slot, slot)) {}
    ~SlotGuard() { detail::transfer_slot = outer; }
  } guard(&next);
  while (next) std::exchange(next, nullptr).resume();
}

namespace detail {

// Passes control to `h` once the running coroutine has suspended: the loop of
// the resume_now that runs it picks `h` up next. Without an enclosing loop (a
// test driving a handle by hand) it starts one.
inline void transfer_to(std::coroutine_handle<> h) {
  if (!h) return;
  if (transfer_slot == nullptr) {
    resume_now(h);
    return;
  }
  assert(!*transfer_slot && "two transfers from one suspension");
  *transfer_slot = h;
}

}  // namespace detail

}  // namespace twinps
