#pragma once
// What of a scenario real processes can do (`twinps sim --real`, which
// launches the cluster on this machine and applies the faults on wall-clock
// time), and what only the simulator can: its obstacles, and the
// expectations that have no meaning in real time.
#include <optional>
#include <string>
#include <vector>

#include "scenario.pb.h"  // generated from sim/scenario.proto

namespace twinps::sim {

// The largest cluster real mode launches on one machine (tasks, the chief
// included): more would measure the machine's overload, not the scenario.
inline constexpr int kRealModeMaxTasks = 8;

// Why `scenario` cannot run on real processes, each naming its field; empty
// when it can. Independent of the `sim_only` field, which must explain them.
// `max_tasks`: the largest cluster to launch (the tuner's measurements go
// further: an overloaded machine is what they predict).
std::vector<std::string> real_mode_obstacles(const scenario::Scenario& scenario,
                                             int max_tasks = kRealModeMaxTasks);

// Why the expectation holds only in simulated time (e.g. a ps's utilisation
// is the simulator's service model's); nullopt when a real run can check it.
std::optional<std::string> simulated_time_only(const scenario::Expectation& expectation);

// A worker's step time in real mode: the scenario's compute time, as a delay
// each step takes (`twinps serve --inject-step-delay`); a distribution gives
// its mean (a log-normal its median).
double real_step_delay_s(const scenario::Scenario& scenario, int worker);

}  // namespace twinps::sim
