#include "tools/tune/real_run.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>

#include <google/protobuf/text_format.h>

#include "core/coordinator/cluster_coordinator.h"
#include "core/models/synthetic/synthetic.h"
#include "core/runtime/block_on.h"
#include "net/in_process_cluster.h"
#include "net/real_node.h"
#include "sim/workload.h"
#include "tools/data_plane_flag.h"
#include "tools/tune/calibration.h"
#include "tools/process_cluster.h"

namespace twinps::cli {

namespace {

struct Plan {
  const synthetic::ModelSpec& spec;
  const synthetic::Variables& variables;
  const RealRunOptions& options;
  std::function<void(bool start)> around_measurement;  // called as the measured phase starts and ends
};

Task<Status> schedule_and_join(ClusterCoordinator& c, int n, const PerWorkerValues& iterator) {
  for (int k = 0; k < n; ++k) {
    std::vector<Arg> args;
    args.emplace_back(iterator);
    for (auto& v : synthetic::Workload::train_args(0, false)) args.emplace_back(std::move(v));
    auto rv = co_await c.schedule(synthetic::kTrainFn, std::move(args));
    if (!rv.ok()) co_return rv.status();
  }
  co_return co_await c.join();
}

// The coordinator program; the executor's clock is the wall clock in real mode.
Task<StatusOr<RealRunResult>> program(ClusterCoordinator& c, Plan plan) {
  const auto& o = plan.options;
  Status started = co_await c.start(plan.variables.layouts, plan.spec.optimizer, plan.variables.initial);
  if (!started.ok()) co_return started;
  PerWorkerDataset dataset =
      c.create_per_worker_dataset(synthetic::kDatasetFn, {Value(std::int64_t{plan.spec.batch_size})});
  PerWorkerValues iterator = c.create_per_worker_resource(synthetic::kIteratorFn, {}, &dataset.datasets);

  RealRunResult r;
  r.warmup = o.warmup > 0 ? o.warmup : 4 * o.workers;
  const Time w0 = c.now();
  if (Status s = co_await schedule_and_join(c, r.warmup, iterator); !s.ok()) co_return s;
  const double warmup_s = std::max(to_seconds(c.now() - w0), 1e-6);
  r.measured = o.measured > 0 ? o.measured
                              : static_cast<int>(std::clamp(std::round(r.warmup / warmup_s * o.seconds),
                                                            8.0 * o.workers, 1e6));
  if (plan.around_measurement) plan.around_measurement(true);
  const Time t0 = c.now();
  if (Status s = co_await schedule_and_join(c, r.measured, iterator); !s.ok()) co_return s;
  r.seconds = to_seconds(c.now() - t0);
  if (plan.around_measurement) plan.around_measurement(false);
  // A closure runs the model's steps_per_closure steps.
  r.measured_steps = std::int64_t{r.measured} * plan.spec.steps_per_closure;
  r.steps_per_second = r.seconds > 0 ? static_cast<double>(r.measured_steps) / r.seconds : 0;
  co_return r;
}

CoordinatorOptions coordinator_options() {
  CoordinatorOptions o;
  o.connect_timeout = 30 * kSecond;
  return o;
}

}  // namespace

StatusOr<RealRunResult> run_real(const RealRunOptions& o) {
  auto spec = sim::model_spec(o.model);
  if (!spec.ok()) return spec.status();
  auto variables = synthetic::build_variables(*spec, o.ps, /*timing_only=*/false, o.seed);
  if (!variables.ok()) return variables.status();
  net::GrpcTransportOptions transport;
  if (!apply_data_plane("tune", o.data_plane, &transport))
    return absl::InvalidArgumentError("unknown data plane '" + o.data_plane + "'");
  // The coordinator holds the step functions too (it schedules them by name).
  synthetic::Workload workload(*spec, /*timing_only=*/false);
  FunctionRegistry registry;
  workload.register_functions(registry);
  const ClusterShape shape{o.workers, o.ps};
  Plan plan{*spec, *variables, o, nullptr};
  const Time limit = 30 * 60 * kSecond;
  auto drive = [&](net::RealNode& node) -> StatusOr<RealRunResult> {
    ClusterCoordinator coordinator(node.runtime(), shape, registry, coordinator_options());
    auto r = block_on(node.executor(), program(coordinator, plan), node.executor().now() + limit);
    if (!r) return absl::DeadlineExceededError("the real run did not finish within 30 minutes");
    return std::move(*r);
  };

  if (!o.processes) {
    net::InProcessClusterOptions co;
    co.workers = o.workers;
    co.ps = o.ps;
    co.registry = &registry;
    co.transport = transport;
    auto cluster = net::InProcessCluster::start(co);
    if (!cluster.ok()) return cluster.status();
    return drive((*cluster)->coordinator());
  }

  // Every worker reads the model from a file: the same binary, the same step functions.
  const std::string model_path = o.work_dir + "/model.textproto";
  {
    std::string text;
    google::protobuf::TextFormat::PrintToString(o.model, &text);
    std::ofstream out(model_path);
    out << text;
    if (!out) return absl::UnavailableError("cannot write " + model_path);
  }
  const std::vector<std::string> plane{"--data-plane", o.data_plane};
  std::vector<std::string> worker_args = plane;
  worker_args.insert(worker_args.end(), {"--model", model_path});
  std::map<TaskId, std::vector<std::string>> task_args;
  for (const auto& [worker, factor] : o.stragglers)
    task_args[TaskId::worker(worker)] = {"--inject-compute-factor", std::to_string(factor)};
  auto cluster = ProcessCluster::start(o.workers, o.ps, plane, worker_args, o.work_dir, task_args);
  if (!cluster.ok()) return cluster.status();
  std::map<TaskId, double> cpu, delay;
  if (o.measure_cpu) {
    plan.around_measurement = [&](bool start) {
      auto read = [&](const TaskId& t, int pid) {
        cpu[t] = process_cpu_seconds(pid) - (start ? 0 : cpu[t]);
        delay[t] = process_run_delay_seconds(pid) - (start ? 0 : delay[t]);
      };
      read(TaskId::chief(), ::getpid());
      for (int i = 0; i < o.workers; ++i) read(TaskId::worker(i), (*cluster)->pid(TaskId::worker(i)));
      for (int i = 0; i < o.ps; ++i) read(TaskId::ps(i), (*cluster)->pid(TaskId::ps(i)));
    };
  }
  net::RealNodeOptions no;
  no.task = TaskId::chief();
  no.resolve = net::address_map((*cluster)->addresses());
  no.transport = transport;
  auto node = net::RealNode::create(std::move(no));
  if (!node.ok()) return node.status();
  auto result = drive(**node);
  if (result.ok()) {
    result->cpu_s = std::move(cpu);
    result->run_delay_s = std::move(delay);
  }
  // A failed run usually means a server died: say which, with its stderr.
  if (!result.ok()) {
    if (Status alive = (*cluster)->check_alive(); !alive.ok()) return alive;
  }
  return result;
}

}  // namespace twinps::cli
