#pragma once
// Cooperative cancellation: a source that fires once, tokens that observe it.
// Transport calls, retry loops and step functions take a token; the
// coordinator's cancellation "generations" are sources.
#include <cstdint>
#include <map>
#include <memory>
#include <utility>

#include "core/runtime/unique_function.h"

namespace twinps {

namespace detail {
struct CancelState {
  bool cancelled = false;
  std::uint64_t next_id = 1;
  std::map<std::uint64_t, Callback> callbacks;  // ordered: callbacks fire in registration order
};
}  // namespace detail

// Unregisters its callback when destroyed (or released), so a callback never
// outlives the object that registered it.
class CancelRegistration {
 public:
  CancelRegistration() = default;
  CancelRegistration(std::weak_ptr<detail::CancelState> state, std::uint64_t id) : state_(std::move(state)), id_(id) {}
  CancelRegistration(CancelRegistration&& o) noexcept : state_(std::move(o.state_)), id_(std::exchange(o.id_, 0)) {}
  CancelRegistration& operator=(CancelRegistration&& o) noexcept {
    if (this != &o) {
      reset();
      state_ = std::move(o.state_);
      id_ = std::exchange(o.id_, 0);
    }
    return *this;
  }
  ~CancelRegistration() { reset(); }
  void reset() {
    if (auto s = state_.lock(); s && id_ != 0) s->callbacks.erase(id_);
    state_.reset();
    id_ = 0;
  }

 private:
  std::weak_ptr<detail::CancelState> state_;
  std::uint64_t id_ = 0;
};

class CancelToken {
 public:
  CancelToken() = default;  // a token that is never cancelled
  explicit CancelToken(std::shared_ptr<detail::CancelState> s) : state_(std::move(s)) {}

  bool cancelled() const { return state_ && state_->cancelled; }
  bool can_be_cancelled() const { return state_ != nullptr; }

  // Runs `fn` when the source is cancelled (at once if it already is).
  [[nodiscard]] CancelRegistration on_cancel(Callback fn) const {
    if (!state_) return {};
    if (state_->cancelled) {
      fn();
      return {};
    }
    auto id = state_->next_id++;
    state_->callbacks.emplace(id, std::move(fn));
    return CancelRegistration(state_, id);
  }

 private:
  std::shared_ptr<detail::CancelState> state_;
};

class CancellationSource {
 public:
  CancellationSource() : state_(std::make_shared<detail::CancelState>()) {}

  CancelToken token() const { return CancelToken(state_); }
  bool cancelled() const { return state_->cancelled; }

  void cancel() {
    if (state_->cancelled) return;
    state_->cancelled = true;
    auto callbacks = std::move(state_->callbacks);
    state_->callbacks.clear();
    for (auto& [id, fn] : callbacks) fn();
  }

 private:
  std::shared_ptr<detail::CancelState> state_;
};

}  // namespace twinps
