#pragma once
// The scenario's synthetic `model` as core's synthetic model
// (core/models/synthetic): the step functions live in core so that real
// clusters run them too; the simulator only translates its schema.
#include "core/models/synthetic/synthetic.h"
#include "scenario.pb.h"  // generated from sim/scenario.proto

namespace twinps::sim {

using synthetic::kFailFn;
using synthetic::kInfiniteFlagVar;
using synthetic::kIterationsVar;
using synthetic::kTrainFn;

// The model a scenario (or a model file) describes. INVALID_ARGUMENT if its
// partitioner's arguments are out of range; everything else must have passed
// validation (sim/scenario_loader.h). `ps` prices an automatic placement
// (both modes pass the scenario's, so both place the same way).
StatusOr<synthetic::ModelSpec> model_spec(const scenario::SyntheticModel& model,
                                          const scenario::PsService& ps = scenario::PsService());

}  // namespace twinps::sim
