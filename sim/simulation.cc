#include "sim/simulation.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "core/checkpoint/checkpoint_manager.h"
#include "core/checkpoint/storage.h"
#include "core/data/dataset.h"
#include "core/faults/cluster_control.h"
#include "core/faults/fault_schedule.h"
#include "inmemory/in_memory_cluster.h"
#include "core/model/spec_loader.h"
#include "core/models/tutorial/tutorial_spec.h"
#include "core/training/model_functions.h"
#include "core/training/parameter_hash.h"
#include "core/worker/parameter_client.h"
#include "sim/cluster_faults.h"
#include "sim/cost_model.h"
#include "sim/fluid.h"
#include "sim/hosts.h"
#include "sim/scenario_program.h"
#include "sim/trainer_action.h"
#include "sim/task_names.h"
#include "sim/workload.h"

namespace twinps::sim {

namespace {

std::string seconds_string(Time t) { return fault_time_string(t); }

std::string factor_string(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1fx", f);
  return buf;
}

// Collects step records from the workers' closure spans.
class StepSink final : public TraceSink {
 public:
  StepSink(std::vector<StepRecord>& out, const int& program_start) : out_(out), program_start_(program_start) {}
  void record(TracePhase phase, const TaskId& track, std::string_view category, std::string_view name, Time start,
              Duration duration, std::initializer_list<TraceArg> args) override {
    if (phase != TracePhase::kSpan || track.job != Job::kWorker || category != "worker" || name == "create_resource")
      return;
    StepRecord s{track.index, 0, std::string(name), start, duration, false, program_start_};
    for (const auto& a : args) {
      if (a.key == "closure") s.closure = static_cast<std::uint64_t>(a.number);
      if (a.key == "ok") s.ok = a.number != 0;
      if (a.key == "gradients") s.gradients = static_cast<std::uint64_t>(a.number);
      if (a.key == "max_staleness") s.max_staleness = static_cast<std::int64_t>(a.number);
    }
    out_.push_back(std::move(s));
  }

 private:
  std::vector<StepRecord>& out_;
  const int& program_start_;
};

void add_stats(CoordinatorStats& total, const CoordinatorStats& s) {
  total.scheduled += s.scheduled;
  total.completed += s.completed;
  total.failed += s.failed;
  total.retried += s.retried;
  total.cancelled += s.cancelled;
  total.dispatched += s.dispatched;
  total.worker_failures += s.worker_failures;
  total.worker_recoveries += s.worker_recoveries;
  total.resources_built += s.resources_built;
  total.ps_failures_retried += s.ps_failures_retried;
  total.ps_recoveries += s.ps_recoveries;
  total.ps_reloaded += s.ps_reloaded;
  total.timeouts_retried += s.timeouts_retried;
  total.errors_raised += s.errors_raised;
  total.staleness.merge(s.staleness);
  total.ssp_waits += s.ssp_waits;
  total.ssp_wait_time += s.ssp_wait_time;
  total.sync_steps += s.sync_steps;
  total.sync_wait_time += s.sync_wait_time;
  if (total.closures_per_worker.size() < s.closures_per_worker.size())
    total.closures_per_worker.resize(s.closures_per_worker.size(), 0);
  for (std::size_t i = 0; i < s.closures_per_worker.size(); ++i) total.closures_per_worker[i] += s.closures_per_worker[i];
}

// An executor bound after construction: the network, hosts and fluid system
// are built before the cluster (which takes the network as its link model),
// and post their events on the control node, which exists only after it.
// What is posted before it is bound (the fluid system's first solve, when
// link capacities are set up) waits for the binding.
class LateExecutor final : public Executor {
 public:
  void bind(Executor* target) {
    target_ = target;
    if (!target_) return;
    for (auto& [when, fn] : early_) target_->post_at(when, std::move(fn));
    early_.clear();
  }
  Time now() const override { return target_ ? target_->now() : 0; }
  void post(Callback fn) override { post_at(now(), std::move(fn)); }
  TimerId post_at(Time when, Callback fn) override {
    if (target_) return target_->post_at(when, std::move(fn));
    early_.emplace_back(when, std::move(fn));
    return kNoTimer;
  }
  void cancel(TimerId id) override {
    if (target_) target_->cancel(id);
  }
  bool run_until(const std::function<bool()>& done, Time limit) override {
    return target_ ? target_->run_until(done, limit) : false;
  }

