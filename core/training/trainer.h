#pragma once
// The trainer: what Keras's Model.fit does for ParameterServerStrategy,
// written once in core and driven by the coordinator, so that `twinps train`
// (the in-memory cluster, an in-process gRPC cluster, separate processes)
// and the simulator's numeric mode run the same training:
//
//   * the model's variables are created from the newest checkpoint that
//     verifies, or fresh; a restored run resumes at epoch
//     iterations // steps_per_epoch (TensorFlow's tutorial, spec P7);
//   * the spec is shipped to every worker (core/training/model_functions.h),
//     the training data is a per-worker dataset, repeated forever (or,
//     exactly once, every record on every worker and each closure's records
//     chosen by the coordinator: core/training/exactly_once.h), and each
//     epoch schedules steps_per_epoch steps in closures of
//     steps_per_execution steps, then joins and reads the epoch's metrics;
//   * checkpoints are saved every N epochs (and after the last) and, within
//     epochs, every N steps or S seconds on the executor's clock (simulated
//     time in the simulator), joining first so that a checkpoint is a
//     consistent snapshot; the manager keeps the newest N;
//   * evaluation, every N epochs and after training: distributed (closures
//     of one batch on the workers, metrics summed on a ps, as TensorFlow's
//     tutorial) or direct (on the coordinator, every evaluation record once);
//   * progress (examples/s, loss) every so often through a callback.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/checkpoint/checkpoint_manager.h"
#include "core/coordinator/cluster_coordinator.h"
#include "core/data/record_dataset.h"
#include "core/model/compiled_model.h"
#include "core/training/data_source.h"

namespace twinps::training {

// How train steps get their records.
enum class Visitation {
  // TensorFlow's: each worker's iterator reads its shard of the data round
  // and round; a restarted worker's iterator starts again and a closure put
  // back after a worker failure reads another worker's data (spec L1, R10).
  kAtLeastOnce,
  // Every record once per epoch, whatever workers die (core/training/exactly_once.h).
  kExactlyOnce,
};

enum class EvalMode {
  kDistributed,  // eval closures on the workers, metrics accumulated on a ps
  kDirect,       // on the coordinator: every record of the evaluation data once
};

struct TrainerOptions {
  int epochs = 1;
  // Steps per epoch; 0: one pass over the training data (its records divided
  // by the batch size, rounded up).
  std::int64_t steps_per_epoch = 0;
  // Steps each closure runs (Keras's steps_per_execution).
  std::int64_t steps_per_execution = 1;

  // Checkpoints (none when null): every N epochs and after the last; within
  // epochs every N steps and/or S seconds since the last save (0: off).
  CheckpointManager* checkpoints = nullptr;
  int checkpoint_every_epochs = 1;
  std::int64_t checkpoint_every_steps = 0;
  Duration checkpoint_every = 0;
  // Saved in every checkpoint, beside what the trainer records itself
  // (the model spec, the epoch, epochs, steps per epoch): a side-car
  // evaluator reads it.
  std::map<std::string, std::string> checkpoint_metadata;

  // Evaluation, when the trainer has evaluation data: after every N epochs
  // (0: only after training) and always after the last.
  int eval_every_epochs = 1;
  EvalMode eval_mode = EvalMode::kDistributed;
  // Distributed: closures of one batch each; 0: one pass's worth (the
  // evaluation records divided by the batch size, rounded up).
  std::int64_t eval_steps = 0;

  // How often on_progress is called (executor clock); 0: never.
  Duration progress_every = 0;

