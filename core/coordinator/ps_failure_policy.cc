#include "core/coordinator/ps_failure_policy.h"

namespace twinps {

const char* ps_failure_policy_name(PsFailurePolicy policy) {
  switch (policy) {
    case PsFailurePolicy::kRaise: return "raise";
    case PsFailurePolicy::kRestore: return "restore";
    case PsFailurePolicy::kRollback: return "rollback";
  }
  return "?";
}

std::optional<PsFailurePolicy> parse_ps_failure_policy(const std::string& name) {
  for (auto p : {PsFailurePolicy::kRaise, PsFailurePolicy::kRestore, PsFailurePolicy::kRollback})
    if (name == ps_failure_policy_name(p)) return p;
  return std::nullopt;
}

}  // namespace twinps
