#pragma once
// Record a real run as a scenario the simulator replays (`--record-faults`,
// issue 12 point 3). The recorder listens to the coordinator's own events
// (CoordinatorOptions::on_event): which worker it gave up and why, when it
// came back and as which incarnation, which ps it found failed, how long its
// closures ran. It never knows what was injected: a worker killed by
// someone, stopped by SIGSTOP, or cut off reads to it as the coordinator saw
// it, and becomes the fault that makes the simulated coordinator see the same:
//
//   given up, came back as a new incarnation      -> kill_worker (it died),
//     or refused a call and never came back           from when it was given up
//                                                     until it came back
//   missed its health checks (they timed out),    -> pause "worker:i" (hung),
//     came back as the same incarnation               from when it last answered
//                                                     until it came back
//   missed its health checks (UNAVAILABLE), same  -> partition { a: "worker:i" }
//     incarnation                                     (unreachable), same times
//   a closure failed naming a ps                  -> kill_ps from then
//   a ps missed its health checks                 -> pause "ps:j" from then
//
// Times are relative to the moment the coordinator had formed the cluster
// (its kStarted event): forming a real cluster takes real time, a simulated
// one milliseconds, so that moment is each mode's time 0 of training.
//
// The expectations are the run's own outcome: the worker failures and
// recoveries it had, retries at least one per failure it retried after, the
// datasets rebuilt, the errors raised, each labelled action's outcome, and
// the iterations within the bounds the run's counters give.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/coordinator/cluster_coordinator.h"
#include "scenario.pb.h"  // generated from sim/scenario.proto

namespace twinps::sim {

// What the run ended with, as its program saw it.
struct RecordedOutcome {
  CoordinatorStats stats;
  // Labelled actions' results, in program order (the last of a label wins).
  std::vector<std::pair<std::string, Status>> labelled;
  // Labels after which iterations were read, and the value (the recorder
  // bounds the last one; nullopt: the end's).
  std::optional<std::string> iterations_after;
  std::optional<std::int64_t> iterations;
  // Every RemoteValue the program got was resolved (nullopt: not known).
  std::optional<bool> all_closures_resolved;
  // The program's closures run steps that loop (`infinite`): a closure may
  // add any number of iterations, so they get no upper bound.
  bool infinite_steps = false;
  // The workload keeps a per-worker dataset (rebuilt after a recovery).
  bool per_worker_dataset = true;
  // Steps (iterations) each closure adds: a retried closure may add them twice.
  std::int64_t steps_per_closure = 1;
};

class FaultRecorder {
 public:
  // To set as CoordinatorOptions::on_event (the recorder must outlive the coordinator's run).
  std::function<void(const CoordinatorEvent&)> observer();

  // `base` is the run's scenario without faults or expectations (cluster,
  // workload, coordinator, program, network); returns it with the observed
  // faults, the measured step time and the outcome's expectations. `how` is
  // how the run was made (for the header).
  scenario::Scenario scenario(scenario::Scenario base, const RecordedOutcome& outcome) const;
  // The scenario as text, with a header saying what was observed and how.
  std::string text(const scenario::Scenario& recorded, const std::string& how) const;

  // Closures whose run time is not one step (infinite loops) are left out of
  // the measured step time.
  void exclude_from_step_time(std::uint64_t closure) { excluded_.push_back(closure); }

  const std::vector<CoordinatorEvent>& events() const { return events_; }
  // One line per observed fault, for the header and the tools' output.
  std::vector<std::string> observations() const;

 private:
  struct Observed {
    scenario::Fault fault;
    std::string note;  // what the coordinator saw
  };
  std::vector<Observed> observed_faults() const;
  double since_start(Time t) const;
  // Median run time of the closures that finished (seconds), and how many.
  std::optional<std::pair<double, std::size_t>> median_step_s() const;

  std::vector<CoordinatorEvent> events_;
  std::optional<Time> started_;
  std::vector<std::uint64_t> excluded_;
};

// The scenario's Coordinator message for these options (the inverse of
// coordinator_options()).
scenario::Coordinator scenario_coordinator(const CoordinatorOptions& o, double ps_call_timeout_s);

}  // namespace twinps::sim