  // kExactlyOnce: the steps go through the records pass after pass, each
  // pass in an order drawn from (data_seed, pass), or file order when
  // !shuffle_records, each record once per pass; the ps failure policy must
  // be raise (a restore or rollback takes applied splits back) and sync mode
  // must have no backup workers (their gradients are dropped).
  Visitation visitation = Visitation::kAtLeastOnce;
  std::uint64_t data_seed = 1;
  bool shuffle_records = true;
};

// Exactly-once training: how many times the parameter servers counted each
// training example at the end (CompiledModel::kVisits), against what the
// steps trained (this run's and a restored checkpoint's) were due to visit.
struct VisitCounts {
  std::int64_t examples = 0;
  std::int64_t full_passes = 0;      // every example is due this many visits ...
  std::int64_t partial_records = 0;  // ... and these of the next pass one more
  std::int64_t min = 0, max = 0;
  std::int64_t off = 0;              // examples visited other than due
  bool exact() const { return examples > 0 && off == 0; }
};

// Metrics of one epoch.
struct EpochResult {
  int epoch = 0;
  model::MetricValues train;                 // accumulated over the epoch's steps
  std::optional<model::MetricValues> eval;   // when evaluated after this epoch
  std::int64_t iterations = 0;               // the optimizer's step counter after it
  Time finished_at = 0;
  double examples_per_second = 0;            // the epoch's steps x batch / its time on the executor's clock
};

struct Progress {
  int epoch = 0;
  int epochs = 0;
  std::int64_t steps_done = 0;  // of this epoch, by closures finished
  std::int64_t steps_per_epoch = 0;
  double examples_per_second = 0;  // since the previous report
  std::optional<double> loss;      // the newest finished closure's
  Time now = 0;
};

struct StartInfo {
  int start_epoch = 0;
  std::int64_t steps_per_epoch = 0;
  std::optional<std::string> restored_from;  // checkpoint name
  std::int64_t restored_iterations = 0;
  std::vector<RefusedCheckpoint> refused;    // newer checkpoints that did not verify
};

struct TrainerCallbacks {
  std::function<void(const StartInfo&)> on_start;
  // The coordinator has started: the cluster is formed and the variables are
  // created (`twinps sim --real` times its faults from here).
  std::function<void()> on_cluster_formed;
  std::function<void(const EpochResult&)> on_epoch;
  std::function<void(const std::string& checkpoint)> on_checkpoint;
  std::function<void(const Progress&)> on_progress;
  // Every closure the trainer schedules (train and eval steps) with its
  // RemoteValue: the simulator records them for its expectations.
  std::function<void(const std::string& fn, const RemoteValue&)> on_scheduled;
};

struct TrainResult {
  StartInfo start;
  std::vector<EpochResult> epochs;  // those this run trained
  std::optional<model::MetricValues> eval;  // the evaluation after training
  double final_loss = 0;            // the last closure's last step's loss
  std::int64_t steps_trained = 0;
  std::int64_t iterations = 0;      // the optimizer's step counter at the end
  // restore/rollback (P14): steps trained again at epoch ends because a ps
  // recovery took the iterations counter back.
  std::int64_t steps_made_up = 0;
  Time training_started = 0, training_finished = 0;
  // What the training data's readers read, summed over every closure (a
  // closure that failed and ran again counts once).
  data::ReadStats read;
  // Exactly-once training only.
  std::optional<VisitCounts> visits;
};

class Trainer {
 public:
  // `registry` must hold the data sources' functions (direct evaluation builds
  // the evaluation data on the coordinator with them).
  Trainer(std::shared_ptr<const model::CompiledModel> model, const FunctionRegistry& registry, DataSource train,
          std::optional<DataSource> eval, TrainerOptions options, TrainerCallbacks callbacks = {});

  // The options' problems (an epoch count below 1, a pass with no record
  // count ...), naming the option; OK when run() can start.
  Status check() const;

  // Trains on the cluster `coordinator` drives; it must not be started yet.
  // Errors: the coordinator's (a ps lost, an application error in a step
  // naming its file and record ...), a checkpoint that cannot be restored.
  Task<StatusOr<TrainResult>> run(ClusterCoordinator& coordinator);

  // The steps of one epoch (options or one pass of the training data).
  std::int64_t steps_per_epoch() const;

  // Metadata keys a checkpoint carries.
  static constexpr char kSpecKey[] = "model_spec";          // the spec, Protobuf text
  static constexpr char kEpochKey[] = "epoch";              // the epoch just finished (epoch saves only)
  static constexpr char kEpochsKey[] = "epochs";
  static constexpr char kStepsPerEpochKey[] = "steps_per_epoch";

 private:
  struct Run;
  std::shared_ptr<const model::CompiledModel> model_;
  const FunctionRegistry& registry_;
  DataSource train_;
  std::optional<DataSource> eval_;
  TrainerOptions options_;
  TrainerCallbacks callbacks_;
};

// Full variable values from shards restored onto one parameter server
// (side-car evaluation): each variable's shards stacked in row order.
model::LocalEvaluator::VariableValues full_values(const std::vector<VariableLayout>& layouts,
                                                  const std::vector<ShardState>& shards);

}  // namespace twinps::training
