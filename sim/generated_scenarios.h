#pragma once
// Scenarios built in code rather than read from a file: the swarm test's
// random fault schedules, and the timing-only benchmark cluster.
#include <cstdint>
#include <string>
#include <vector>

#include "scenario.pb.h"  // generated from sim/scenario.proto

namespace twinps::sim {

// A small cluster with a random model, program and fault schedule, all drawn
// from `seed`, expecting the coordinator's invariants to hold.
scenario::Scenario swarm_scenario(std::uint64_t seed);

// Runs swarm_scenario(seed) and returns the violated invariants (empty: sound).
std::vector<std::string> run_swarm_seed(std::uint64_t seed);

// The benchmark: `workers` x `ps` timing-only, training for `sim_seconds` of
// simulated time (see the definition for the model).
scenario::Scenario bench_scenario(int workers, int ps, double sim_seconds);

}  // namespace twinps::sim
