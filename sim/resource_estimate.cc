#include "sim/resource_estimate.h"

#include <algorithm>
#include <cstdio>

#include "core/ps/optimizer.h"
#include "core/tensor/tensor.h"
#include "sim/network.h"
#include "sim/workload.h"

namespace twinps::sim {

namespace {

// Measured costs (see the header): memory per task and per closure, CPU per
// event, per row drawn, per value moved, per floating-point operation.
constexpr double kBytesPerTask = 10 * 1024.0;
constexpr double kBytesPerClosure = 1.2 * 1024.0;
constexpr double kVariableCopies = 3;
constexpr double kEventsPerClosure = 15;
constexpr double kSecondsPerEvent = 2.2e-6;
constexpr double kSecondsPerRowDrawn = 50e-9;
constexpr double kSecondsPerValueMoved = 5e-9;
constexpr double kFlopsPerSecond = 20e9;

struct Term {
  double amount = 0;
  std::string field;
  std::string what;
};

void keep_largest(Term& best, double& total, Term t) {
  total += t.amount;
  if (t.amount > best.amount) best = std::move(t);
}

std::string count(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v < 1e6 ? "%.0f" : "%.3g", v);
  return buf;
}

std::string bytes(double b) {
  char buf[32];
  if (b >= 1024.0 * 1024 * 1024) std::snprintf(buf, sizeof buf, "%.1f GiB", b / (1024.0 * 1024 * 1024));
  else std::snprintf(buf, sizeof buf, "%.0f MiB", b / (1024.0 * 1024));
  return buf;
}

std::string seconds(double s) {
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%.1f h", s / 3600);
  else if (s >= 60) std::snprintf(buf, sizeof buf, "%.1f min", s / 60);
  else std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

}  // namespace

ResourceEstimate estimate_resources(const scenario::Scenario& s) {
  const ClusterShape shape{s.cluster().workers(), s.cluster().ps()};
  const double tasks = 1.0 + shape.workers + shape.ps;
  const bool numeric = s.fidelity() == scenario::NUMERIC;
  const std::string biggest_job = shape.workers >= shape.ps ? "cluster.workers" : "cluster.ps";

  // A restarted coordinator runs the program again from the top.
  double program_runs = 1;
  for (const auto& f : s.fault())
    if (f.kind_case() == scenario::Fault::kKillCoordinator) ++program_runs;
  for (int k : s.random_faults().kind())
    if (k == scenario::RandomFaults::COORDINATOR_CRASH) program_runs += s.random_faults().count();

  // Closures and train steps the program schedules.
  double closures = 0, steps = 0;
  int largest_schedule = -1;
  for (int i = 0; i < s.program_size(); ++i) {
    const auto& a = s.program(i);
    if (!a.has_schedule()) continue;
    closures += a.schedule().count();
    if (a.schedule().function() == kTrainFn) steps += static_cast<double>(a.schedule().count()) * s.model().steps_per_closure();
    if (largest_schedule < 0 || a.schedule().count() > s.program(largest_schedule).schedule().count())
      largest_schedule = i;
  }
  std::string closures_field = largest_schedule >= 0
                                   ? "program[" + std::to_string(largest_schedule) + "].schedule.count"
                                   : std::string("program");
  if (s.has_tutorial()) {
    const auto& t = s.tutorial();
    steps = static_cast<double>(t.epochs()) * t.steps_per_epoch() + 1;
    closures = steps + 2;
    closures_field = "tutorial.steps_per_epoch";
  }
  closures *= program_runs;
  steps *= program_runs;

  Term mem_best, cpu_best;
  double memory = 0, cpu = 0;
  keep_largest(mem_best, memory,
               {NetworkModel::estimated_bytes(shape, s.network().hosts_per_rack()), biggest_job,
                "the network model of " + count(tasks) + " tasks"});
  keep_largest(mem_best, memory, {tasks * kBytesPerTask, biggest_job, "the state of " + count(tasks) + " tasks"});
  keep_largest(mem_best, memory,
               {closures * kBytesPerClosure, closures_field, count(closures) + " closures scheduled"});
  keep_largest(cpu_best, cpu,
               {closures * kEventsPerClosure * kSecondsPerEvent, closures_field,
                "simulating " + count(closures) + " closures"});

  if (s.has_model()) {
    auto spec = model_spec(s.model(), s.ps_service());
    std::size_t slots = 0;
    if (spec.ok())
      if (auto opt = Optimizer::create(spec->optimizer); opt.ok()) slots = opt->slot_count();
    const double batch = s.model().batch_size();
    for (int i = 0; i < s.model().variable_size(); ++i) {
      const auto& v = s.model().variable(i);
      const std::string at = "model.variable[" + std::to_string(i) + "]";
      const Shape shape_v(v.shape().begin(), v.shape().end());
      const double rows = static_cast<double>(storage_rows(shape_v));
      const double cols = static_cast<double>(storage_cols(shape_v));
      const double read_rows = v.rows_per_step() > 0 ? static_cast<double>(v.rows_per_step()) : rows;
      const std::string read_field = v.rows_per_step() > 0 ? at + ".rows_per_step" : at + ".shape";
      const std::string name = "\"" + v.name() + "\"";
      if (v.rows_per_step() > 0)
        keep_largest(cpu_best, cpu,
                     {steps * read_rows * kSecondsPerRowDrawn, read_field,
                      "drawing " + count(read_rows) + " rows of " + name + " in each of " + count(steps) + " steps"});
      if (!numeric) continue;
      keep_largest(mem_best, memory,
                   {rows * cols * 4.0 * static_cast<double>(1 + slots) * kVariableCopies, at + ".shape",
                    "the values and optimizer slots of " + name + " (" + count(rows * cols) + " values)"});
      if (!v.per_step()) continue;
      // One step in flight per worker: pulled values and gradient [r x c],
      // the input [batch x r] and the activations [batch x c].
      const double step_bytes = 4.0 * (2 * read_rows * cols + batch * read_rows + batch * cols);
      const double in_flight = std::min<double>(shape.workers, std::max(closures, 1.0));
      const bool batch_dominates = batch * (read_rows + cols) > 2 * read_rows * cols;
      keep_largest(mem_best, memory,
                   {in_flight * step_bytes, batch_dominates ? std::string("model.batch_size") : read_field,
                    count(in_flight) + " steps in flight, each holding " + bytes(step_bytes) + " for " + name +
                        " (batch " + count(batch) + " x " + count(read_rows) + " rows x " + count(cols) +
                        " columns)"});
      const double flops = 4.0 * batch * read_rows * cols;
      keep_largest(cpu_best, cpu,
                   {steps * flops / kFlopsPerSecond, batch_dominates ? std::string("model.batch_size") : read_field,
                    "the arithmetic of " + count(steps) + " steps on " + name + " (4 x batch " + count(batch) + " x " +
                        count(read_rows) + " rows x " + count(cols) + " columns = " + count(flops) +
                        " operations each)"});
      keep_largest(cpu_best, cpu,
                   {steps * read_rows * cols * 3 * kSecondsPerValueMoved, read_field,
                    "pulling, pushing and applying " + count(read_rows * cols) + " values of " + name + " in each of " +
                        count(steps) + " steps"});
    }
  }
  return ResourceEstimate{memory, mem_best.field, mem_best.what, cpu, cpu_best.field, cpu_best.what};
}

std::vector<ScenarioError> check_resources(const scenario::Scenario& s, const ResourceLimits& limits,
                                           const std::string& file) {
  std::vector<ScenarioError> out;
  const ResourceEstimate e = estimate_resources(s);
  if (limits.memory_bytes > 0 && e.memory_bytes > limits.memory_bytes)
    out.push_back(ScenarioError{file, 0, 0, e.memory_field,
                                "the run would need about " + bytes(e.memory_bytes) + " of memory, most of it for " +
                                    e.memory_term + "; this run may use " + bytes(limits.memory_bytes) + " (" +
                                    limits.memory_source +
                                    "). Make it smaller, or on a bigger machine raise the limit (--max-memory-gb) "
                                    "or lift it (--no-limits)"});
  if (limits.cpu_seconds > 0 && e.cpu_seconds > limits.cpu_seconds)
    out.push_back(ScenarioError{file, 0, 0, e.cpu_field,
                                "the run would take about " + seconds(e.cpu_seconds) + " of CPU time, most of it " +
                                    e.cpu_term + "; the limit is " + seconds(limits.cpu_seconds) + " (" +
                                    limits.cpu_source +
                                    "). Make it smaller (TIMING_ONLY fidelity computes nothing), or allow more "
                                    "(--max-cpu-s, --no-limits)"});
  return out;
}

}  // namespace twinps::sim
