#pragma once
// A scenario's faults as ClusterControl faults (core/faults/fault_schedule.h):
// what the simulator and `twinps sim --real` both schedule. Faults that only
// the simulator's models can express (a slower host link, a hot variable)
// have none.
#include <optional>

#include "core/faults/fault_schedule.h"
#include "scenario.pb.h"  // generated from sim/scenario.proto

namespace twinps::sim {

// The fault as a ClusterControl fault; nullopt for a simulator-only kind.
// `f` must have passed validate_scenario().
std::optional<ClusterFault> cluster_fault(const scenario::Fault& f);

}  // namespace twinps::sim