 private:
  Executor* target_ = nullptr;
  std::vector<std::pair<Time, Callback>> early_;
};

// A profile's measured points, in the simulator's nanoseconds.
CostCurve cost_curve(const google::protobuf::RepeatedPtrField<scenario::BytesCost>& points) {
  CostCurve out;
  for (const auto& p : points) out.emplace_back(p.bytes(), p.us() * 1e3);
  return out;
}

MessageCpu message_cpu(const scenario::MessageCpu& m) {
  MessageCpu out;
  out.per_message_ns = m.per_message_us() * 1e3;
  if (m.has_per_message_on_busy_host_us()) out.per_message_on_busy_host_ns = m.per_message_on_busy_host_us() * 1e3;
  out.per_item_ns = m.per_item_us() * 1e3;
  out.per_item_by_id_ns = m.per_item_by_id_us() * 1e3;
  out.per_row_ns = m.per_row_us() * 1e3;
  out.per_kib_ns = m.per_kib_us() * 1e3;
  out.bytes_curve = cost_curve(m.bytes_curve());
  return out;
}

HostOptions host_options(const scenario::Hosts& h) {
  HostOptions o;
  switch (h.placement()) {
    case scenario::Hosts::ONE_PER_HOST: o.placement = HostOptions::Placement::kOnePerHost; break;
    case scenario::Hosts::ONE_HOST: o.placement = HostOptions::Placement::kOneHost; break;
    case scenario::Hosts::BIN_PACK: o.placement = HostOptions::Placement::kBinPack; break;
    case scenario::Hosts::SPREAD: o.placement = HostOptions::Placement::kSpread; break;
  }
  o.tasks_per_host = h.tasks_per_host();
  o.cores = h.cores();
  if (h.scheduler() == scenario::Hosts::TICKED) o.scheduler = HostOptions::Scheduler::kTicked;
  o.tick = static_cast<Duration>(std::llround(h.tick_us() * 1e3));
  o.duration_spread = h.duration_spread();
  for (const auto& point : h.crowded_message()) o.crowded_message.emplace_back(point.tasks_per_core(), point.us() * 1e3);
  return o;
}

}  // namespace

struct Simulation::Impl {
  Impl(const scenario::Scenario& s, SimOptions o);
  ~Impl();
  SimResult run();

  // ---- the coordinator program
  void begin_program();
  Task<Status> run_trainer(ClusterCoordinator& c, int start, const std::string& label);
  Status set_up_tutorial(const ClusterShape& shape);
  Status set_up_spec(const ClusterShape& shape);
  Status find_iterations_shard(const ClusterShape& shape);
  void snapshot_coordinator();
  std::vector<PsReport> ps_counters() const;
  std::vector<Duration> task_cpu() const;

  // ---- faults
  class SimulatedControl;
  // A scenario fault: ClusterControl faults through the fault schedule, the
  // simulator-only kinds (a slower host link, a hot variable) here.
  void schedule_fault(const scenario::Fault& f);
  // A worker's transport with scenario.message_faults applied (unchanged
  // without them). Each incarnation draws from a stream of its own.
  std::unique_ptr<Transport> with_message_faults(const TaskId& worker, Executor& ex, std::unique_ptr<Transport> inner);
  void fault_log(Time at, const std::string& what) { result.faults.push_back("t=" + seconds_string(at) + "  " + what); }
  Executor& control() { return *control_executor; }

  scenario::Scenario sc;
  SimOptions opts;
  std::uint64_t seed;
  RandomStream root;
  bool record_invariants;
  SimResult result;
  int current_start = 0;
  std::optional<std::pair<int, ShardId>> iterations_shard;  // (ps, shard) of the `iterations` counter
  std::uint64_t event_hash = 0xcbf29ce484222325ull;

  FunctionRegistry registry;
  std::unique_ptr<synthetic::Workload> workload;
  synthetic::Variables model_variables;
  // A model spec trained by the trainer (`train` actions).
  std::shared_ptr<const model::CompiledModel> spec_model;
  std::optional<training::DataSource> train_data, eval_data;
  training::TrainerOptions trainer_options;
  std::unique_ptr<ScenarioProgram> program;  // the coordinator program, shared with real mode
  LateExecutor late;  // the control node's executor, once it exists
  std::unique_ptr<FluidSystem> fluid;
  std::unique_ptr<HostModel> hosts;  // with the scenario's `hosts` or `messages`
  std::unique_ptr<NetworkModel> network;
  std::unique_ptr<SimCostModel> cost;
  PsServiceModel ps_model;
  std::vector<PsServiceStats> ps_stats;
  TraceHasher hasher;
  StepSink steps{result.steps, current_start};
  TraceTee tee;
  InMemoryStorage checkpoints;
  std::vector<const ParameterServerNode*> ps_nodes;  // the live node of each ps, for the service-time probe
  std::vector<int> worker_starts;
  std::map<int, std::uint64_t> worker_transports;  // transports made so far per worker index
  std::shared_ptr<CallFaultCounts> message_fault_counts = std::make_shared<CallFaultCounts>();
  std::unique_ptr<InMemoryCluster> cluster;
  // Declared after the cluster: destroyed before it.
  std::unique_ptr<NodeExecutor> control_executor;
  std::unique_ptr<TaskScope> program_scope;
  std::unique_ptr<SimulatedControl> actuators;  // ClusterControl on the simulated nodes
};

// ClusterControl on simulated nodes: what a kill, a restart, a pause, a
// partition or a slower task does to the InMemoryCluster and the simulator's
// models, each marked by a trace instant on the task's track.
class Simulation::Impl::SimulatedControl final : public ClusterControl {
 public:
  explicit SimulatedControl(Impl& sim) : sim_(sim) {}

