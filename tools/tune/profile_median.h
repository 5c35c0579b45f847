#pragma once
// One profile from several calibrations of one machine: every price the
// median of the profiles' prices, field by field and curve point by curve
// point. A calibration's prices move with the machine's state while it
// measures (on this VM one profile's draw moved validation rows by up to 20
// points, docs/fidelity.md); the median of a few keeps what they agree on.
#include <string>
#include <vector>

#include "core/runtime/status.h"
#include "scenario.pb.h"  // generated from sim/scenario.proto

namespace twinps::cli {

// The profiles must come from the same calibration method: the same fields
// set, the same number of points on every curve at the same sizes, the same
// data plane and settings (strings, enums, flags). INVALID_ARGUMENT names the
// first field where profile `i` (0-based) differs from the first profile.
// measured_on becomes "the median of N calibrations: " and the first's.
StatusOr<scenario::CostProfile> median_profile(const std::vector<scenario::CostProfile>& profiles);

}  // namespace twinps::cli
