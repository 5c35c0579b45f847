#include "core/coordinator/remote_value.h"

namespace twinps {

namespace {
constexpr char kAbortedMessage[] = "The corresponding function is aborted. Please reschedule the function.";
}

std::optional<StatusOr<Value>> RemoteValue::peek() const {
  switch (state_->status) {
    case RemoteValueStatus::kNotReady: return std::nullopt;
    case RemoteValueStatus::kAborted: return StatusOr<Value>(absl::CancelledError(kAbortedMessage));
    case RemoteValueStatus::kReady: return state_->result;
  }
  return std::nullopt;
}

Task<StatusOr<Value>> RemoteValue::fetch() const {
  auto state = state_;  // keep the state alive across suspension
  while (state->status == RemoteValueStatus::kNotReady) co_await state->changed.wait();
  co_return *peek();
}

}  // namespace twinps
