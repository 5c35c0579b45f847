#pragma once
// How a worker gets the user's model without being rebuilt: the coordinator
// ships the model spec. TensorFlow ships traced functions to its workers;
// twinps's workers already hold every layer, loss and step function (one
// binary), so what must travel is only the spec. It travels as a per-worker
// resource: kModelFunction compiles the spec on each worker, and the
// coordinator builds it again on a worker that restarts (spec R7-R10), so a
// restarted `twinps serve` gets the model back with its datasets. The spec
// on the coordinator is the one source of truth: there is no copy on the
// workers to drift from it.
//
// The step functions take the model resource as argument 0:
//   kTrainStep [model, iterator, steps]: `steps` training steps; returns a
//     StepReport (the last step's loss and what the iterator read);
//   kEvalStep  [model, iterator]: one evaluation batch into the eval metrics.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/data/record_dataset.h"
#include "core/messages/value.h"
#include "core/model/compiled_model.h"
#include "core/worker/function_registry.h"

namespace twinps::training {

inline constexpr char kModelFunction[] = "training/model";
inline constexpr char kTrainStep[] = "training/train_step";
inline constexpr char kEvalStep[] = "training/eval_step";

// A compiled model on a worker.
class ModelResource final : public Resource {
 public:
  explicit ModelResource(std::shared_ptr<const model::CompiledModel> model) : model_(std::move(model)) {}
  const model::CompiledModel& model() const { return *model_; }

 private:
  std::shared_ptr<const model::CompiledModel> model_;
};

// The kModelFunction arguments that ship `spec`.
std::vector<Value> model_args(const model::spec::ModelSpec& spec);

// What a train closure returns: the last step's loss and what its iterator
// read while it ran (the run summary adds these up).
struct StepReport {
  double loss = 0;
  std::int64_t records_read = 0;
  std::int64_t records_skipped = 0;
  std::int64_t files_cut_short = 0;
  std::int64_t passes_completed = 0;

  Value to_value() const;
  // INVALID_ARGUMENT for a value that is not a StepReport.
  static StatusOr<StepReport> from_value(const Value& v);
};

// Registers kModelFunction, kTrainStep and kEvalStep.
void register_model_functions(FunctionRegistry& registry);

// What every twinps task registers to train any model spec: the model
// functions above, the data functions (core/training/data_source.h) and
// exactly-once training's (core/training/exactly_once.h).
void register_training_functions(FunctionRegistry& registry);

}  // namespace twinps::training
