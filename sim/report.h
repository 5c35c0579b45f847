#pragma once
// What a run shows people: the summary table's rows and the per-step CSV.
// Wall-clock figures (events per second, simulated-to-wall ratio) are added
// by tools/, which may read a clock; sim/ never does.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/runtime/status.h"
#include "sim/simulation.h"

namespace twinps::sim {

// Step time quantiles etc. of successful training steps.
struct StepSummary {
  std::uint64_t steps = 0;
  double steps_per_second = 0;  // simulated
  double p50_s = 0, p99_s = 0;
};
StepSummary summarize_steps(const SimResult& r);

// The q-quantile (0 < q <= 1, nearest rank) of durations, in seconds; 0 for none.
double quantile_s(std::vector<Duration> d, double q);

std::vector<std::pair<std::string, std::string>> summary_rows(const SimResult& r);
// The rows of summary_rows() about ps recoveries in place (restore/rollback,
// docs/semantics.md P10-P14); `twinps sim --real` prints them too.
std::vector<std::pair<std::string, std::string>> ps_recovery_rows(const SimResult& r);

// The rows of a summary about training, for simulated and real runs alike:
// the last epoch's accuracy and the evaluation (a trainer's run), the
// histogram of the applied gradients' staleness, the sync steps applied;
// each only when there is something to show.
std::vector<std::pair<std::string, std::string>> training_rows(const SimResult& r);

// Why a run made no progress, or nullopt if it did. A run that made none
// must say so and end non-zero, never report a throughput. No progress:
//  * the coordinator did not start;
//  * a run `time_limited` by design (a benchmark cut at a simulated
//    duration) in which no training step finished (e.g. more closures were
//    queued up front than the queue can hold);
//  * otherwise (a scenario, whose program is the unit of progress), the
//    program did not finish within its time limit. A scenario whose program
//    ends with no training step (every closure failed, as some scenarios
//    expect) did finish; its summary shows no throughput.
std::optional<std::string> no_progress(const SimResult& r, bool time_limited);

// One row per closure run on a worker:
// worker,closure,function,start_s,duration_s,ok,program_start,gradients,max_staleness
// (the last two: the gradients the closure pushed that the ps measured, and
// the stalest of them)
Status write_steps_csv(const SimResult& r, const std::string& path);

}  // namespace twinps::sim