  Status kill(const TaskId& t) override {
    if (t.job == Job::kChief) return kill_coordinator();
    instant(t, "killed");
    if (t.job == Job::kPs) sim_.ps_nodes[static_cast<std::size_t>(t.index)] = nullptr;
    sim_.cluster->kill(t);
    if (sim_.hosts) sim_.hosts->reset(sim_.hosts->slot(t));
    return absl::OkStatus();
  }

  Status restart(const TaskId& t) override {
    if (sim_.cluster->is_up(t)) return absl::OkStatus();
    // A restarted worker draws its compute times from a stream of its own.
    if (t.job == Job::kWorker) sim_.cost->restart(t.index, ++sim_.worker_starts[static_cast<std::size_t>(t.index)]);
    sim_.cluster->restart(t);
    if (t.job == Job::kPs) sim_.ps_nodes[static_cast<std::size_t>(t.index)] = sim_.cluster->ps(t.index);
    instant(t, "restarted");
    // A restarted coordinator runs its program again from the top.
    if (t.job == Job::kChief) sim_.begin_program();
    return absl::OkStatus();
  }

  Status pause(const TaskId& t) override {
    instant(t, "paused");
    sim_.cluster->pause(t);
    return absl::OkStatus();
  }

  Status resume(const TaskId& t) override {
    sim_.cluster->resume(t);
    instant(t, "resumed");
    return absl::OkStatus();
  }

  StatusOr<PartitionId> partition(const std::vector<TaskId>& a, const std::vector<TaskId>& b) override {
    const PartitionId id = sim_.network->add_partition(a, b);
    sides_[id] = a;
    for (const auto& t : a) instant(t, "partitioned");
    return id;
  }

  Status heal(PartitionId id) override {
    sim_.network->remove_partition(id);
    for (const auto& t : sides_[id]) instant(t, "healed");
    sides_.erase(id);
    return absl::OkStatus();
  }

  // The simulator slows a worker's compute (its steps take `factor` times
  // longer), as a straggling machine does.
  Status slow(const TaskId& t, double factor) override {
    if (t.job != Job::kWorker) return absl::UnimplementedError("the simulator slows workers only, not " + t.short_name());
    sim_.cost->push_factor(t.index, factor);
    sim_.tee.instant(t, "fault", "straggling", sim_.control().now(), {TraceArg{"factor", factor}});
    return absl::OkStatus();
  }

  Status unslow(const TaskId& t, double factor) override {
    if (t.job != Job::kWorker) return absl::UnimplementedError("the simulator slows workers only, not " + t.short_name());
    sim_.cost->pop_factor(t.index, factor);
    instant(t, "recovered speed");
    return absl::OkStatus();
  }

 private:
  // The coordinator dies with its program, whose frames use it.
  Status kill_coordinator() {
    if (!sim_.cluster->is_up(TaskId::chief())) return absl::OkStatus();
    instant(TaskId::chief(), "killed");
    sim_.snapshot_coordinator();
    sim_.program_scope.reset();
    sim_.cluster->kill(TaskId::chief());
    if (sim_.hosts) sim_.hosts->reset(0);
    return absl::OkStatus();
  }

  void instant(const TaskId& t, const char* what) { sim_.tee.instant(t, "fault", what, sim_.control().now()); }

