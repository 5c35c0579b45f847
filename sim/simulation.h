#pragma once
// One run of a scenario: core's ClusterCoordinator, WorkerNodes and
// ParameterServerNodes on a InMemoryCluster, with the simulator's network model
// (NetworkModel as the LinkModel), parameter-server service queues
// (PsServiceTransport around each ps's transport), compute times (SimCostModel
// as the CostModel) and the scenario's faults fired at their simulated times.
// The coordinator program runs as a coroutine on the chief; killing the
// coordinator destroys it, and a restart runs it again from the top (the
// tutorial restores its latest checkpoint from storage that outlives the
// crash).
//
// Everything is deterministic: one thread, events in (time, sequence) order,
// every random stream forked from the seed. The trace hash folds every event
// (time and node) and every trace record: the same scenario and seed give the
// same hash on every run and machine.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/coordinator/cluster_coordinator.h"
#include "core/faults/faulty_transport.h"
#include "core/training/trainer.h"
#include "core/ps/parameter_store.h"
#include "core/runtime/trace.h"
#include "sim/network.h"
#include "sim/ps_service.h"
#include "sim/spec_workload.h"
#include "scenario.pb.h"  // generated from sim/scenario.proto

namespace twinps::sim {

struct SimProgress {
  Time now = 0;
  Time limit = 0;
  std::uint64_t events = 0;
  std::uint64_t scheduled = 0;  // closures, current coordinator
  std::uint64_t completed = 0;
};

struct SimOptions {
  std::optional<std::uint64_t> seed;  // overrides the scenario's
  TraceSink* trace = nullptr;         // also gets every trace record (e.g. a ChromeTraceWriter)
  // Keep every push a ps applied or refused, which check_invariants() needs.
  // Also on when the scenario expects `invariants`. It adds no event, so the
  // trace hash does not depend on it.
  bool record_invariants = false;
  // Called every `progress_every` events, and once at the end.
  std::function<void(const SimProgress&)> progress;
  std::uint64_t progress_every = 1 << 16;
  // What a NUMERIC scenario's `model_spec` trains: the compiled spec, its
  // data and the trainer's options (`twinps sim` builds it from the spec and
  // its flags). Required by such a scenario.
  std::shared_ptr<const SpecWorkload> spec;
};

// A closure's run on a worker, from the worker's trace span.
struct StepRecord {
  int worker = 0;
  std::uint64_t closure = 0;
  std::string fn;
  Time start = 0;
  Duration duration = 0;
  bool ok = false;
  int program_start = 0;
  std::uint64_t gradients = 0;    // gradients it pushed that the ps measured
  std::int64_t max_staleness = 0;  // the stalest of them (core/ps/staleness.h)
};

// One start of the coordinator program (the first, and one per restart).
struct ProgramStart {
  Time at = 0;
  Incarnation chief_incarnation = 0;
  int start_epoch = 0;  // the trainer's (a `train` action)
  bool finished = false;
  Status start_status;  // ClusterCoordinator::start()
  CoordinatorStats stats;
  std::vector<DispatchRecord> dispatch_log;
  std::vector<PsRecoveryRecord> ps_recoveries;  // restore/rollback in place (P10)
};

// A parameter server's counters (service, host link out and in).
struct PsReport {
  PsServiceStats service;
  NetworkModel::LinkStats uplink, downlink;
  double utilisation = 0;  // busy / (threads * simulated time)
};

struct ActionRecord {
  int program_start = 0;
  int index = 0;  // in the program
  std::string label;
  std::string kind;
  Status status;
  Time started = 0;
  Time ended = 0;
  std::uint64_t generation_after = 0;  // the coordinator's cancellation generation when it ended
  std::size_t values_end = 0;  // how many ValueRecords the run had when it ended
  std::optional<std::int64_t> iterations;  // read after a labelled action
  // A model with example ids: every example's visits the ps applied so far,
  // read after a labelled action (empty when unreadable or none).
  std::vector<std::int64_t> visits;
  // Every ps's counters when the action started and when it ended
  // (utilisation unset): a phase of the program is measured from their
  // differences (sim/tuner.h).
  std::vector<PsReport> ps_at_start, ps_at_end;
  // CPU time charged to every task by the host model when the action started
  // and ended, by slot (the chief, the workers, then the ps); empty without
  // hosts. `twinps tune --validate` compares it with what each process used.
  std::vector<Duration> cpu_at_start, cpu_at_end;
  // Real runs: how long each process had been runnable without a core (its
  // threads' run delay), by slot; empty in the simulator.
  std::vector<Duration> waiting_at_start, waiting_at_end;
};

// What the tasks had used when a `train` action's epoch ended (its
// EpochResult at the same index of SimResult.epochs): an epoch of a model
// spec is measured as a phase of a program is (tools/tune/real_run.h).
struct EpochMark {
  Time at = 0;  // the epoch's finished_at
  std::vector<Duration> cpu, waiting;  // by slot, as ActionRecord.cpu_at_end and waiting_at_end
};

struct ValueRecord {
  int program_start = 0;
  std::string label;
  int index = 0;  // within its schedule action
  std::string fn;
  ClosureId closure = 0;
  Time scheduled_at = 0;
  Time resolved_at = -1;  // when it got its result; -1: never
  // At the end of the run.
  RemoteValueStatus status = RemoteValueStatus::kNotReady;
  Status outcome;  // OK for a value, else the error it holds
};

struct SimResult {
  // Not OK when the scenario could not be set up (e.g. a partitioner that
  // gives a variable too many shards); nothing ran then.
  Status setup_error;
  std::string name;
  std::uint64_t seed = 0;
  scenario::Fidelity fidelity = scenario::NUMERIC;
  ClusterShape shape;
  bool finished = false;  // the program ended within the time limit
  Time end_time = 0;
  Time time_limit = 0;
  std::uint64_t events = 0;
  std::uint64_t events_skipped = 0;
  std::uint64_t trace_records = 0;
  std::uint64_t trace_hash = 0;
  std::uint64_t messages_lost = 0;
  // With scenario.message_faults: what the plan did to the workers' pulls and
  // pushes, and the duplicate pushes the ps (live at the end) dropped.
  CallFaultCounts message_faults;
  std::uint64_t duplicate_pushes_dropped = 0;
  CoordinatorStats stats;  // summed over program starts (stats.staleness: of completed closures)
  // Staleness of every gradient the parameter servers live at the end
  // applied, as they counted it (a restarted ps counts from its start).
  StalenessHistogram ps_staleness;
  std::vector<ProgramStart> starts;
  std::vector<ActionRecord> actions;
  std::vector<ValueRecord> values;
  std::vector<StepRecord> steps;
  std::vector<PsReport> ps;
  std::vector<PushRecord> pushes;  // with record_invariants
  std::vector<training::EpochResult> epochs;  // trained by `train` actions
  std::vector<EpochMark> epoch_marks;         // parallel to epochs
  std::optional<model::MetricValues> eval;    // the last `train` action's evaluation after training
  std::optional<std::int64_t> final_iterations;  // read from the stores at the end
  std::int64_t steps_made_up = 0;  // trainer steps trained again after ps recoveries (P14)
  // NUMERIC: training::parameter_hash() of the trainable shards the live
  // parameter servers hold at the end.
  std::optional<std::uint64_t> parameter_hash;
  std::vector<std::string> faults;  // what was injected, when
  bool invariants_recorded = false;
};

class Simulation {
 public:
  // `scenario` must have passed validate_scenario().
  Simulation(const scenario::Scenario& scenario, SimOptions options = {});
  ~Simulation();
  Simulation(const Simulation&) = delete;
  Simulation& operator=(const Simulation&) = delete;

  SimResult run();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace twinps::sim
