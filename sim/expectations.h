#pragma once
// Checking a run against what its scenario expects, and against the
// invariants every run must satisfy (the swarm test's oracle).
#include <string>
#include <vector>

#include "scenario.pb.h"  // generated from sim/scenario.proto
#include "sim/simulation.h"

namespace twinps::sim {

struct ExpectationResult {
  std::string what;      // "stat RETRIED >= 1"
  bool passed = false;
  std::string observed;  // "0"
  // false: the expectation has no meaning in this mode (a real run's ps
  // utilisation); `observed` says why. Neither passed nor failed.
  bool applicable = true;
};

// Where the result comes from: the simulator, or real processes on wall-clock
// time (`twinps sim --real`, tools/real_scenario.h).
enum class RunMode { kSimulated, kReal };

// One result per expectation of the scenario, after an implicit first one:
// the program finished within the time limit. In kReal mode an expectation
// that holds only in simulated time (real_mode.h) is reported not applicable,
// never passed.
std::vector<ExpectationResult> check_expectations(const scenario::Scenario& scenario, const SimResult& result,
                                                  RunMode mode = RunMode::kSimulated);

// Violations of the coordinator's semantics, each described; empty when the
// run is sound. Needs a result recorded with SimOptions::record_invariants.
//  * the program ended: every join/schedule/done returned or raised;
//  * when a program ran to its end, every RemoteValue it got has a result;
//  * a join that returned OK: every closure scheduled before it is resolved,
//    and those scheduled since the last raised error hold values;
//  * a raised error: every closure scheduled before it is resolved (nothing
//    runs any more), and the error is one a closure failed with;
//  * no closure is dispatched after it got its result (so none runs after its
//    cancellation);
//  * once an error has been raised, no parameter server applies a push of a
//    generation it cancelled.
std::vector<std::string> check_invariants(const SimResult& result);

}  // namespace twinps::sim
