#include "tools/tune/real_run.h"

#include "sim/scenario_loader.h"
#include "sim/tuner.h"
#include "tools/real_scenario.h"

namespace twinps::cli {

// The tuner's program (sim::throughput_scenario), run on real processes by
// `twinps sim --real`'s runner and read as a prediction is read: one
// program, one reading, in both modes.
StatusOr<RealRunResult> run_real(const RealRunOptions& o) {
  sim::PredictRequest request;
  request.model = o.model;
  request.workers = o.workers;
  request.ps = o.ps;
  request.seed = o.seed;
  request.timing_only = false;  // real parameter servers hold values
  request.warmup = o.warmup;
  request.measured = o.measured;
  for (const auto& [worker, factor] : o.stragglers) request.stragglers.emplace_back(worker, factor);
  const scenario::Scenario s = sim::throughput_scenario(request, sim::CostsOf::kThisMachine, o.seconds);
  if (auto errors = sim::validate_scenario(s, "the real run's scenario"); !errors.empty())
    return absl::InvalidArgumentError(errors.front().to_string());

  RealScenarioOptions options;
  options.data_plane = o.data_plane;
  options.measure_cpu = o.measure_cpu;
  options.max_tasks = kRealRunMaxTasks;
  auto run = run_real_scenario(s, o.work_dir, options);
  if (!run.ok()) return run.status();
  if (!run->problems.empty()) return absl::UnavailableError(run->problems.front());
  auto measured = sim::read_throughput(run->result, request);
  if (!measured.ok()) return run->servers_alive.ok() ? measured.status() : run->servers_alive;

  RealRunResult r;
  r.warmup = measured->warmup;
  r.measured = measured->measured;
  r.measured_steps = std::int64_t{measured->measured} * o.model.steps_per_closure();
  r.seconds = measured->measured_seconds;
  r.steps_per_second = measured->steps_per_second;
  // Per step, by slot (the chief, the workers, the ps), back to seconds over the phase.
  auto by_task = [&](const std::vector<double>& per_step, std::map<TaskId, double>& out) {
    for (std::size_t k = 0; k < per_step.size(); ++k) {
      const int slot = static_cast<int>(k);
      const TaskId t = slot == 0             ? TaskId::chief()
                       : slot <= o.workers ? TaskId::worker(slot - 1)
                                           : TaskId::ps(slot - 1 - o.workers);
      out[t] = per_step[k] * static_cast<double>(r.measured_steps);
    }
  };
  by_task(measured->cpu_per_step_s, r.cpu_s);
  by_task(measured->waiting_per_step_s, r.run_delay_s);
  return r;
}

}  // namespace twinps::cli
