#pragma once
// A model spec (core/model/model_spec.proto) as the simulator runs it, so
// that the model a user trains is the object the simulator and the tuner
// reason about:
//
//   * NUMERIC: the trainer (core/training) trains the compiled spec on the
//     scenario's cluster, with the data and options `twinps sim` was given
//     (SpecWorkload, passed in SimOptions) — the same trainer, step
//     functions and data pipeline as `twinps train`;
//   * TIMING_ONLY and `twinps tune`: the spec becomes a synthetic model
//     (core/models/synthetic) with the spec's variables, shapes and shard
//     layout, each embedding looked up batch x ids-per-record times per step
//     from its declared access distribution, and the spec's FLOPs per step
//     (CompiledModel::step_cost()). The synthetic model's row drawing and
//     meta-tensor pulls and pushes then time it: one timing path for both.
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/config/text_proto.h"
#include "core/coordinator/training_mode.h"
#include "core/model/compiled_model.h"
#include "core/runtime/status.h"
#include "core/training/data_source.h"
#include "core/training/trainer.h"
#include "scenario.pb.h"  // generated from sim/scenario.proto

namespace twinps::sim {

// What a NUMERIC scenario with a `model_spec` trains.
struct SpecWorkload {
  std::shared_ptr<const model::CompiledModel> model;
  training::DataSource train;
  std::optional<training::DataSource> eval;
  // Epochs, steps per epoch and execution, evaluation (no checkpoints: the
  // simulator keeps its own storage).
  training::TrainerOptions options;
  // The spec's training.mode and staleness_bound (with --mode and
  // --staleness-bound): used when the scenario's coordinator sets no mode.
  TrainingMode mode = TrainingMode::kAsync;
  std::int64_t staleness_bound = 0;
  std::int64_t backup_workers = 0;  // mode sync
  // The spec's training.ps_failure (with --ps-failure-policy) and
  // ps_recovery_wait_s: used when the scenario's coordinator sets no policy.
  PsFailurePolicy ps_failure = PsFailurePolicy::kRaise;
  Duration ps_recovery_wait = 60 * kSecond;
};

// The synthetic model that times `model`'s train step. Metric accumulators
// are left out (a few floats per step). INVALID_ARGUMENT when a partitioner
// of the spec cannot be expressed (none today). `read_kernel`: how the
// data is read (training::DataSource::read_kernel), whose price the step
// then includes; empty when the data is unknown (the input layer's
// mapping is charged either way).
StatusOr<scenario::SyntheticModel> synthetic_model_of(const model::CompiledModel& model,
                                                      std::string_view read_kernel = {});

}  // namespace twinps::sim

namespace twinps::sim {

// A `--model` file to time (`twinps tune`): a model spec or a synthetic
// model (scenario.SyntheticModel), told apart by the schema its text parses
// under. A spec is checked (its errors at their line:column in the file)
// and made into the synthetic model that times it.
struct TimedModel {
  scenario::SyntheticModel model;
  bool from_spec = false;  // the file is a model spec
  // Empty: loaded. Neither schema parses: each one's first error, the
  // schema whose parse got further first.
  std::vector<config::TextProtoError> errors;
  bool ok() const { return errors.empty(); }
};
TimedModel load_timed_model_file(const std::string& path);

}  // namespace twinps::sim
