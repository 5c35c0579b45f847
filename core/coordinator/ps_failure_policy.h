#pragma once
// What the coordinator does when a parameter server fails (issue 13 point 2,
// docs/semantics.md P10-P15):
//
//   * raise: TensorFlow's behaviour (P1-P6): the failure is retried a few
//     times as transient (C17), then raised as UNAVAILABLE at the next
//     schedule/join/done; recovering means restarting the coordinator, which
//     restores the newest checkpoint;
//   * restore: the coordinator, without restarting, waits (bounded) for the
//     ps to answer again on its address, reloads only that ps's shards and
//     optimizer slots from the newest checkpoint, and retries the closures
//     the failure cut short; the other ps keep their newer values;
//   * rollback: as restore, but every ps is reloaded from the newest
//     checkpoint together, so the whole model (and the iterations counter)
//     returns to the checkpoint.
//
// Both recoveries pause dispatch and end the closures in flight first (a new
// fence generation), so that no closure runs while a ps is being reloaded.
#include <optional>
#include <string>

namespace twinps {

enum class PsFailurePolicy { kRaise, kRestore, kRollback };

// "raise", "restore", "rollback".
const char* ps_failure_policy_name(PsFailurePolicy policy);
// The policy named `name` (as ps_failure_policy_name spells it); nullopt otherwise.
std::optional<PsFailurePolicy> parse_ps_failure_policy(const std::string& name);

}  // namespace twinps
