#pragma once
// From the model spec's messages (model_spec.proto) to core's own types:
// optimizer configs, partitioners, initializers. The spec loader uses them
// to check a spec (so an error names the field), the compiler to build it.
#include "core/ps/optimizer_config.h"
#include "core/runtime/status.h"
#include "core/variables/initializers.h"
#include "core/variables/partitioner.h"
#include "model/model_spec.pb.h"  // generated from core/model/model_spec.proto

namespace twinps::model {

// The group's rule, parameters and learning rate; INVALID_ARGUMENT (naming
// the parameter) for values the optimizer refuses.
StatusOr<OptimizerConfig> optimizer_config(const spec::OptimizerGroup& group);
// The optimizer of a spec without `optimizer` entries: SGD(0.01).
OptimizerConfig default_optimizer_config();

// The partitioner, or INVALID_ARGUMENT for bad arguments or none chosen.
StatusOr<PartitionerPtr> make_partitioner(const spec::Partitioner& p);

// `spec` converted, or `fallback` when no kind is set.
Initializer make_initializer(const spec::Initializer& init, Initializer fallback);

}  // namespace twinps::model
