#pragma once
// A scenario's coordinator program (its `program` actions) run on a
// ClusterCoordinator, each action and each RemoteValue recorded into a
// SimResult for the expectations. The simulator runs it on simulated nodes
// (sim/simulation.cc); `twinps sim --real` runs the same program on a
// coordinator talking to real processes (tools/real_scenario.h): one program,
// written once, in both modes.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/coordinator/cluster_coordinator.h"
#include "core/coordinator/epoch_splits.h"
#include "core/model/compiled_model.h"
#include "core/models/synthetic/synthetic.h"
#include "core/runtime/task.h"
#include "core/training/trainer.h"
#include "scenario.pb.h"  // generated from sim/scenario.proto
#include "sim/simulation.h"

namespace twinps::sim {

class ScenarioProgram {
 public:
  struct Hooks {
    // Every ps's counters, kept in each ActionRecord (the simulator's service
    // model); empty: none kept.
    std::function<std::vector<PsReport>()> ps_counters;
    // CPU time the simulated hosts charged every task (ActionRecord.cpu_at_*);
    // empty: none kept.
    std::function<std::vector<Duration>()> task_cpu;
    // Real runs: each task's time runnable without a core, by slot
    // (ActionRecord.waiting_at_*); empty: none kept.
    std::function<std::vector<Duration>()> task_waiting;
    // A `train` action: the trainer on this coordinator; empty: a train action
    // fails with UNIMPLEMENTED, saying so.
    std::function<Task<Status>(ClusterCoordinator& c, int start, const std::string& label)> train;
    // Called once, when the coordinator has started (the cluster is set up
    // and the variables created): a synthetic model's before the first
    // action, a model spec's from inside its first `train` action, where the
    // trainer starts it. Empty: nothing.
    std::function<void()> on_started;
  };

  // A synthetic model's program runs on `workload` with `variables` (both
  // outlive this); a model spec's (`workload` null) has only `train` actions.
  ScenarioProgram(std::vector<scenario::Action> actions, synthetic::Workload* workload,
                  const synthetic::Variables* variables, SimResult& result, Hooks hooks);

  // Runs the program from the top as program start `start` (an index into
  // result.starts) on `c`, whose executor is `ex`; the watchers of its
  // RemoteValues run in `scope`. Sets the start's `finished` at the end.
  Task<void> run(ClusterCoordinator& c, Executor& ex, TaskScope& scope, int start);
  bool done() const { return done_; }

  // Keeps a closure the program (or its trainer) got, for expectations and
  // invariants, and watches it (resolved_at).
  void record_value(ClusterCoordinator& c, Executor& ex, TaskScope& scope, int start, const std::string& label,
                    int index, const std::string& fn, const RemoteValue& rv);
  // At the end of the run: every recorded value's status and outcome.
  void settle_values();

  // What a `train` action trains: a compiled model spec, its data and the
  // trainer's options.
  struct TrainerSetup {
    std::shared_ptr<const model::CompiledModel> model;
    const FunctionRegistry* registry = nullptr;
    training::DataSource train;
    std::optional<training::DataSource> eval;
    training::TrainerOptions options;
  };
  // A `train` action as both modes run it (their Hooks::train call this):
  // the trainer on `c`, as `twinps train` runs it; the epoch it started at,
  // every epoch and the evaluation after training kept in the result, and
  // every closure it schedules recorded under the action's label.
  Task<Status> train(ClusterCoordinator& c, Executor& ex, TaskScope& scope, int start, const std::string& label,
                     TrainerSetup setup);

 private:
  Task<void> run_action(ClusterCoordinator& c, Executor& ex, TaskScope& scope, int start, int index,
                        const scenario::Action& a, const PerWorkerValues& iterator);
  Task<void> watch(Executor& ex, std::size_t value, RemoteValue rv);
  // A schedule action's closures: its count, or enough for its for_s at pace_.
  int closures_to_schedule(const scenario::Schedule& s, int workers) const;
  Task<Status> run_trainer(ClusterCoordinator& c, std::unique_ptr<training::Trainer> trainer);
  // Hooks::on_started, the first time the coordinator has started.
  void started();

  std::vector<scenario::Action> actions_;
  synthetic::Workload* workload_;
  const synthetic::Variables* variables_;
  SimResult& result_;
  Hooks hooks_;
  std::vector<RemoteValue> remote_values_;  // parallel to result_.values
  // Exactly-once visitation: the splits handed to train closures, from the
  // first epoch at every program start.
  std::optional<EpochSplits> splits_;
  bool done_ = false;
  bool started_ = false;  // on_started was called
  struct {
    int count = 0;
    Time started = 0;
  } last_schedule_;   // the newest schedule action
  double pace_ = 0;  // closures per second of that action, measured at the join after it
};

// The scenario's coordinator settings, with the dispatch log kept (the
// dataset_rebuilt expectation reads it).
CoordinatorOptions coordinator_options(const scenario::Coordinator& co);

// The counter `iterations` read through the coordinator's parameter client;
// nullopt when the model has none or its ps does not answer.
Task<std::optional<std::int64_t>> read_iterations(ClusterCoordinator& c);

// The `visits` variable's counts (one per example) read through the
// coordinator's parameter client; empty when the model has none or its ps
// does not answer.
Task<std::vector<std::int64_t>> read_visits(ClusterCoordinator& c);

// The scenario's `action` kind, as records name it ("schedule", "join" ...).
const char* action_kind(const scenario::Action& a);

}  // namespace twinps::sim
