#pragma once
// Predictions for `twinps tune`: how fast a synthetic model trains on a given
// cluster, by simulation. predict() builds a scenario in code and runs it on
// the simulator (sim/simulation.h) — the same coordinator, workers, parameter
// servers and step functions as every other run — with the program a real
// measurement runs (tools/tune/real_run.h): schedule `warmup` train closures
// and join, then schedule `measured` closures and join; the second phase is
// measured. sweep() predicts every (ps count, partitioner kind, shard count,
// placement) and ranks them.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/runtime/status.h"
#include "scenario.pb.h"  // generated from sim/scenario.proto
#include "sim/simulation.h"

namespace twinps::sim {

struct PredictRequest {
  scenario::SyntheticModel model;   // with its partitioner
  int workers = 1;
  int ps = 1;
  scenario::CostProfile profile;    // network, compute, ps_service
  int warmup = 0;    // closures scheduled and joined before the measurement; 0: 4 per worker
  int measured = 0;  // closures measured after that; 0: 20 per worker
  std::uint64_t seed = 1;
  bool timing_only = true;
  std::vector<std::pair<int, double>> stragglers;  // (worker, compute factor)
};

struct Prediction {
  int warmup = 0, measured = 0;   // closures of the two phases
  double measured_seconds = 0;    // from the measured closures' schedule to the end of their join
  double steps_per_second = 0;   // measured steps / that time
  double step_p50_s = 0, step_p99_s = 0;
  // Per ps, busy fraction over the measured phase: of its busiest resource —
  // its service threads, its host link out or its host link in — so that a ps
  // whose link is saturated shows as busy as one whose CPU is.
  std::vector<double> ps_utilisation;
  std::vector<double> ps_bytes_per_step;   // per ps, request+reply bytes per step
  double simulated_seconds = 0;
  std::uint64_t events = 0;
  // CPU seconds per measured step, summed over each role's tasks (the
  // coordinator, every worker, every ps), as the host model charged them:
  // what `twinps tune --validate` compares with each process's measured CPU.
  // Zero without hosts in the profile.
  double chief_cpu_per_step_s = 0, worker_cpu_per_step_s = 0, ps_cpu_per_step_s = 0;
  // The same per task, by slot (the chief, the workers, the ps): empty
  // where nothing measured CPU.
  std::vector<double> cpu_per_step_s;
  // Real runs: seconds per step each task was runnable but had no core, by slot.
  std::vector<double> waiting_per_step_s;
};

// The program a prediction and a real measurement both run — one program, in
// both modes (`twinps tune --validate` compares them): schedule the warm-up
// closures and join, then schedule the measured closures and join. Measured:
// `request.measured` closures, or with it 0 and `measured_for_s` > 0, as many
// as the warm-up's pace fills that many seconds (Schedule.for_s), or else 20
// per worker. kProfile: the simulator's costs from `request.profile`;
// kThisMachine: none (a real cluster has this machine's own).
enum class CostsOf { kProfile, kThisMachine };
scenario::Scenario throughput_scenario(const PredictRequest& request, CostsOf costs, double measured_for_s = 0);

// What that program's run shows, simulated or real (tools/real_scenario.h):
// steps per second of the measured phase and, where they were recorded, step
// times, CPU per step, and the ps service model's utilisation and bytes. The
// first failed action's error, or DEADLINE_EXCEEDED if it did not finish.
StatusOr<Prediction> read_throughput(const SimResult& result, const PredictRequest& request);

// Simulated runs a prediction pools (pooled: its seed, then the next ones):
// 3 where the profile's hosts draw each job's time (hosts.duration_spread >
// 0), else 1. With drawn times a busy host, scheduled tick by tick, falls
// into step with its ticks or out of it by the draw: on the saved grid of
// 2026-11-30 03:52 one configuration's prediction moved 8.2 points from seed
// to seed, and the shard picks were 3, 2 and 2 of 4 (docs/fidelity.md).
int draws_per_prediction(const scenario::CostProfile& profile);

// Pools draws_per_prediction() runs of the program.
// INVALID_ARGUMENT for a request the simulator cannot run (a model or profile
// that fails the scenario checks, workers or ps < 1, negative counts);
// DEADLINE_EXCEEDED if the program does not finish within 10 simulated hours;
// a closure's error if one failed.
StatusOr<Prediction> predict(const PredictRequest& request);

// ---------------------------------------------------------------- sweep

enum class PartitionerKind { kFixed, kMinSize, kMaxSize };
// "fixed", "min_size", "max_size"
const char* partitioner_name(PartitionerKind kind);
// "round_robin", "auto"
const char* placement_name(scenario::VariablePlacement placement);
StatusOr<scenario::VariablePlacement> parse_placement(const std::string& name);
StatusOr<PartitionerKind> parse_partitioner_kind(const std::string& name);

// The partitioner of `kind` that splits the model's largest variable (in
// bytes) into `shards` shards: FixedShardsPartitioner(shards);
// MinSizePartitioner(min_shard_bytes = its bytes / shards, max_shards =
// shards); MaxSizePartitioner(max_shard_bytes = bytes of ceil(rows / shards)
// rows). Size-based kinds give smaller variables fewer shards, as they would
// in TensorFlow. INVALID_ARGUMENT if the largest variable has fewer rows
// than `shards`, or if the kind's arithmetic cannot give exactly `shards`
// (max_size: 10 rows in 6 shards of 2 rows are 5).
StatusOr<scenario::Partitioner> partitioner_for(const scenario::SyntheticModel& model, PartitionerKind kind,
                                                int shards);

struct SweepRequest {
  scenario::SyntheticModel model;  // its partitioner is replaced by each candidate's
  int workers = 1;
  std::vector<int> ps;                     // candidate ps counts
  std::vector<PartitionerKind> partitioners;
  std::vector<int> shards;                 // candidate shard counts of the largest variable
  // Placements to try for each (ps, partitioner, shards): round-robin
  // (TensorFlow's) and/or automatic (core/variables/auto_placement.h).
  std::vector<scenario::VariablePlacement> placements{scenario::ROUND_ROBIN};
  scenario::CostProfile profile;
  std::uint64_t seed = 1;
  // A configuration with fewer ps whose predicted steps/s is within this
  // fraction of the fastest is recommended instead (the fastest of those
  // with the fewest ps).
  double tolerance = 0.02;
  // Simulated events a configuration may cost, roughly: bounds the
  // measured closures (see closures_for()). The speed of the sweep.
  std::uint64_t event_budget = 300000;
};

struct SweepRow {
  int rank = 0;  // 1 = fastest
  int ps = 0;
  PartitionerKind partitioner = PartitionerKind::kFixed;
  int shards = 0;
  scenario::VariablePlacement placement = scenario::ROUND_ROBIN;
  scenario::Partitioner partitioner_config;
  int warmup = 0, measured = 0;  // the closures it was predicted with
  Prediction prediction;
  double max_ps_utilisation = 0;
  int busiest_ps = 0;             // by bytes per step
  double max_ps_bytes_share = 0;  // the busiest ps's share of every ps's bytes (0..1)
  double bytes_per_step_max_ps = 0;
  bool recommended = false;
  bool same_as_earlier = false;  // the same layout as a row predicted before: its prediction was reused
};

struct SweepResult {
  std::vector<SweepRow> rows;  // ranked, fastest first
  int recommended = -1;        // index into rows
  std::string reason;          // why, from the numbers
  std::vector<std::string> skipped;  // candidates that cannot exist (more shards than rows ...)
  std::uint64_t events = 0;    // simulated, over every prediction
};

// How many closures a configuration is predicted with: `warmup` is 2 per
// worker (every worker has run and the ps queues have formed); `measured`
// aims at 20 per worker but is cut so that the configuration costs about
// `event_budget` simulated events, keeping at least 4 per worker and 200 in
// all so that the measurement's end — the last closures draining — stays a
// small part of it. A step costs about 10 + 6 events per ps it visits, and
// drawing its embedding rows about one event's time per 25 rows.
struct ClosureCounts {
  int warmup = 0, measured = 0;
};
ClosureCounts closures_for(int workers, int ps_per_step, std::int64_t rows_per_step, std::uint64_t event_budget);

// Every candidate, ranked. `progress(done, total)` after each prediction.
// INVALID_ARGUMENT if no candidate can exist; the error of a prediction that
// failed.
StatusOr<SweepResult> sweep(const SweepRequest& request,
                            const std::function<void(int done, int total)>& progress = nullptr);

}  // namespace twinps::sim
