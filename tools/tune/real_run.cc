#include "tools/tune/real_run.h"

#include <algorithm>
#include <cmath>

#include "sim/scenario_loader.h"
#include "sim/tuner.h"
#include "tools/real_scenario.h"

namespace twinps::cli {

namespace {

// Per-step figures by slot (the chief, the workers, the ps), back to
// seconds over `steps`, by task.
std::map<TaskId, double> by_task(const std::vector<double>& per_step, int workers, std::int64_t steps) {
  std::map<TaskId, double> out;
  for (std::size_t k = 0; k < per_step.size(); ++k) {
    const int slot = static_cast<int>(k);
    const TaskId t = slot == 0          ? TaskId::chief()
                     : slot <= workers ? TaskId::worker(slot - 1)
                                       : TaskId::ps(slot - 1 - workers);
    out[t] = per_step[k] * static_cast<double>(steps);
  }
  return out;
}

}  // namespace

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
  r.cpu_s = by_task(measured->cpu_per_step_s, o.workers, r.measured_steps);
  r.run_delay_s = by_task(measured->waiting_per_step_s, o.workers, r.measured_steps);
  return r;
}

namespace {

// One run of the spec's trainer for two epochs of `steps` steps each, read
// from the second.
StatusOr<RealRunResult> run_spec_epochs(const SpecRunOptions& o, std::int64_t steps) {
  scenario::Scenario s;
  s.set_name("throughput");
  s.set_seed(1);
  s.set_fidelity(scenario::NUMERIC);
  s.set_model_spec("(tune --validate)");  // the trainer's model is `o.model`, given below
  s.mutable_cluster()->set_workers(o.workers);
  s.mutable_cluster()->set_ps(o.ps);
  s.mutable_compute()->mutable_step_time()->set_constant_s(0);  // this machine's own costs
  s.add_program()->mutable_train();
  s.set_time_limit_s(1800);  // a real run that needs more than half an hour is stuck, not slow

  sim::SpecWorkload spec;
  spec.model = o.model;
  spec.train = o.train;
  spec.options.epochs = 2;
  spec.options.steps_per_epoch = steps;
  spec.options.steps_per_execution = o.model->spec().training().steps_per_execution();
  RealScenarioOptions options;
  options.data_plane = o.data_plane;
  options.measure_cpu = o.measure_cpu;
  options.max_tasks = kRealRunMaxTasks;
  options.spec = &spec;
  auto run = run_real_scenario(s, o.work_dir, options);
  if (!run.ok()) return run.status();
  if (!run->problems.empty()) return absl::UnavailableError(run->problems.front());
  const sim::SimResult& result = run->result;
  for (const auto& a : result.actions)
    if (!a.status.ok()) return run->servers_alive.ok() ? a.status : run->servers_alive;
  if (!result.finished || result.epoch_marks.size() != 2)
    return absl::InternalError("the trainer did not run its two epochs");
  const sim::EpochMark& warm = result.epoch_marks[0];
  const sim::EpochMark& end = result.epoch_marks[1];
  const std::int64_t per_closure = spec.options.steps_per_execution;
  RealRunResult r;
  r.warmup = r.measured = static_cast<int>((steps + per_closure - 1) / per_closure);
  r.measured_steps = steps;
  r.seconds = to_seconds(end.at - warm.at);
  r.steps_per_second = r.seconds > 0 ? static_cast<double>(steps) / r.seconds : 0;
  auto per_step = [steps](const std::vector<Duration>& from, const std::vector<Duration>& to) {
    std::vector<double> out;
    if (from.size() != to.size()) return out;
    for (std::size_t k = 0; k < from.size(); ++k) out.push_back(to_seconds(to[k] - from[k]) / static_cast<double>(steps));
    return out;
  };
  r.cpu_s = by_task(per_step(warm.cpu, end.cpu), o.workers, steps);
  r.run_delay_s = by_task(per_step(warm.waiting, end.waiting), o.workers, steps);
  return r;
}

}  // namespace

StatusOr<RealRunResult> run_real_spec(const SpecRunOptions& o) {
  const std::int64_t per_closure = std::max<std::int64_t>(1, o.model->spec().training().steps_per_execution());
  if (o.steps_per_epoch > 0) return run_spec_epochs(o, o.steps_per_epoch);
  // The pace first: 4 closures per worker an epoch.
  auto pilot = run_spec_epochs(o, 4 * per_closure * o.workers);
  if (!pilot.ok()) return pilot.status();
  const double wanted = std::ceil(pilot->steps_per_second * o.seconds / static_cast<double>(per_closure));
  const auto closures = static_cast<std::int64_t>(std::clamp(wanted, 8.0 * o.workers, 1e6));
  return run_spec_epochs(o, closures * per_closure);
}

}  // namespace twinps::cli
