#include "tools/real_scenario.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>

#include <google/protobuf/text_format.h>

#include "core/checkpoint/checkpoint_manager.h"
#include "core/checkpoint/storage.h"
#include "core/coordinator/cluster_coordinator.h"
#include "core/data/dataset.h"
#include "core/faults/fault_schedule.h"
#include "core/runtime/block_on.h"
#include "core/runtime/random.h"
#include "core/training/model_functions.h"
#include "net/real_node.h"
#include "sim/cluster_faults.h"
#include "sim/real_mode.h"
#include "sim/scenario_program.h"
#include "sim/trainer_action.h"
#include "sim/workload.h"
#include "tools/data_plane_flag.h"
#include "tools/process_cluster.h"
#include "tools/tune/calibration.h"

namespace twinps::cli {

namespace {

// The worker processes' command line: the synthetic model (none for a model
// spec, which the trainer ships to the workers itself), its step time, its
// calls' deadline. A straggler is a machine `factor` times slower: its step
// time and, rounded, a synthetic model's arithmetic (each gradient computed
// that many times; a spec's arithmetic is its own).
ProcessClusterOptions cluster_options(const scenario::Scenario& s, const std::string& model_path,
                                      const std::string& work_dir, bool partitions, const std::string& data_plane) {
  ProcessClusterOptions o;
  o.workers = s.cluster().workers();
  o.ps = s.cluster().ps();
  o.log_dir = work_dir;
  o.ps_args = {"--data-plane", data_plane};
  o.worker_args = {"--data-plane", data_plane, "--ps-call-timeout", std::to_string(s.coordinator().ps_call_timeout_s())};
  if (!model_path.empty()) o.worker_args.insert(o.worker_args.end(), {"--model", model_path});
  for (int w = 0; w < o.workers; ++w)
    o.task_args[TaskId::worker(w)] = {"--inject-step-delay", std::to_string(sim::real_step_delay_s(s, w))};
  for (const auto& g : s.compute().straggler()) {
    const auto factor = std::llround(g.factor());
    if (factor >= 2 && !model_path.empty()) {
      auto& args = o.task_args[TaskId::worker(g.worker())];
      args.insert(args.end(), {"--inject-compute-factor", std::to_string(factor)});
    }
  }
  if (partitions) o.cut_detection = from_seconds(s.network().connection_timeout_s());
  return o;
}

bool has_partition(const scenario::Scenario& s) {
  for (const auto& f : s.fault())
    if (f.has_partition()) return true;
  return false;
}

// Every process's schedstat figure (CPU time or run delay), by slot: this
// process as the chief, then the workers, then the ps.
std::vector<Duration> per_slot(const ProcessCluster& cluster, const ClusterShape& shape, double (*read)(int pid)) {
  std::vector<Duration> out;
  out.push_back(from_seconds(read(::getpid())));
  for (int i = 0; i < shape.workers; ++i) out.push_back(from_seconds(read(cluster.pid(TaskId::worker(i)))));
  for (int i = 0; i < shape.ps; ++i) out.push_back(from_seconds(read(cluster.pid(TaskId::ps(i)))));
  return out;
}

// A synthetic model's step functions, variables and file (the workers read
// it: the same binary, the same step functions).
struct SyntheticSetUp {
  std::unique_ptr<synthetic::Workload> workload;
  synthetic::Variables variables;
  std::string path;
};
StatusOr<SyntheticSetUp> set_up_synthetic(const scenario::Scenario& s, const ClusterShape& shape,
                                          FunctionRegistry& registry, const std::string& work_dir) {
  SyntheticSetUp out;
  // The model, with the initial values the simulator draws for this seed.
  auto spec = sim::model_spec(s.model(), s.ps_service());
  if (!spec.ok()) return spec.status();
  auto variables = synthetic::build_variables(*spec, shape.ps, /*timing_only=*/false,
                                              RandomStream(s.seed()).fork("init").next_u64());
  if (!variables.ok()) return variables.status();
  out.variables = std::move(*variables);
  out.workload = std::make_unique<synthetic::Workload>(*spec, /*timing_only=*/false);
  register_dataset_functions(registry);
  out.workload->register_functions(registry);
  out.path = work_dir + "/model.textproto";
  std::string text;
  google::protobuf::TextFormat::PrintToString(s.model(), &text);
  std::ofstream file(out.path);
  file << text;
  if (!file) return absl::UnavailableError("cannot write " + out.path);
  return out;
}

}  // namespace

StatusOr<RealRun> run_real_scenario(const scenario::Scenario& s, const std::string& work_dir,
                                    const RealScenarioOptions& options) {
  if (auto obstacles = sim::real_mode_obstacles(s, options.max_tasks); !obstacles.empty())
    return absl::InvalidArgumentError("cannot run on real processes: " + obstacles.front());
  const sim::SpecWorkload* spec = options.spec;
  if (s.has_model_spec() && (!spec || !spec->model))
    return absl::InvalidArgumentError("the scenario trains the model spec " + s.model_spec() +
                                      ": a real run needs its training data (twinps sim --real --train-data ...)");
  net::GrpcTransportOptions transport;
  if (!apply_data_plane("sim --real", options.data_plane, &transport))
    return absl::InvalidArgumentError("unknown data plane '" + options.data_plane + "'");
  const auto wall_start = std::chrono::steady_clock::now();
  RealRun run;
  sim::SimResult& result = run.result;
  result.name = s.name();
  result.seed = s.seed();
  result.fidelity = s.fidelity();
  result.shape = ClusterShape{s.cluster().workers(), s.cluster().ps()};

  FunctionRegistry registry;  // the coordinator schedules the step functions by name
  SyntheticSetUp synthetic;
  // What a `train` action trains: a model spec (its data from the caller) or
  // the tutorial, as the simulator sets it up (sim/trainer_action.h), saving
  // the scenario's checkpoints in this process's storage, which outlives the
  // ps recoveries (restore/rollback) as the simulator's does.
  std::optional<sim::ScenarioProgram::TrainerSetup> training;
  InMemoryStorage checkpoints;
  std::unique_ptr<CheckpointManager> manager = sim::scenario_checkpoints(s, checkpoints);
  if (spec) {
    training = sim::ScenarioProgram::TrainerSetup{spec->model, &registry, spec->train, spec->eval, spec->options};
  } else if (s.has_tutorial()) {
    auto tutorial = sim::tutorial_setup(s.tutorial(), result.shape.ps, s.seed());
    if (!tutorial.ok()) return tutorial.status();
    training = std::move(*tutorial);
    training->registry = &registry;
  }
  if (training) {
    if (manager) training->options.checkpoints = manager.get();
    training::register_training_functions(registry);
  } else {
    auto set_up = set_up_synthetic(s, result.shape, registry, work_dir);
    if (!set_up.ok()) return set_up.status();
    synthetic = std::move(*set_up);
  }
  auto cluster =
      ProcessCluster::start(cluster_options(s, synthetic.path, work_dir, has_partition(s), options.data_plane));
  if (!cluster.ok()) return cluster.status();

  // The coordinator: this process, calling out through its own cut.
  net::RealNodeOptions no;
  no.task = TaskId::chief();
  no.resolve = net::address_map((*cluster)->addresses());
  no.transport = transport;
  const Duration cut_detection = from_seconds(s.network().connection_timeout_s());
  no.wrap_transport = [&cluster, cut_detection](Executor& ex, Transport& inner) {
    return (*cluster)->chief_cut().wrap(ex, inner, cut_detection);
  };
  auto node = net::RealNode::create(std::move(no));
  if (!node.ok()) return node.status();
  Executor& ex = (*node)->executor();
  (*cluster)->attach(ex);
  CoordinatorOptions coordinator_options = sim::coordinator_options(s.coordinator());
  if (options.recorder) coordinator_options.on_event = options.recorder->observer();
  ClusterCoordinator coordinator((*node)->runtime(), result.shape, registry, std::move(coordinator_options));

  // The program, from now.
  std::vector<scenario::Action> actions(s.program().begin(), s.program().end());
  if (actions.empty() && training) actions.emplace_back().mutable_train();  // as the simulator: one `train {}`
  const Time origin = ex.now();
  // The faults, on wall-clock time. Setting up a real cluster takes real
  // time (1.3 s under ThreadSanitizer, 6 s under it on a loaded machine,
  // where a simulated one takes milliseconds), so:
  //   * a scenario with a fault at 0 tests the cluster's creation: its faults
  //     are timed from the program's start, as the simulator times them, and
  //     one that falls due before the coordinator has started fires as soon
  //     as it has (the summary says how late);
  //   * any other scenario's faults are timed from when the coordinator has
  //     started: a fault at 3 s hits the program 3 s into its run, as in the
  //     simulator, however long the setup took (a partition timed from the
  //     program's start fell inside a slow setup and cut a worker that had
  //     no closure yet, so nothing was retried).
  // The log shows the scheduled times, so both modes' logs read the same.
  auto schedule = [&](const ClusterFault& scheduled, Time shift) {
    ClusterFault fault = scheduled;
    const Time from = origin + shift;  // where this fault's scenario time 0 is
    fault.at += from;
    if (fault.end) *fault.end += from;
    schedule_cluster_fault(
        fault, ex, **cluster,
        [&result, from](Time at, const std::string& what) {
          result.faults.push_back("t=" + fault_time_string(at - from) + "  " + what);
        },
        from);
  };
  std::vector<ClusterFault> later;
  bool tests_creation = false;
  for (const auto& f : s.fault()) tests_creation |= f.at_s() == 0;
  for (const auto& f : s.fault()) {
    auto fault = sim::cluster_fault(f);  // every kind has an actuator (obstacles above)
    if (!fault) continue;
    if (fault->at == 0)
      schedule(*fault, 0);
    else
      later.push_back(*fault);
  }
  Time started_at = origin;
  sim::ScenarioProgram::Hooks hooks;
  if (options.measure_cpu) {
    hooks.task_cpu = [&] { return per_slot(**cluster, result.shape, process_cpu_seconds); };
    hooks.task_waiting = [&] { return per_slot(**cluster, result.shape, process_run_delay_seconds); };
  }
  hooks.on_started = [&] {
    started_at = ex.now();
    for (const auto& fault : later) {
      if (!tests_creation) {
        schedule(fault, started_at - origin);
        continue;
      }
      const Time late = std::max<Time>(0, started_at - (origin + fault.at));
      if (late > 0) run.late_faults.push_back(fault.describe() + ": fired " + fault_time_string(late) + " late");
      schedule(fault, late);
    }
  };
  // A `train` action: the trainer, as the simulator runs it. The program's
  // closures' watchers run in `scope`.
  TaskScope scope(ex);
  std::unique_ptr<sim::ScenarioProgram> program;
  if (training)
    hooks.train = [&](ClusterCoordinator& c, int start, const std::string& label) {
      return program->train(c, ex, scope, start, label, *training);
    };
  program = std::make_unique<sim::ScenarioProgram>(std::move(actions), synthetic.workload.get(),
                                                   &synthetic.variables, result, std::move(hooks));
  sim::ProgramStart start;
  start.at = 0;
  start.chief_incarnation = (*node)->incarnation();
  result.starts.push_back(std::move(start));
  scope.spawn(program->run(coordinator, ex, scope, 0));

  result.time_limit = from_seconds(s.time_limit_s());
  ex.run_until([&] { return program->done(); }, origin + result.time_limit);
  result.finished = program->done();
  result.end_time = ex.now() - origin;
  // The result's times count from the program's start, as the simulator's do.
  for (auto& e : result.epochs) e.finished_at -= origin;
  for (auto& m : result.epoch_marks) m.at -= origin;

  // The outcome, read as the simulator reads it.
  auto& st = result.starts.back();
  st.stats = coordinator.stats();
  st.dispatch_log = coordinator.dispatch_log();
  st.ps_recoveries = coordinator.ps_recoveries();
  for (auto& rec : st.ps_recoveries) {  // times from the program's start, as the simulator's
    rec.detected -= origin;
    rec.finished -= origin;
  }
  result.stats = st.stats;
  if (result.finished) {
    if (auto it = block_on(ex, sim::read_iterations(coordinator), ex.now() + 30 * kSecond)) result.final_iterations = *it;
  }
  program->settle_values();
  run.problems = (*cluster)->problems();
  run.servers_alive = (*cluster)->check_alive();
  run.setup_s = to_seconds(started_at - origin);
  // The program's frames use the coordinator: they go first.
  scope.destroy_all();
  run.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  return run;
}

}  // namespace twinps::cli
