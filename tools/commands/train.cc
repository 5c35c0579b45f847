// twinps train: the coordinator program — the tutorial model's training loop —
// on one of three runtimes: the deterministic in-memory cluster, an
// in-process cluster over real gRPC, or a real cluster given by TF_CONFIG.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "core/checkpoint/training_checkpoints.h"
#include "core/local/local_cluster.h"
#include "core/models/tutorial/run_metadata.h"
#include "core/models/tutorial/tutorial.h"
#include "net/in_process_cluster.h"
#include "net/locked_trace.h"
#include "net/log.h"
#include "net/real_node.h"
#include "tools/cli.h"
#include "tools/data_plane_flag.h"
#include "tools/serving_flags.h"
#include "tools/task_metrics.h"
#include "tools/commands/commands.h"
#include "tools/tf_config.h"
#include "tools/trace_file.h"

namespace twinps::cli {
namespace {

struct TrainSettings {
  tutorial::Config model;
  ClusterShape shape{3, 2};
  CoordinatorOptions coordinator;
  std::string checkpoint_dir;
  int checkpoint_every_epochs = 1;
  std::int64_t checkpoint_every_steps = 0;  // 0: only at epoch ends
  double checkpoint_every_seconds = 0;      // 0: only at epoch ends
  int keep_checkpoints = 3;
  std::string trace_path;
  std::string report_path;
  net::GrpcTransportOptions transport;  // --data-plane
  TaskMetrics* metrics = nullptr;        // --metrics-port: the chief's Prometheus endpoint
};

// What the run did, for --report (tests and notebooks read it).
struct Report {
  nlohmann::json json = nlohmann::json::object();
  void write(const std::string& path, const ClusterCoordinator* c) {
    if (path.empty()) return;
    if (c) {
      const auto& s = c->stats();
      json["stats"] = {{"scheduled", s.scheduled},        {"completed", s.completed},
                       {"failed", s.failed},              {"retried", s.retried},
                       {"cancelled", s.cancelled},        {"dispatched", s.dispatched},
                       {"worker_failures", s.worker_failures}, {"worker_recoveries", s.worker_recoveries},
                       {"resources_built", s.resources_built}, {"errors_raised", s.errors_raised},
                       {"closures_per_worker", s.closures_per_worker}};
      auto& log = json["dispatch_log"] = nlohmann::json::array();
      static const char* kinds[] = {"closure", "resource", "worker_failed", "worker_recovered"};
      for (const auto& d : c->dispatch_log())
        log.push_back({{"t", to_seconds(d.time)}, {"worker", d.worker}, {"kind", kinds[static_cast<int>(d.kind)]},
                       {"id", d.id}});
    }
    std::ofstream out(path);
    out << json.dump(1) << "\n";
    if (!out) std::fprintf(stderr, "twinps train: cannot write report '%s'\n", path.c_str());
  }
};

double r_seconds(const tutorial::Result& r) { return to_seconds(r.training_finished - r.training_started); }

void print_epoch(const tutorial::EpochReport& e) {
  std::printf("Finished epoch %d, accuracy is %f.\n", e.epoch, e.accuracy);
  std::fflush(stdout);
}

void print_summary(const tutorial::Result& r, const CoordinatorStats& stats, double clock_seconds, int batch_size) {
  std::printf("Final loss is %f\n", r.final_loss);
  std::printf("Evaluation accuracy: %f (direct), %f (distributed)\n", r.direct_eval_accuracy,
              r.distributed_eval_accuracy);
  Table t;
  t.row("closures scheduled", std::to_string(stats.scheduled));
  t.row("closures completed", std::to_string(stats.completed));
  t.row("closures retried", std::to_string(stats.retried));
  t.row("closures cancelled", std::to_string(stats.cancelled));
  t.row("worker failures", std::to_string(stats.worker_failures));
  t.row("worker recoveries", std::to_string(stats.worker_recoveries));
  t.row("coordinator clock", format("%.3f s", clock_seconds));
  const double seconds = to_seconds(r.training_finished - r.training_started);
  if (seconds > 0)
    t.row("training throughput", format("%.0f examples/s (%lld steps in %.3f s)",
                                        static_cast<double>(r.steps_trained * batch_size) / seconds,
                                        static_cast<long long>(r.steps_trained), seconds));
  std::printf("\nsummary:\n");
  t.print();
  std::fflush(stdout);
}

// The coordinator's program, the same on every runtime. Returns the exit code.
Task<int> coordinator_program(ClusterCoordinator& c, const TrainSettings& s, CheckpointManager* manager,
                              Report& report) {
  auto model = tutorial::build_model(s.shape.ps, s.model);
  if (!model.ok()) {
    std::fprintf(stderr, "twinps train: %s\n", describe(model.status()).c_str());
    co_return kExitBadInput;
  }
  auto start = restore_or_initialize(manager, model->variables, model->optimizer, model->initial);
  if (!start.ok()) {
    std::fprintf(stderr, "twinps train: cannot restore from %s: %s\n", s.checkpoint_dir.c_str(),
                 describe(start.status()).c_str());
    co_return kExitFailed;
  }
  for (const auto& refused : start->refused) {
    spdlog::warn("refused checkpoint {}: {}", refused.name, describe(refused.reason));
    report.json["refused"].push_back({{"name", refused.name}, {"reason", describe(refused.reason)}});
  }
  const int start_epoch = resume_epoch(start->step, s.model.steps_per_epoch);
  if (start->restored_from) {
    std::printf("Restored checkpoint %s (iterations %lld): resuming at epoch %d\n", start->restored_from->c_str(),
                static_cast<long long>(start->step), start_epoch);
    report.json["restored_from"] = *start->restored_from;
  }
  report.json["start_epoch"] = start_epoch;
  Status started = co_await c.start(model->variables, model->optimizer, std::move(start->shards));
  if (!started.ok()) {
    std::fprintf(stderr, "twinps train: %s\n", describe(started).c_str());
    report.json["error"] = describe(started);
    co_return kExitFailed;
  }
  // Saves at epoch ends (every N epochs and after the last) and, within
  // epochs, every N steps or seconds since the last save. A mid-epoch save
  // joins first (a consistent snapshot); a restart resumes at the epoch the
  // saved iterations fall in, as TensorFlow's tutorial does.
  tutorial::AfterEpoch after_epoch;
  tutorial::AfterSchedule after_schedule;
  struct LastSave {
    std::int64_t steps = 0;
    Time at = 0;
  };
  auto last_save = std::make_shared<LastSave>(LastSave{0, c.now()});
  if (manager) {
    auto save = [manager, last_save](ClusterCoordinator& coord, std::map<std::string, std::string> metadata,
                                     std::int64_t steps) -> Task<Status> {
      auto saved = co_await save_checkpoint(coord, *manager, std::move(metadata));
      if (!saved.ok()) co_return saved.status();
      std::printf("Saved checkpoint %s\n", saved->c_str());
      std::fflush(stdout);
      *last_save = LastSave{steps, coord.now()};
      co_return absl::OkStatus();
    };
    after_epoch = [&s, save, start_epoch](ClusterCoordinator& coord, const tutorial::EpochReport& e) -> Task<Status> {
      if ((e.epoch + 1) % s.checkpoint_every_epochs != 0 && e.epoch + 1 != s.model.epochs) co_return absl::OkStatus();
      // The run's configuration goes with every checkpoint: `twinps eval` reads it there.
      std::map<std::string, std::string> metadata = tutorial::run_metadata(s.model);
      metadata["epoch"] = std::to_string(e.epoch);
      const std::int64_t steps_scheduled = std::int64_t{e.epoch + 1 - start_epoch} * s.model.steps_per_epoch;
      co_return co_await save(coord, std::move(metadata), steps_scheduled);
    };
    if (s.checkpoint_every_steps > 0 || s.checkpoint_every_seconds > 0) {
      after_schedule = [&s, save, last_save](ClusterCoordinator& coord, std::int64_t steps) -> Task<Status> {
        const bool by_steps = s.checkpoint_every_steps > 0 && steps - last_save->steps >= s.checkpoint_every_steps;
        const bool by_time =
            s.checkpoint_every_seconds > 0 && to_seconds(coord.now() - last_save->at) >= s.checkpoint_every_seconds;
        if (!by_steps && !by_time) co_return absl::OkStatus();
        TWINPS_CO_RETURN_IF_ERROR(co_await coord.join());
        std::map<std::string, std::string> metadata = tutorial::run_metadata(s.model);
        metadata["scheduled_steps"] = std::to_string(steps);
        co_return co_await save(coord, std::move(metadata), steps);
      };
    }
  }
  auto on_epoch = [&report, &s, start_iterations = start->step](const tutorial::EpochReport& e) {
    if (s.metrics) s.metrics->on_epoch(e, start_iterations);
    print_epoch(e);
    report.json["epochs"].push_back(
        {{"epoch", e.epoch}, {"accuracy", e.accuracy}, {"iterations", e.iterations}, {"time", to_seconds(e.finished_at)}});
  };
  auto result = co_await tutorial::train(c, s.model, start_epoch, on_epoch, after_epoch, after_schedule);
  if (s.metrics) s.metrics->on_finished(result.ok() ? *result : tutorial::Result{}, s.model.batch_size, result.status());
  if (!result.ok()) {
    std::fprintf(stderr, "twinps train: %s\n", describe(result.status()).c_str());
    report.json["error"] = describe(result.status());
    report.json["error_code"] = absl::StatusCodeToString(result.status().code());
    co_return kExitFailed;
  }
  report.json["final_loss"] = result->final_loss;
  report.json["direct_eval_accuracy"] = result->direct_eval_accuracy;
  report.json["distributed_eval_accuracy"] = result->distributed_eval_accuracy;
  report.json["examples_per_second"] =
      r_seconds(*result) > 0 ? static_cast<double>(result->steps_trained * s.model.batch_size) / r_seconds(*result) : 0.0;
  print_summary(*result, c.stats(), to_seconds(c.now()), s.model.batch_size);
  co_return kExitOk;
}

// Checkpoint storage, when --checkpoint-dir is given.
struct Checkpoints {
  std::unique_ptr<LocalDiskStorage> storage;
  std::unique_ptr<CheckpointManager> manager;
};
StatusOr<Checkpoints> open_checkpoints(const TrainSettings& s) {
  Checkpoints out;
  if (s.checkpoint_dir.empty()) return out;
  auto storage = LocalDiskStorage::open(s.checkpoint_dir, /*create=*/true);
  if (!storage.ok()) return storage.status();
  out.storage = std::move(*storage);
  out.manager = std::make_unique<CheckpointManager>(*out.storage, s.keep_checkpoints);
  return out;
}

int run_in_memory(const TrainSettings& s, CheckpointManager* manager, TraceSink* trace, Report& report) {
  FunctionRegistry registry;
  tutorial::register_functions(registry);
  LocalClusterOptions o;
  o.shape = s.shape;
  o.seed = s.model.data_seed;
  o.coordinator = s.coordinator;
  o.trace = trace;
  LocalCluster cluster(registry, o);
  auto rc = cluster.run(coordinator_program(cluster.coordinator(), s, manager, report));
  report.write(s.report_path, &cluster.coordinator());
  return rc.value_or(kExitFailed);
}

// The chief's metrics read the coordinator and its node, published every second.
void watch_metrics(const TrainSettings& s, const ClusterCoordinator& coordinator, net::RealNode& node) {
  if (!s.metrics) return;
  s.metrics->watch(&coordinator);
  s.metrics->watch(&node);
  s.metrics->attach(node.executor());
  spdlog::info("chief metrics on {}", s.metrics->url());
}

int run_in_process(const TrainSettings& s, CheckpointManager* manager, ChromeTraceWriter* trace, Report& report) {
  FunctionRegistry registry;
  tutorial::register_functions(registry);
  std::unique_ptr<net::LockedTraceSink> locked;
  if (trace) locked = std::make_unique<net::LockedTraceSink>(*trace);
  net::InProcessClusterOptions o;
  o.workers = s.shape.workers;
  o.ps = s.shape.ps;
  o.registry = &registry;
  o.trace = locked.get();
  o.transport = s.transport;
  auto cluster = net::InProcessCluster::start(o);
  if (!cluster.ok()) {
    std::fprintf(stderr, "twinps train: cannot start the in-process cluster: %s\n", describe(cluster.status()).c_str());
    return kExitFailed;
  }
  net::RealNode& node = (*cluster)->coordinator();
  // Every task of the in-process cluster shares the coordinator's clock.
  if (trace) stamp_trace(*trace, TaskId::chief(), node.executor());
  ClusterCoordinator coordinator(node.runtime(), s.shape, registry, s.coordinator);
  watch_metrics(s, coordinator, node);
  auto rc = block_on(node.executor(), coordinator_program(coordinator, s, manager, report));
  report.write(s.report_path, &coordinator);
  if (s.metrics) s.metrics->freeze();
  return rc.value_or(kExitFailed);
}

int run_on_cluster(const TrainSettings& settings, const std::string& tf_config_flag, CheckpointManager* manager,
                   ChromeTraceWriter* trace_file, Report& report) {
  TraceSink* trace = trace_file;
  auto tfc = load_tf_config(tf_config_flag);
  if (!tfc.ok()) {
    std::fprintf(stderr, "twinps train: %s\n", std::string(tfc.status().message()).c_str());
    return kExitBadInput;
  }
  if (Status v = validate_for_training(tfc->cluster); !v.ok()) {
    std::fprintf(stderr, "twinps train: %s\n", std::string(v.message()).c_str());
    return kExitBadInput;
  }
  if (tfc->task && tfc->task->job != Job::kChief) {
    std::fprintf(stderr, "twinps train: this task is %s; the coordinator runs as \"chief\" (use twinps serve for %s)\n",
                 tfc->task->short_name().c_str(), std::string(job_name(tfc->task->job)).c_str());
    return kExitBadInput;
  }
  TrainSettings s = settings;
  s.shape = ClusterShape{tfc->cluster.num_workers(), tfc->cluster.num_ps()};
  // Say which tasks have not answered (and where they were looked for) while the cluster forms.
  s.coordinator.on_waiting_for_tasks = [cluster = tfc->cluster, limit = s.coordinator.connect_timeout](
                                           const std::vector<TaskId>& missing, Duration waited) {
    std::string names;
    for (const auto& t : missing) {
      auto address = cluster.address(t);
      names += (names.empty() ? "" : ", ") + t.short_name() + " (" + (address.ok() ? *address : "?") + ")";
    }
    std::fprintf(stderr, "twinps train: waiting for the cluster: no answer yet from %s; %.0f s of %s s (--connect-timeout)\n",
                 names.c_str(), to_seconds(waited), shown(to_seconds(limit)).c_str());
  };
  if (s.model.num_shards < 0) s.model.num_shards = s.shape.ps;
  FunctionRegistry registry;
  tutorial::register_functions(registry);
  net::RealNodeOptions o;
  o.task = TaskId::chief();
  o.resolve = resolver(tfc->cluster);
  o.trace = trace;
  o.transport = s.transport;
  auto node = net::RealNode::create(std::move(o));
  if (!node.ok()) {
    std::fprintf(stderr, "twinps train: %s\n", describe(node.status()).c_str());
    return kExitFailed;
  }
  if (trace_file) stamp_trace(*trace_file, TaskId::chief(), (*node)->executor());
  ClusterCoordinator coordinator((*node)->runtime(), s.shape, registry, s.coordinator);
  watch_metrics(s, coordinator, **node);
  auto rc = block_on((*node)->executor(), coordinator_program(coordinator, s, manager, report));
  report.write(s.report_path, &coordinator);
  if (s.metrics) s.metrics->freeze();
  return rc.value_or(kExitFailed);
}

}  // namespace

int run_train(int argc, char** argv) {
  TrainSettings s;
  s.model.num_shards = -1;  // unless --shards says otherwise: the ps count, once it is known
  std::uint64_t seed = 1;
  std::string tf_config, data_plane = "tcp";
  double connect_timeout = 60, rpc_timeout = 30, heartbeat = 1, progress_every = 5;
  po::options_description opts("twinps train options");
  opts.add_options()("help,h", "show this help")
      ("in-memory", "run every task in this process on the deterministic in-memory transport")
      ("in-process", "run every task in this process over real gRPC on loopback ports")
      ("tf-config", po::value(&tf_config), "cluster as TF_CONFIG JSON (default: the TF_CONFIG variable)")
      ("workers", value_or(&s.shape.workers, 3)->notifier(at_least(1)), "worker tasks (--in-memory, --in-process)")
      ("ps", value_or(&s.shape.ps, 2)->notifier(at_least(1)), "parameter-server tasks (--in-memory, --in-process)")
      ("epochs", value_or(&s.model.epochs, 4)->notifier(at_least(1)), "epochs")
      ("steps-per-epoch", value_or(&s.model.steps_per_epoch, 5)->notifier(at_least(1)), "steps scheduled per epoch")
      ("steps-per-execution", value_or(&s.model.steps_per_execution, 1)->notifier(at_least(1)),
       "steps each closure runs")
      ("batch-size", value_or(&s.model.batch_size, 8)->notifier(at_least(1)), "examples per step")
      ("learning-rate", value_or(&s.model.learning_rate, 0.1)->notifier(positive()), "RMSprop learning rate")
      ("shards", po::value(&s.model.num_shards)->notifier(at_least(1)),
       "FixedShardsPartitioner shards (default: the ps count)")
      ("seed", value_or(&seed, std::uint64_t{1}), "seed of the data, initial values and shuffles")
      ("checkpoint-dir", po::value(&s.checkpoint_dir), "save checkpoints here and restore the newest at start")
      ("checkpoint-every", value_or(&s.checkpoint_every_epochs, 1)->notifier(at_least(1)),
       "save every N epochs (and after the last)")
      ("checkpoint-every-steps", value_or(&s.checkpoint_every_steps, std::int64_t{0})->notifier(at_least(std::int64_t{0})),
       "also save within epochs, every N steps scheduled (0: off)")
      ("checkpoint-every-seconds", value_or(&s.checkpoint_every_seconds, 0.0)->notifier(at_least(0.0)),
       "also save within epochs, every S seconds (0: off)")
      ("keep", value_or(&s.keep_checkpoints, 3)->notifier(at_least(0)), "checkpoints to keep (0: all)")
      ("connect-timeout", value_or(&connect_timeout, 60.0)->notifier(positive()),
       "seconds for every task to answer at start")
      ("rpc-timeout", value_or(&rpc_timeout, 30.0)->notifier(positive()), "seconds before a control call fails")
      ("heartbeat", value_or(&heartbeat, 1.0)->notifier(positive()),
       "seconds between worker health checks while closures run")
      ("progress-every", value_or(&progress_every, 5.0)->notifier(positive()),
       "with TF_CONFIG: seconds between lines on stderr naming the tasks that have not answered while the cluster "
       "forms")
      ("trace", po::value(&s.trace_path), "write a Chrome Trace Event file (open in Perfetto)")
      ("report", po::value(&s.report_path), "write a JSON report: epochs, stats, dispatch log")
      ("data-plane", value_or(&data_plane, std::string("tcp"))->notifier(one_of({"tcp", "grpc", "tcp-all"})),
       kDataPlaneHelp);
  SecurityFlags security_flags;
  security_flags.add_to(opts);
  MetricsFlags metrics_flags;
  metrics_flags.add_to(opts, /*coordinator=*/true);
  log::init("twinps train");
  po::variables_map vm;
  if (int rc = parse(argc, argv, "usage: twinps train (--in-memory | --in-process | with TF_CONFIG) [options]", opts, vm);
      rc >= 0)
    return rc;
  if (!apply_data_plane("train", data_plane, &s.transport)) return kExitBadInput;
  if (auto security = security_flags.security(); security.ok()) {
    s.transport.security = *security;
  } else {
    std::fprintf(stderr, "twinps train: %s\n", std::string(security.status().message()).c_str());
    return kExitBadInput;
  }
  if (vm.count("in-memory") && vm.count("in-process")) {
    std::fprintf(stderr, "twinps train: --in-memory and --in-process exclude each other\n");
    return kExitBadInput;
  }
  if (s.model.num_shards < 0 && (vm.count("in-memory") || vm.count("in-process"))) s.model.num_shards = s.shape.ps;
  s.model.data_seed = seed;
  s.model.init_seed = seed + 1;
  s.coordinator.connect_timeout = from_seconds(connect_timeout);
  s.coordinator.rpc_timeout = from_seconds(rpc_timeout);
  s.coordinator.heartbeat_interval = from_seconds(heartbeat);
  s.coordinator.heartbeat_timeout = 2 * from_seconds(heartbeat);
  s.coordinator.waiting_report_interval = from_seconds(progress_every);
  s.coordinator.record_dispatch_log = !s.report_path.empty();

  auto checkpoints = open_checkpoints(s);
  if (!checkpoints.ok()) {
    std::fprintf(stderr, "twinps train: %s\n", describe(checkpoints.status()).c_str());
    return kExitBadInput;
  }
  std::unique_ptr<ChromeTraceWriter> trace;
  if (!s.trace_path.empty()) {
    trace = std::make_unique<ChromeTraceWriter>(s.trace_path);
    if (!trace->ok()) {
      std::fprintf(stderr, "twinps train: %s\n", trace->error().c_str());
      return kExitBadInput;
    }
  }
  if (Status st = metrics_flags.apply_log_level(); !st.ok()) {
    std::fprintf(stderr, "twinps train: %s\n", std::string(st.message()).c_str());
    return kExitBadInput;
  }
  auto metrics = vm.count("in-memory") ? StatusOr<std::unique_ptr<TaskMetrics>>(nullptr)
                                       : TaskMetrics::start(metrics_flags, metrics_flags.bind, TaskId::chief(),
                                                            s.transport.security);
  if (!metrics.ok()) {
    std::fprintf(stderr, "twinps train: %s\n", describe(metrics.status()).c_str());
    return metrics.status().code() == StatusCode::kInvalidArgument ? kExitBadInput : kExitFailed;
  }
  s.metrics = metrics->get();
  Report report;
  int rc;
  if (vm.count("in-memory")) {
    rc = run_in_memory(s, checkpoints->manager.get(), trace.get(), report);
  } else if (vm.count("in-process")) {
    rc = run_in_process(s, checkpoints->manager.get(), trace.get(), report);
  } else {
    rc = run_on_cluster(s, tf_config, checkpoints->manager.get(), trace.get(), report);
  }
  if (s.metrics) linger_for_scrapes(*s.metrics, metrics_flags.linger);
  return rc;
}

}  // namespace twinps::cli
