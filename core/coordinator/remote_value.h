#pragma once
// The future-like handle `schedule` returns (spec R1, R2, E8). States:
//   NOT_READY -> READY (a value, or the closure's non-retryable error)
//   NOT_READY -> ABORTED (a per-worker resource whose worker died)
//   ABORTED -> READY (the resource was rebuilt), READY -> ABORTED (resources only)
// The value is copied to the coordinator with the closure's reply (C12), so a
// fetch keeps working after every worker is gone.
#include <memory>
#include <optional>

#include "core/messages/value.h"
#include "core/runtime/status.h"
#include "core/runtime/sync.h"
#include "core/runtime/task.h"

namespace twinps {

enum class RemoteValueStatus { kNotReady, kAborted, kReady };

class RemoteValue {
 public:
  RemoteValue() = default;
  static RemoteValue create(Executor& ex) {
    RemoteValue rv;
    rv.state_ = std::make_shared<State>(ex);
    return rv;
  }

  bool valid() const { return state_ != nullptr; }
  RemoteValueStatus status() const { return state_->status; }
  bool is_ready() const { return state_->status == RemoteValueStatus::kReady; }

  // Waits until the value has a status, then returns the value, the closure's
  // error, or CANCELLED for an aborted resource (E8).
  Task<StatusOr<Value>> fetch() const;

  // The result now, without waiting; nullopt while NOT_READY.
  std::optional<StatusOr<Value>> peek() const;

  // Producer side (the coordinator).
  void set_value(Value v) {
    state_->result = std::move(v);
    set_status(RemoteValueStatus::kReady);
  }
  void set_error(Status s) {
    state_->result = std::move(s);
    set_status(RemoteValueStatus::kReady);
  }
  void set_aborted(Status cause) {
    state_->result = std::move(cause);
    set_status(RemoteValueStatus::kAborted);
  }
  void reset_to_not_ready() { state_->status = RemoteValueStatus::kNotReady; }

  bool operator==(const RemoteValue& o) const { return state_ == o.state_; }
  const void* identity() const { return state_.get(); }

 private:
  struct State {
    explicit State(Executor& ex) : changed(ex) {}
    RemoteValueStatus status = RemoteValueStatus::kNotReady;
    StatusOr<Value> result = Value{};
    Notifier changed;
  };
  void set_status(RemoteValueStatus s) {
    state_->status = s;
    state_->changed.notify_all();
  }
  std::shared_ptr<State> state_;
};

// One RemoteValue per worker, in worker order (R4); substituted by the
// executing worker's element when a closure runs (C2).
struct PerWorkerValues {
  std::vector<RemoteValue> values;
};

}  // namespace twinps
