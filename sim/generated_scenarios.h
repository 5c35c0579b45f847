#pragma once
// Scenarios built in code rather than read from a file: the swarm test's
// random fault schedules, and the timing-only benchmark cluster.
#include <cstdint>
#include <string>
#include <vector>

#include "core/runtime/time.h"
#include "scenario.pb.h"  // generated from sim/scenario.proto

namespace twinps::sim {

// A small cluster with a random model, program and fault schedule, all drawn
// from `seed`, expecting the coordinator's invariants to hold.
scenario::Scenario swarm_scenario(std::uint64_t seed);

// What one swarm run did and which invariants it violated (none: sound).
struct SwarmOutcome {
  std::vector<std::string> violations;
  std::uint64_t errors_raised = 0;
  std::uint64_t retried = 0;
  std::uint64_t worker_failures = 0;
  std::uint64_t coordinator_restarts = 0;
  std::uint64_t cancelled = 0;
  Time end_time = 0;
};
SwarmOutcome run_swarm_seed(std::uint64_t seed);

// The benchmark: `workers` x `ps` timing-only, training for `sim_seconds` of
// simulated time. The model: an embedding table of 100 M rows x 64 sharded
// over every ps, of which each step looks up `rows_per_step` rows (so a step
// visits about that many ps), and a dense tower of `tower_kib` KiB on one ps
// (none if 0). Steps compute for a lognormal time of median `step_s`.
struct BenchOptions {
  int workers = 1000;
  int ps = 100;
  double sim_seconds = 60;
  int rows_per_step = 8;
  int tower_kib = 256;
  double step_s = 1.0;
};
scenario::Scenario bench_scenario(const BenchOptions& options);

}  // namespace twinps::sim
