#pragma once
// The synthetic model trained by a real cluster on this machine — `twinps
// serve` processes on loopback ports with the coordinator in this process —
// timed by the wall clock. The program is the one the tuner simulates
// (sim::throughput_scenario), run by `twinps sim --real`'s runner
// (tools/real_scenario.h): schedule `warmup` closures and join, then the
// measured closures and join; steps per second are the measured steps over
// the time from the second schedule to the end of its join.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/cluster/task_id.h"
#include "core/model/compiled_model.h"
#include "core/runtime/status.h"
#include "core/training/data_source.h"
#include "scenario.pb.h"  // generated from sim/scenario.proto

namespace twinps::cli {

struct RealRunOptions {
  scenario::SyntheticModel model;  // with its partitioner
  int workers = 1;
  int ps = 1;
  int warmup = 0;         // closures before the measurement; 0: 4 per worker
  int measured = 0;       // closures measured; 0: enough for about `seconds` (from the warm-up's pace)
  double seconds = 2;
  std::uint64_t seed = 1;
  std::string data_plane = "tcp";  // as `twinps serve --data-plane` (tools/data_plane_flag.h)
  std::string work_dir;            // for the model file and the servers' logs (processes)
  // Read every process's CPU time around the measured closures.
  bool measure_cpu = false;
  // Workers that straggle: (worker, factor) — `twinps serve --inject-compute-factor`.
  std::vector<std::pair<int, int>> stragglers;
};

struct RealRunResult {
  int warmup = 0;
  int measured = 0;            // closures
  std::int64_t measured_steps = 0;  // steps in them (the model's steps_per_closure each)
  double seconds = 0;  // wall time of the measured closures
  double steps_per_second = 0;
  std::map<TaskId, double> cpu_s;  // with measure_cpu: CPU seconds of each process over the measured closures
  // With measure_cpu: seconds each process's threads were runnable but
  // waited for a core over the measured closures.
  std::map<TaskId, double> run_delay_s;
};

// The largest cluster a measurement launches, the chief included: more than
// `twinps sim --real` does (sim::kRealModeMaxTasks), since a machine whose
// cores the tasks overload is a case the tuner predicts (hosts { cores }),
// and tune --validate's grid goes up to 5 workers and 3 ps.
inline constexpr int kRealRunMaxTasks = 12;

// Runs the model and measures it. UNAVAILABLE if the cluster cannot be
// formed; the error of the run otherwise.
StatusOr<RealRunResult> run_real(const RealRunOptions& options);

// A model spec trained by its own trainer (core/training) on its own data,
// on a real cluster as above: the program `twinps train` runs, measured as
// the tuner's program is. The trainer runs two epochs of equal steps: the
// first is the warm-up, the second is measured (from the first's end to its
// own, CPU read at both ends). Their length: `steps_per_epoch`, else as
// many steps as fill about `seconds` at the pace of a first, shorter run
// of 4 closures per worker an epoch.
struct SpecRunOptions {
  std::shared_ptr<const model::CompiledModel> model;  // with its partitioner
  training::DataSource train;
  int workers = 1;
  int ps = 1;
  std::int64_t steps_per_epoch = 0;
  double seconds = 2;
  std::string data_plane = "tcp";
  std::string work_dir;
  bool measure_cpu = false;
};
StatusOr<RealRunResult> run_real_spec(const SpecRunOptions& options);

}  // namespace twinps::cli