  Impl& sim_;
  std::map<PartitionId, std::vector<TaskId>> sides_;
};

Simulation::Impl::Impl(const scenario::Scenario& s, SimOptions o)
    : sc(s),
      opts(std::move(o)),
      seed(opts.seed.value_or(s.seed())),
      root(seed),
      record_invariants(opts.record_invariants) {
  for (const auto& e : sc.expect())
    if (e.kind_case() == scenario::Expectation::kInvariants) record_invariants = true;
  const ClusterShape shape{sc.cluster().workers(), sc.cluster().ps()};
  result.name = sc.name();
  result.seed = seed;
  result.fidelity = sc.fidelity();
  result.shape = shape;
  result.time_limit = from_seconds(sc.time_limit_s());
  result.invariants_recorded = record_invariants;

  // Workload.
  if (sc.has_tutorial()) {
    if (Status st = set_up_tutorial(shape); !st.ok()) {
      result.setup_error = Status(st.code(), "building the model: " + describe(st));
      return;
    }
    training::register_training_functions(registry);
  } else if (sc.has_model_spec()) {
    if (Status st = set_up_spec(shape); !st.ok()) {
      result.setup_error = Status(st.code(), "building the model: " + describe(st));
      return;
    }
    training::register_training_functions(registry);
  } else {
    const bool timing_only = sc.fidelity() == scenario::TIMING_ONLY;
    auto spec = model_spec(sc.model(), sc.ps_service());
    auto variables = spec.ok() ? synthetic::build_variables(*spec, shape.ps, timing_only, root.fork("init").next_u64())
                               : StatusOr<synthetic::Variables>(spec.status());
    if (!variables.ok()) {
      result.setup_error = Status(variables.status().code(), "building the model: " + describe(variables.status()));
      return;
    }
    model_variables = std::move(*variables);
    workload = std::make_unique<synthetic::Workload>(std::move(*spec), timing_only);
    register_dataset_functions(registry);
    workload->register_functions(registry);
  }
  std::vector<scenario::Action> actions(sc.program().begin(), sc.program().end());
  if (actions.empty()) actions.emplace_back().mutable_train();
  // A synthetic model's iterations counter is where placement put it; a
  // spec's was found above.
  for (const auto& v : model_variables.layouts)
    if (v.name == kIterationsVar && !v.shards.empty()) iterations_shard = {v.shards.front().ps, v.shards.front().id};
  ScenarioProgram::Hooks hooks;
  hooks.ps_counters = [this] { return ps_counters(); };
  hooks.task_cpu = [this] { return task_cpu(); };
  if (!workload)
    hooks.train = [this](ClusterCoordinator& c, int start, const std::string& label) {
      return run_trainer(c, start, label);
    };
  program = std::make_unique<ScenarioProgram>(std::move(actions), workload.get(), &model_variables, result,
                                              std::move(hooks));

  // Network.
  NetworkOptions net;
  const auto& n = sc.network();
  net.host = LinkParams{n.host_bandwidth_gbps(), from_seconds(n.host_latency_us() * 1e-6)};
  net.hosts_per_rack = n.hosts_per_rack();
  net.rack_uplink = LinkParams{n.rack_uplink_gbps(), from_seconds(n.rack_uplink_latency_us() * 1e-6)};
  for (const auto& h : n.host_link()) {
    LinkParams p = net.host;
    if (h.has_bandwidth_gbps()) p.bandwidth_gbps = h.bandwidth_gbps();
    if (h.has_latency_us()) p.latency = from_seconds(h.latency_us() * 1e-6);
    net.host_overrides.emplace_back(*parse_task_name(h.task()), p);
  }
  net.connection_timeout = from_seconds(n.connection_timeout_s());
  net.model = n.model() == scenario::Network::FLOW ? NetworkOptions::Model::kFlow : NetworkOptions::Model::kFifo;
  net.flow.tcp_window_bytes = n.tcp_window_bytes();
  if (n.lv08()) {
    net.flow.latency_factor = 13.01;
    net.flow.bandwidth_factor = 0.97;
    net.flow.weight_s_bytes = 20537;
    net.flow.crosstraffic = 0.05;
  }
  net.loopback_latency = from_seconds(n.loopback_latency_us() * 1e-6);
  if (sc.has_messages()) {
    const auto& m = sc.messages();
    net.cpu.data_send = message_cpu(m.data_send());
    net.cpu.data_receive = message_cpu(m.data_receive());
    net.cpu.control_send = message_cpu(m.control_send());
    net.cpu.control_receive = message_cpu(m.control_receive());
    net.cpu.request_overlap = cost_curve(m.data_request_overlap());
    for (const auto& point : m.control_by_interval())
      net.cpu.control_by_interval.emplace_back(point.interval_us() * 1e3, point.us() * 1e3);
    if (m.has_control_on_busy_host_us()) net.cpu.control_on_busy_host = m.control_on_busy_host_us() * 1e3;
  }
  const bool with_hosts = sc.has_hosts() || sc.has_messages();
  if (with_hosts || net.model == NetworkOptions::Model::kFlow) fluid = std::make_unique<FluidSystem>(late);
  if (with_hosts) {
    HostOptions host = host_options(sc.hosts());
    host.seed = root.fork("job durations").next_u64();
    hosts = std::make_unique<HostModel>(shape, host, late, *fluid);
    for (int i = 0; i < shape.ps; ++i) hosts->set_threads(hosts->slot(TaskId::ps(i)), sc.ps_service().threads());
  }
  if (fluid) {
    network = std::make_unique<NetworkModel>(shape, net, hosts.get(), &late, fluid.get());
  } else {
    network = std::make_unique<NetworkModel>(shape, net);
  }

  // Compute.
  Distribution step;
  step.kind = Distribution::Kind::kConstant;
  step.a = 0.01;
  const auto& st = sc.compute().step_time();
  switch (st.kind_case()) {
    case scenario::Distribution::kConstantS: step = {Distribution::Kind::kConstant, st.constant_s(), 0}; break;
    case scenario::Distribution::kUniform:
      step = {Distribution::Kind::kUniform, st.uniform().min_s(), st.uniform().max_s()};
      break;
    case scenario::Distribution::kLognormal:
      step = {Distribution::Kind::kLogNormal, st.lognormal().median_s(), st.lognormal().sigma()};
      break;
    case scenario::Distribution::kNormal:
      step = {Distribution::Kind::kNormal, st.normal().mean_s(), st.normal().stddev_s()};
      break;
    case scenario::Distribution::kExponentialMeanS:
      step = {Distribution::Kind::kExponential, st.exponential_mean_s(), 0};
      break;
    case scenario::Distribution::KIND_NOT_SET: break;
  }
  cost = std::make_unique<SimCostModel>(step, sc.compute().per_example_s(), sc.compute().per_gflop_s(), shape.workers,
                                        root);
  for (const auto& s : sc.compute().straggler()) cost->set_base_factor(s.worker(), s.factor());
  for (const auto& k : sc.compute().kernel())
    cost->set_kernel_price(k.kind(), KernelPrice{k.per_call_us() * 1e-6, k.per_gflop_s(), k.per_gib_s(), k.per_ginput_s(),
                                                 k.per_gflop_per_doubling_s(), k.cache_bytes(), k.per_record_us() * 1e-6});
  cost->set_hosts(hosts.get());
  cost->set_copy_curve(cost_curve(sc.messages().data_assembly()));
  worker_starts.assign(static_cast<std::size_t>(shape.workers), 1);

  // Parameter-server service.
  const auto& ps = sc.ps_service();
  ps_model.per_request = from_seconds(ps.per_request_us() * 1e-6);
  if (ps.has_per_request_on_busy_host_us())
    ps_model.per_request_on_busy_host = from_seconds(ps.per_request_on_busy_host_us() * 1e-6);
  if (ps.has_per_request_when_awake_us())
    ps_model.per_request_when_awake = from_seconds(ps.per_request_when_awake_us() * 1e-6);
  for (const auto& point : ps.per_request_by_idle())
    ps_model.per_request_by_idle.emplace_back(point.interval_us() * 1e3, point.us() * 1e3);
  ps_model.per_byte_ns = ps.per_kib_us() * 1000.0 / 1024.0;
  ps_model.per_row_ns = ps.per_row_us() * 1000.0;
  ps_model.per_row_byte_ns = ps.per_row_kib_us() * 1000.0 / 1024.0;
  ps_model.threads = ps.threads();
  ps_model.per_item_ns = ps.per_item_us() * 1000.0;
  ps_model.per_item_by_id_ns = ps.per_item_by_id_us() * 1000.0;
  ps_model.bytes_curve = cost_curve(ps.bytes_curve());
  ps_model.reply_overlap = cost_curve(sc.messages().data_reply_overlap());
  if (workload) {
    for (const auto& a : ps.apply())
      if (static_cast<int>(a.optimizer()) == static_cast<int>(workload->spec().optimizer.kind)) {
        ps_model.apply_per_byte_ns = a.per_kib_us() * 1000.0 / 1024.0;
        ps_model.apply_curve = cost_curve(a.bytes_curve());
        ps_model.apply_per_row_ns = a.per_row_pushed_us() * 1000.0;
        ps_model.apply_per_row_byte_ns = a.per_row_pushed_kib_us() * 1000.0 / 1024.0;
        ps_model.apply_per_item_by_id_ns = a.per_item_pushed_by_id_us() * 1000.0;
      }
  }
  ps_stats.resize(static_cast<std::size_t>(shape.ps));

  tee.add(&hasher);
  tee.add(&steps);
  if (opts.trace) tee.add(opts.trace);

  // The cluster.
  const auto& co = sc.coordinator();
  InMemoryClusterOptions lo;
  lo.shape = shape;
  lo.seed = seed;
  lo.coordinator = coordinator_options(co);
  lo.worker.ps_call_timeout = from_seconds(co.ps_call_timeout_s());
  lo.links = network.get();
  lo.trace = &tee;
  lo.cost = cost.get();
  lo.wrap_transport = [this](const TaskId& t, Executor& ex, std::unique_ptr<Transport> inner) -> std::unique_ptr<Transport> {
    if (t.job == Job::kWorker) return with_message_faults(t, ex, std::move(inner));
    if (t.job != Job::kPs) return inner;
    const int i = t.index;
    return std::make_unique<PsServiceTransport>(
        t, ex, std::move(inner), ps_model, ps_stats[static_cast<std::size_t>(i)], tee,
        [this, i]() -> std::uint64_t {
          const ParameterServerNode* node = ps_nodes[static_cast<std::size_t>(i)];
          return node ? node->store().stats().rows_updated : 0;
        },
        record_invariants ? &result.pushes : nullptr, network.get(), hosts.get());
  };
  ps_nodes.assign(static_cast<std::size_t>(shape.ps), nullptr);
  cluster = std::make_unique<InMemoryCluster>(registry, lo);
  for (int i = 0; i < shape.ps; ++i) ps_nodes[static_cast<std::size_t>(i)] = cluster->ps(i);
  cluster->engine().set_observer([this](Time t, DeterministicEngine::NodeSlot node) {
    event_hash = (event_hash ^ static_cast<std::uint64_t>(t)) * 0x100000001b3ull;
    event_hash = (event_hash ^ node) * 0x100000001b3ull;
  });
  control_executor = std::make_unique<NodeExecutor>(cluster->engine(), cluster->engine().add_node());
  late.bind(control_executor.get());
  actuators = std::make_unique<SimulatedControl>(*this);

  // Faults: the scenario's, then those drawn from the seed.
  std::vector<scenario::Fault> faults(sc.fault().begin(), sc.fault().end());
  if (sc.has_random_faults() && sc.random_faults().count() > 0) {
    const auto& rf = sc.random_faults();
    RandomStream r = root.fork("random_faults");
    for (int k = 0; k < rf.count(); ++k) {
      scenario::Fault f;
      f.set_at_s(r.uniform(rf.start_s(), rf.end_s()));
      f.set_duration_s(r.uniform(rf.min_duration_s(), rf.max_duration_s()));
      const auto pick_task = [&]() -> std::string {
        const auto i = r.below(static_cast<std::uint64_t>(1 + shape.workers + shape.ps));
        if (i == 0) return "chief";
        if (i <= static_cast<std::uint64_t>(shape.workers)) return TaskId::worker(static_cast<int>(i - 1)).short_name();
        return TaskId::ps(static_cast<int>(i - 1 - static_cast<std::uint64_t>(shape.workers))).short_name();
      };
      switch (rf.kind(static_cast<int>(r.below(static_cast<std::uint64_t>(rf.kind_size()))))) {
        case scenario::RandomFaults::WORKER_CRASH:
          f.set_kill_worker(static_cast<int>(r.below(static_cast<std::uint64_t>(shape.workers))));
          break;
        case scenario::RandomFaults::PS_CRASH:
          f.set_kill_ps(static_cast<int>(r.below(static_cast<std::uint64_t>(shape.ps))));
          break;
        case scenario::RandomFaults::PARTITION: f.mutable_partition()->add_a(pick_task()); break;
        case scenario::RandomFaults::STRAGGLER:
          f.mutable_straggler()->set_worker(static_cast<int>(r.below(static_cast<std::uint64_t>(shape.workers))));
          f.mutable_straggler()->set_factor(r.uniform(2, 10));
          break;
        case scenario::RandomFaults::SLOW_LINK:
          f.mutable_slow_link()->set_task(pick_task());
          f.mutable_slow_link()->set_factor(r.uniform(2, 50));
          break;
        case scenario::RandomFaults::COORDINATOR_CRASH: f.set_kill_coordinator(true); break;
      }
      faults.push_back(std::move(f));
    }
  }
  for (const auto& f : faults) schedule_fault(f);
}

Simulation::Impl::~Impl() {
  // The program's frames use the coordinator: destroy them first.
  program_scope.reset();
  late.bind(nullptr);  // the control node goes before the fluid system's last timer is cancelled
}

// ---------------------------------------------------------------- faults

std::unique_ptr<Transport> Simulation::Impl::with_message_faults(const TaskId& worker, Executor& ex,
                                                                 std::unique_ptr<Transport> inner) {
  if (!sc.has_message_faults()) return inner;
  const auto& m = sc.message_faults();
  CallFaultPlan plan;
  plan.duplicate = m.duplicate();
  plan.delay = m.delay();
  plan.max_delay = from_seconds(m.max_delay_s());
  plan.drop_request = m.drop_request();
  plan.drop_reply = m.drop_reply();
  plan.loss_detection = from_seconds(m.loss_detection_s());
  plan.applies = is_pull_or_push;
  const std::uint64_t made = worker_transports[worker.index]++;
  auto faulty = std::make_unique<FaultyTransport>(std::move(inner), ex, std::move(plan),
                                                  root.fork("message_faults", static_cast<std::uint64_t>(worker.index)).fork(made));
  faulty->also_count_in(message_fault_counts);
  return faulty;
}

void Simulation::Impl::schedule_fault(const scenario::Fault& f) {
  if (auto fault = cluster_fault(f)) {
    schedule_cluster_fault(*fault, control(), *actuators,
                           [this](Time at, const std::string& what) { fault_log(at, what); });
    return;
  }
  // The simulator's own kinds: its network and workload models change.
  const Time at = from_seconds(f.at_s());
  const std::optional<Time> end =
      f.has_duration_s() ? std::optional<Time>(add_saturating(at, from_seconds(f.duration_s()))) : std::nullopt;
  const std::string until = end ? " until " + seconds_string(*end) : " for good";
  // The fault's description is logged when it fires: one scheduled after the
  // program ended never happened.
  std::string what;
  auto both = [&](std::function<void()> start, std::function<void()> stop) {
    control().post_at(at, [this, at, what, start = std::move(start)] {
      fault_log(at, what);
      start();
    });
    if (end && stop) control().post_at(*end, std::move(stop));
  };
  switch (f.kind_case()) {
    case scenario::Fault::kSlowLink: {
      const TaskId t = *parse_task_name(f.slow_link().task());
      const double factor = f.slow_link().factor();
      what = "host link of " + t.short_name() + " " + factor_string(factor) + " slower" + until;
      both(
          [this, t, factor] {
            network->slow_host_link(t, factor);
            tee.instant(t, "fault", "slow link", control().now(), {TraceArg{"factor", factor}});
          },
          [this, t, factor] {
            network->unslow_host_link(t, factor);
            tee.instant(t, "fault", "link restored", control().now());
          });
      break;
    }
    case scenario::Fault::kHotspot: {
      const int v = workload->find(f.hotspot().variable());
      what = "every step reads \"" + f.hotspot().variable() + "\"" + until;
      both([this, v] { workload->add_hot(v, 1); }, [this, v] { workload->add_hot(v, -1); });
      break;
    }
    default: break;  // ClusterControl's, above
  }
}

// ---------------------------------------------------------------- program

void Simulation::Impl::begin_program() {
  ProgramStart start;
  start.at = cluster->engine().now();
  start.chief_incarnation = cluster->runtime(TaskId::chief()).incarnation;
  result.starts.push_back(std::move(start));
  current_start = static_cast<int>(result.starts.size()) - 1;
  program_scope = std::make_unique<TaskScope>(cluster->coordinator_executor());
  program_scope->spawn(program->run(cluster->coordinator(), cluster->coordinator_executor(), *program_scope, current_start));
}

void Simulation::Impl::snapshot_coordinator() {
  if (result.starts.empty() || !cluster->is_up(TaskId::chief())) return;
  auto& s = result.starts.back();
  s.stats = cluster->coordinator().stats();
  s.dispatch_log = cluster->coordinator().dispatch_log();
  s.ps_recoveries = cluster->coordinator().ps_recoveries();
}

std::vector<PsReport> Simulation::Impl::ps_counters() const {
  std::vector<PsReport> out(ps_stats.size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    const TaskId t = TaskId::ps(static_cast<int>(i));
    out[i].service = ps_stats[i];
    out[i].uplink = network->uplink(t);
    out[i].downlink = network->downlink(t);
  }
  return out;
}

std::vector<Duration> Simulation::Impl::task_cpu() const {
  std::vector<Duration> out;
  if (!hosts) return out;
  const int tasks = 1 + result.shape.workers + result.shape.ps;
  for (int slot = 0; slot < tasks; ++slot) out.push_back(hosts->task_cpu(slot));
  return out;
}

// The tutorial: its built-in spec with the scenario's settings, trained on
// its generated records by the trainer. Data and initial values are drawn
// from the run's seed.
Status Simulation::Impl::set_up_tutorial(const ClusterShape& shape) {
  auto setup = tutorial_setup(sc.tutorial(), shape.ps, seed);
  if (!setup.ok()) return setup.status();
  spec_model = setup->model;
  train_data = std::move(setup->train);
  eval_data = std::move(setup->eval);
  trainer_options = std::move(setup->options);
  return find_iterations_shard(shape);
}

// Where the iterations counter lives (placement is deterministic).
Status Simulation::Impl::find_iterations_shard(const ClusterShape& shape) {
  auto vars = spec_model->build_variables(shape.ps, /*meta=*/true);
  if (!vars.ok()) return vars.status();
  for (const auto& v : vars->layouts)
    if (v.name == model::CompiledModel::kIterations) iterations_shard = {v.shards.front().ps, v.shards.front().id};
  return absl::OkStatus();
}

// A model spec (`model_spec`, NUMERIC): trained by the trainer on the data
// and with the options the caller gives (SimOptions::spec), exactly as
// `twinps train` trains it; the spec's init_seed gives the initial values.
Status Simulation::Impl::set_up_spec(const ClusterShape& shape) {
  if (!opts.spec || !opts.spec->model)
    return absl::InvalidArgumentError("the scenario trains the model spec " + sc.model_spec() +
                                      ": a numeric simulation needs its training data (twinps sim --train-data ...)");
  spec_model = opts.spec->model;
  train_data = opts.spec->train;
  eval_data = opts.spec->eval;
  trainer_options = opts.spec->options;
  trainer_options.checkpoints = nullptr;
  return find_iterations_shard(shape);
}

// A `train` action: the trainer on this coordinator. A restarted coordinator
// runs it again, restoring the latest checkpoint from storage that outlives
// the crash.
Task<Status> Simulation::Impl::run_trainer(ClusterCoordinator& c, int start, const std::string& label) {
  training::TrainerOptions o = trainer_options;
  std::unique_ptr<CheckpointManager> manager = scenario_checkpoints(sc, checkpoints);
  o.checkpoints = manager.get();
  // Named, not a temporary in the co_await: GCC 12 destroys such a temporary twice.
  ScenarioProgram::TrainerSetup setup{spec_model, &registry, *train_data, eval_data, std::move(o)};
  Task<Status> training = program->train(c, cluster->coordinator_executor(), *program_scope, start, label,
                                         std::move(setup));
  co_return co_await training;
}

// ---------------------------------------------------------------- run

SimResult Simulation::Impl::run() {
  if (!result.setup_error.ok()) return std::move(result);
  begin_program();
  DeterministicEngine& engine = cluster->engine();
  std::uint64_t count = 0;
  auto report = [&] {
    if (!opts.progress) return;
    SimProgress p;
    p.now = engine.now();
    p.limit = result.time_limit;
    p.events = engine.events_processed();
    if (cluster->is_up(TaskId::chief())) {
      p.scheduled = cluster->coordinator().stats().scheduled;
      p.completed = cluster->coordinator().stats().completed;
    }
    opts.progress(p);
  };
  engine.run_until(
      [&] {
        if (opts.progress && ++count % opts.progress_every == 0) report();
        return program->done();
      },
      result.time_limit);
  result.finished = program->done();
  // Let what happened at the final instant settle (results the last join
  // delivered wake their watchers at this same time).
  engine.run(engine.now());
  report();

  result.end_time = engine.now();
  snapshot_coordinator();
  for (const auto& s : result.starts) add_stats(result.stats, s.stats);
  result.events = engine.events_processed();
  result.events_skipped = engine.events_skipped();
  result.trace_records = hasher.records();
  std::uint64_t h = hasher.hash();
  h ^= event_hash + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  result.trace_hash = h;
  result.messages_lost = network->messages_lost();
  result.message_faults = *message_fault_counts;
  for (int i = 0; i < sc.cluster().ps(); ++i)
    if (const auto* node = cluster->ps(i)) {
      result.duplicate_pushes_dropped += node->store().stats().duplicates_dropped;
      result.ps_staleness.merge(node->store().stats().staleness);
    }

  for (int i = 0; i < sc.cluster().ps(); ++i) {
    PsReport r;
    r.service = ps_stats[static_cast<std::size_t>(i)];
    r.uplink = network->uplink(TaskId::ps(i));
    r.downlink = network->downlink(TaskId::ps(i));
    if (result.end_time > 0)
      r.utilisation = static_cast<double>(r.service.busy) /
                      (static_cast<double>(ps_model.threads) * static_cast<double>(result.end_time));
    result.ps.push_back(r);
  }

  // The iterations counter, read from whichever store holds it now.
  if (iterations_shard) {
    const auto [ps, id] = *iterations_shard;
    if (auto* node = cluster->ps(ps); node && node->store().has_shard(id)) {
      auto e = node->store().export_shards(ExportShardsRequest{{id}});
      if (e.ok()) result.final_iterations = e->shards.front().counter;
    }
  }
  if (sc.fidelity() == scenario::NUMERIC) {
    std::vector<ShardState> shards;
    for (int i = 0; i < sc.cluster().ps(); ++i) {
      const auto* node = cluster->ps(i);
      if (!node) continue;
      auto e = node->store().export_shards(ExportShardsRequest{});
      if (!e.ok()) continue;
      for (auto& s : e->shards) shards.push_back(std::move(s));
    }
    result.parameter_hash = training::parameter_hash(shards);
  }
  program->settle_values();
  program_scope.reset();
  return std::move(result);
}

Simulation::Simulation(const scenario::Scenario& scenario, SimOptions options)
    : impl_(std::make_unique<Impl>(scenario, std::move(options))) {}
Simulation::~Simulation() = default;
SimResult Simulation::run() { return impl_->run(); }

}  // namespace twinps::sim
