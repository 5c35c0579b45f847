#pragma once
// What a scenario needs before it runs: memory and CPU time, estimated from
// its fields, so that one that cannot fit is refused up front with the field
// that makes it big — not discovered as a std::bad_alloc after minutes, or a
// run that goes on for an hour.
//
// The estimate is a sum of terms, each tied to the fields it grows with and
// to costs measured on this project's machines (2-core EPYC):
//  memory
//   * the network model: per vertex of its tree (tasks + switches) and per
//     link (`cluster.workers`, `cluster.ps`; NetworkModel::estimated_bytes);
//   * per task: ~10 KiB (nodes, transports, coroutines, coordinator state);
//   * per closure scheduled: ~1.2 KiB (closure, RemoteValue, records), summed
//     over the program's `schedule.count`s;
//   * NUMERIC variables: values and optimizer slots, held about three times
//     (initial values, the request creating them, the store);
//   * NUMERIC steps in flight (at most one per worker): the pulled values, the
//     [batch x rows] input and [batch x cols] activations of the step's
//     arithmetic (`model.batch_size`, `rows_per_step` or the shape).
//  CPU time
//   * simulation events: ~15 per closure at ~2.2 us each;
//   * rows drawn per step (`rows_per_step`): ~50 ns each, and NUMERIC rows
//     moved (pull, push, apply): ~5 ns per value;
//   * NUMERIC arithmetic: synthetic::step_flops per step at ~20 GFLOP/s.
// Steps are counted from the program (`schedule.count`; an `infinite` closure
// counts once), so a program that loops is underestimated, never refused
// wrongly. These are estimates to catch what is far out of reach (an order
// of magnitude), not predictions.
#include <string>
#include <vector>

#include "scenario.pb.h"  // generated from sim/scenario.proto
#include "sim/scenario_loader.h"

namespace twinps::sim {

struct ResourceEstimate {
  double memory_bytes = 0;
  std::string memory_field;  // the field the largest term grows with
  std::string memory_term;   // what that term is
  double cpu_seconds = 0;
  std::string cpu_field;
  std::string cpu_term;
};

// `s` must have passed validate_scenario().
ResourceEstimate estimate_resources(const scenario::Scenario& s);

struct ResourceLimits {
  double memory_bytes = 0;  // what the run may use; 0: no limit
  std::string memory_source;  // where the limit comes from ("RLIMIT_AS", "--max-memory-gb" ...)
  double cpu_seconds = 0;   // 0: no limit
  std::string cpu_source;
};

// One error per limit the estimate exceeds, naming the field that makes the
// scenario big, the estimate and the limit. Empty: it fits.
std::vector<ScenarioError> check_resources(const scenario::Scenario& s, const ResourceLimits& limits,
                                           const std::string& file);

}  // namespace twinps::sim
