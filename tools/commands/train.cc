// twinps train: the coordinator program — a model spec trained by the trainer
// (core/training/trainer.h) — on one of three runtimes: the deterministic
// in-memory cluster, an in-process cluster over real gRPC, or a real cluster
// given by TF_CONFIG. Without --model it trains the built-in tutorial on its
// generated records. This file only parses flags and wires.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "core/checkpoint/training_checkpoints.h"
#include "inmemory/in_memory_cluster.h"
#include "core/training/model_functions.h"
#include "core/training/parameter_hash.h"
#include "core/training/trainer.h"
#include "net/in_process_cluster.h"
#include "net/locked_trace.h"
#include "net/log.h"
#include "net/real_node.h"
#include "tools/cli.h"
#include "tools/data_plane_flag.h"
#include "tools/record_faults.h"
#include "tools/serving_flags.h"
#include "tools/task_metrics.h"
#include "tools/commands/commands.h"
#include "tools/tf_config.h"
#include "tools/trace_file.h"
#include "tools/training_report.h"
#include "tools/training_flags.h"

namespace twinps::cli {
namespace {

struct TrainSettings {
  ModelRun run;
  ClusterShape shape{3, 2};
  std::uint64_t seed = 1;
  CoordinatorOptions coordinator;
  std::string checkpoint_dir;
  int checkpoint_every_epochs = 1;
  std::int64_t checkpoint_every_steps = 0;  // 0: only at epoch ends
  double checkpoint_every_seconds = 0;      // 0: only at epoch ends
  int keep_checkpoints = 3;
  double progress_every_seconds = 0;
  std::string trace_path;
  std::string report_path;
  net::GrpcTransportOptions transport;  // --data-plane
  TaskMetrics* metrics = nullptr;        // --metrics-port: the chief's Prometheus endpoint
  // --record-faults: where the run is written as a scenario, the recorder
  // (the coordinator's observer), and the flags a replay of a model spec
  // needs (its data).
  std::string record_path;
  sim::FaultRecorder* recorder = nullptr;
  std::string replay_flags;
};

// What the run did, for --report (tests and notebooks read it).
struct Report {
  nlohmann::json json = nlohmann::json::object();
  // The trainer's result (for --record-faults).
  Status status;
  std::optional<std::int64_t> iterations;
  void write(const std::string& path, const ClusterCoordinator* c) {
    if (path.empty()) return;
    if (c) {
      json["stats"] = stats_json(c->stats());
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

// "accuracy is 0.600000" for the metrics the spec lists, in its order (the
// loss, always kept, only when listed or alone).
std::string metrics_text(const model::spec::ModelSpec& spec, const model::MetricValues& m, const char* is) {
  std::string out;
  auto add = [&](const char* name, double v) { out += format("%s%s%s%f", out.empty() ? "" : ", ", name, is, v); };
  for (int metric : spec.metric()) {
    if (metric == model::spec::LOSS) add("loss", m.loss);
    if (metric == model::spec::ACCURACY && m.accuracy) add("accuracy", *m.accuracy);
    if (metric == model::spec::AUC && m.auc) add("auc", *m.auc);
  }
  if (out.empty()) add("loss", m.loss);
  return out;
}

// The chief says on stderr when it gives up a worker or a ps, and when a
// worker rejoins, as TensorFlow's coordinator logs them; `next` (the fault
// recorder's observer, if any) still sees every event.
std::function<void(const CoordinatorEvent&)> log_failures(std::function<void(const CoordinatorEvent&)> next) {
  return [next = std::move(next)](const CoordinatorEvent& e) {
    const std::string task = e.task.short_name();
    const std::string why = e.heartbeats_missed ? "it missed its health checks; last: " + describe(e.cause)
                                                : describe(e.cause);
    switch (e.kind) {
      case CoordinatorEvent::Kind::kWorkerFailed:
        spdlog::warn("{} failed ({}): its closures run on other workers until it answers again", task, why);
        break;
      case CoordinatorEvent::Kind::kWorkerRecovered:
        spdlog::info("{} rejoined{}: its datasets and other resources are built again", task,
                     e.incarnation != e.previous_incarnation ? " (restarted)" : "");
        break;
      case CoordinatorEvent::Kind::kPsFailed:
        spdlog::warn("{} failed ({})", task, why);
        break;
      default:
        break;
    }
    if (next) next(e);
  };
}

// "every one of 200 examples 3 times: exactly once per pass", or the spread.
std::string describe_visits(const training::VisitCounts& v) {
  const auto ll = [](std::int64_t n) { return static_cast<long long>(n); };
  const std::string due =
      v.partial_records == 0
          ? format("every one of %lld examples %lld times", ll(v.examples), ll(v.full_passes))
          : format("%lld of %lld examples %lld times, the other %lld %lld (pass %lld begun)", ll(v.partial_records),
                   ll(v.examples), ll(v.full_passes + 1), ll(v.examples - v.partial_records), ll(v.full_passes),
                   ll(v.full_passes + 1));
  if (v.exact()) return due + ": exactly once per pass";
  return format("NOT exactly once: %lld of %lld examples visited other than due (seen %lld to %lld times; due: %s)",
                ll(v.off), ll(v.examples), ll(v.min), ll(v.max), due.c_str());
}

void print_summary(const training::TrainResult& r, const CoordinatorStats& stats, double clock_seconds,
                   std::int64_t batch_size) {
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
  t.row("records read", format("%lld (%lld passes completed by workers)", static_cast<long long>(r.read.records_read),
                               static_cast<long long>(r.read.passes_completed)));
  if (!stats.staleness.empty()) t.row("gradient staleness", stats.staleness.describe());
  if (stats.sync_steps > 0) t.row("sync steps applied", std::to_string(stats.sync_steps));
  // --ps-failure-policy restore/rollback (docs/semantics.md P10-P14).
  if (stats.ps_recoveries > 0)
    t.row("ps recoveries", format("%llu in place (%llu ps reloaded from the newest checkpoint)",
                                  static_cast<unsigned long long>(stats.ps_recoveries),
                                  static_cast<unsigned long long>(stats.ps_reloaded)));
  if (r.steps_made_up > 0) t.row("steps made up", std::to_string(r.steps_made_up) + " (lost to ps recoveries)");
  if (r.visits) t.row("visits per example", describe_visits(*r.visits));
  if (r.read.records_skipped > 0 || r.read.files_cut_short > 0)
    t.row("bad records skipped", format("%lld (%lld files cut short)", static_cast<long long>(r.read.records_skipped),
                                        static_cast<long long>(r.read.files_cut_short)));
  std::printf("\nsummary:\n");
  t.print();
  std::fflush(stdout);
}

// The coordinator's program, the same on every runtime. Returns the exit code.
Task<int> coordinator_program(ClusterCoordinator& c, const FunctionRegistry& registry, const TrainSettings& s,
                              CheckpointManager* manager, Report& report) {
  const ModelRun& run = s.run;
  // Checked here, where every runtime knows its workers (--workers or TF_CONFIG).
  if (run.mode == TrainingMode::kSync && run.backup_workers >= c.shape().workers) {
    std::fprintf(stderr,
                 "twinps train: --backup-workers (or the spec's training.backup_workers) %lld must be fewer than the "
                 "workers (%d)\n",
                 static_cast<long long>(run.backup_workers), c.shape().workers);
    co_return kExitBadInput;
  }
  training::TrainerOptions options = run.options;
  options.checkpoints = manager;
  options.checkpoint_every_epochs = s.checkpoint_every_epochs;
  options.checkpoint_every_steps = s.checkpoint_every_steps;
  options.checkpoint_every = from_seconds(s.checkpoint_every_seconds);
  options.checkpoint_metadata = run.checkpoint_metadata;
  options.progress_every = from_seconds(s.progress_every_seconds);
  training::TrainerCallbacks callbacks;
  std::int64_t start_iterations = 0;
  callbacks.on_start = [&](const training::StartInfo& start) {
    for (const auto& refused : start.refused) {
      spdlog::warn("refused checkpoint {}: {}", refused.name, describe(refused.reason));
      report.json["refused"].push_back({{"name", refused.name}, {"reason", describe(refused.reason)}});
    }
    if (start.restored_from) {
      std::printf("Restored checkpoint %s (iterations %lld): resuming at epoch %d\n", start.restored_from->c_str(),
                  static_cast<long long>(start.restored_iterations), start.start_epoch);
      report.json["restored_from"] = *start.restored_from;
    }
    start_iterations = start.restored_iterations;
    report.json["start_epoch"] = start.start_epoch;
    report.json["steps_per_epoch"] = start.steps_per_epoch;
  };
  callbacks.on_epoch = [&](const training::EpochResult& e) {
    if (s.metrics) s.metrics->on_epoch(e, start_iterations);
    std::printf("Finished epoch %d, %s.\n", e.epoch, metrics_text(run.spec, e.train, " is ").c_str());
    // (The evaluation after the last epoch is printed once, after training.)
    if (e.eval && e.epoch + 1 < options.epochs)
      std::printf("Evaluation after epoch %d: %s (%.0f examples).\n", e.epoch,
                  metrics_text(run.spec, *e.eval, " ").c_str(), e.eval->examples);
    report.json["epochs"].push_back(epoch_json(e, run.model->batch_size()));
    std::fflush(stdout);
  };
  callbacks.on_checkpoint = [](const std::string& name) {
    std::printf("Saved checkpoint %s\n", name.c_str());
    std::fflush(stdout);
  };
  callbacks.on_progress = [](const training::Progress& p) {
    std::fprintf(stderr, "epoch %d/%d: step %lld/%lld, %.0f examples/s", p.epoch + 1, p.epochs,
                 static_cast<long long>(p.steps_done), static_cast<long long>(p.steps_per_epoch),
                 p.examples_per_second);
    if (p.loss) std::fprintf(stderr, ", loss %.4f", *p.loss);
    std::fprintf(stderr, "\n");
  };
  training::Trainer trainer(run.model, registry, *run.train, run.eval, options, callbacks);
  auto result = co_await trainer.run(c);
  report.status = result.status();
  if (result.ok()) report.iterations = result->iterations;
  if (s.metrics)
    s.metrics->on_finished(result.ok() ? *result : training::TrainResult{}, run.model->batch_size(), result.status());
  if (!result.ok()) {
    // With the status code: a lost task (UNAVAILABLE) reads differently from bad data (INVALID_ARGUMENT).
    print_error("train", Status(result.status().code(), describe(result.status())));
    report.json["error"] = describe(result.status());
    report.json["error_code"] = absl::StatusCodeToString(result.status().code());
    co_return exit_code_for(result.status());
  }
  std::printf("Final loss is %f\n", result->final_loss);
  report.json["final_loss"] = result->final_loss;
  report.json["iterations"] = result->iterations;
  if (result->eval) {
    std::printf("Evaluation (%s, %.0f examples): %s\n",
                options.eval_mode == training::EvalMode::kDirect ? "direct" : "distributed", result->eval->examples,
                metrics_text(run.spec, *result->eval, " ").c_str());
    report.json["eval"] = metrics_json(*result->eval);
  }
  report.json["records_read"] = result->read.records_read;
  if (result->visits) {
    const training::VisitCounts& v = *result->visits;
    report.json["visits"] = {{"examples", v.examples}, {"full_passes", v.full_passes},
                             {"partial_records", v.partial_records}, {"min", v.min}, {"max", v.max},
                             {"off", v.off}, {"exactly_once", v.exact()}};
  }
  report.json["records_skipped"] = result->read.records_skipped;
  {
    report.json["staleness"] = staleness_json(c.stats().staleness);
    report.json["sync_steps"] = c.stats().sync_steps;
  }
  const double seconds = to_seconds(result->training_finished - result->training_started);
  report.json["examples_per_second"] =
      seconds > 0 ? static_cast<double>(result->steps_trained * run.model->batch_size()) / seconds : 0.0;
  print_summary(*result, c.stats(), to_seconds(c.now()), run.model->batch_size());
  co_return kExitOk;
}

// --record-faults: the run as a scenario (sim/scenario.proto) that `twinps
// sim` replays: this cluster, this model (the tutorial's settings, or the
// spec's file), the coordinator's options, one `train` action, and what the
// recorder observed. Returns the exit code, `rc` unless writing fails.
int record_run(const TrainSettings& s, const ClusterShape& shape, const ClusterCoordinator& c, const Report& report,
               const std::string& how, int rc) {
  if (!s.recorder) return rc;
  scenario::Scenario base;
  base.set_name("twinps train");
  base.set_seed(s.seed);
  base.mutable_cluster()->set_workers(shape.workers);
  base.mutable_cluster()->set_ps(shape.ps);
  const ModelRun& run = s.run;
  if (s.replay_flags.empty()) {
    // The built-in tutorial: the simulator's `tutorial` is its spec with these settings.
    auto* t = base.mutable_tutorial();
    t->set_epochs(run.options.epochs);
    t->set_steps_per_epoch(static_cast<int>(run.options.steps_per_epoch));
    t->set_batch_size(static_cast<int>(run.spec.batch_size()));
    if (run.spec.optimizer_size() > 0 && run.spec.optimizer(0).learning_rate().has_constant())
      t->set_learning_rate(run.spec.optimizer(0).learning_rate().constant());
    if (run.spec.partitioner().has_fixed_shards()) t->set_num_shards(static_cast<int>(run.spec.partitioner().fixed_shards()));
  } else {
    base.set_model_spec(std::filesystem::absolute(run.spec_source).string());
  }
  *base.mutable_coordinator() = sim::scenario_coordinator(s.coordinator, 30);
  auto* train = base.add_program();
  train->mutable_train();
  train->set_label("train");
  sim::RecordedOutcome outcome;
  outcome.stats = c.stats();
  outcome.labelled.emplace_back("train", report.status);
  outcome.iterations = report.iterations;
  outcome.steps_per_closure = run.options.steps_per_execution;
  std::string replay = how;
  if (!s.replay_flags.empty()) replay += "; replay with the model's data: twinps sim FILE" + s.replay_flags;
  if (Status st = write_recording(s.record_path, *s.recorder, s.recorder->scenario(base, outcome), replay); !st.ok()) {
    print_error("train", st);
    return kExitFailed;
  }
  return rc;
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
  training::register_training_functions(registry);
  InMemoryClusterOptions o;
  o.shape = s.shape;
  o.seed = s.seed;
  o.coordinator = s.coordinator;
  o.trace = trace;
  InMemoryCluster cluster(registry, o);
  auto rc = cluster.run(coordinator_program(cluster.coordinator(), registry, s, manager, report));
  if (rc == kExitOk) {
    // What `twinps sim --model` of the same spec, seed and one worker ends with, bit for bit.
    auto shards = cluster.run(cluster.coordinator().export_variables());
    if (shards && shards->ok()) {
      const std::uint64_t hash = training::parameter_hash(**shards);
      std::printf("parameter hash: %016llx\n", static_cast<unsigned long long>(hash));
      report.json["parameter_hash"] = format("%016llx", static_cast<unsigned long long>(hash));
    }
  }
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
  training::register_training_functions(registry);
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
  auto rc = block_on(node.executor(), coordinator_program(coordinator, registry, s, manager, report));
  report.write(s.report_path, &coordinator);
  if (s.metrics) s.metrics->freeze();
  return record_run(s, s.shape, coordinator, report, "twinps train --in-process", rc.value_or(kExitFailed));
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
  FunctionRegistry registry;
  training::register_training_functions(registry);
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
  auto rc = block_on((*node)->executor(), coordinator_program(coordinator, registry, s, manager, report));
  report.write(s.report_path, &coordinator);
  if (s.metrics) s.metrics->freeze();
  return record_run(s, s.shape, coordinator, report, "twinps train (TF_CONFIG cluster)", rc.value_or(kExitFailed));
}

// The model and data flags of this command line, which a replay of its model
// spec needs (`twinps sim FILE --train-data ...`); empty for the built-in tutorial.
std::string replay_flags(int argc, char** argv) {
  static const char* const kReplayed[] = {
      "--model", "--train-data", "--train-labels", "--eval-data", "--eval-labels", "--format", "--sharding",
      "--csv-delimiter", "--batch-size", "--learning-rate", "--shards", "--init-seed", "--epochs",
      "--steps-per-epoch", "--steps-per-execution", "--eval-every", "--eval-steps", "--mode", "--staleness-bound"};
  std::string out;
  bool model = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    for (const char* flag : kReplayed) {
      const std::string f = flag;
      if (arg != f && arg.rfind(f + "=", 0) != 0) continue;
      model = model || f == "--model";
      if (f == "--model") break;  // the scenario names the spec file
      out += " " + arg;
      // Every value up to the next flag (--train-data takes several).
      for (int j = i + 1; arg == f && j < argc && std::string(argv[j]).rfind("--", 0) != 0; ++j) out += " " + std::string(argv[j]);
      break;
    }
  }
  return model ? out : std::string();
}

}  // namespace

int run_train(int argc, char** argv) {
  TrainSettings s;
  ModelFlags model_flags;
  std::string tf_config, data_plane = "tcp";
  double connect_timeout = 60, rpc_timeout = 30, heartbeat = 1;
  po::options_description opts("twinps train options");
  opts.add_options()("help,h", "show this help")
      ("in-memory", "run every task in this process on the deterministic in-memory transport")
      ("in-process", "run every task in this process over real gRPC on loopback ports")
      ("tf-config", po::value(&tf_config), "cluster as TF_CONFIG JSON (default: the TF_CONFIG variable)")
      ("workers", value_or(&s.shape.workers, 3)->notifier(at_least(1)), "worker tasks (--in-memory, --in-process)")
      ("ps", value_or(&s.shape.ps, 2)->notifier(at_least(1)), "parameter-server tasks (--in-memory, --in-process)")
      ("seed", value_or(&s.seed, std::uint64_t{1}),
       "seed of the generated data and the shuffles (the built-in tutorial's initial values: seed + 1)");
  model_flags.add_model_options(opts);
  model_flags.add_training_options(opts);
  model_flags.add_data_options(opts);
  opts.add_options()
      ("checkpoint-dir", po::value(&s.checkpoint_dir), "save checkpoints here and restore the newest at start")
      ("checkpoint-every", value_or(&s.checkpoint_every_epochs, 1)->notifier(at_least(1)),
       "save every N epochs (and after the last)")
      ("checkpoint-every-steps", value_or(&s.checkpoint_every_steps, std::int64_t{0})->notifier(at_least(std::int64_t{0})),
       "also save within epochs, every N steps scheduled (0: off)")
      ("checkpoint-every-seconds", value_or(&s.checkpoint_every_seconds, 0.0)->notifier(at_least(0.0)),
       "also save within epochs, every S seconds (0: off)")
      ("keep", value_or(&s.keep_checkpoints, 3)->notifier(at_least(0)), "checkpoints to keep (0: all)")
      ("progress-every", value_or(&s.progress_every_seconds, 5.0)->notifier(positive()),
       "seconds between lines on stderr: while training, examples/s and loss; with TF_CONFIG, while the cluster "
       "forms, the tasks that have not answered")
      ("connect-timeout", value_or(&connect_timeout, 60.0)->notifier(positive()),
       "seconds for every task to answer at start")
      ("rpc-timeout", value_or(&rpc_timeout, 30.0)->notifier(positive()), "seconds before a control call fails")
      ("heartbeat", value_or(&heartbeat, 1.0)->notifier(positive()),
       "seconds between worker health checks while closures run")
      ("trace", po::value(&s.trace_path), "write a Chrome Trace Event file (open in Perfetto)")
      ("report", po::value(&s.report_path), "write a JSON report: epochs, stats, dispatch log")
      ("record-faults", po::value(&s.record_path),
       "real runs (--in-process, TF_CONFIG): write what the coordinator observed (worker failures and recoveries, "
       "ps failures, step time, the outcome) as a scenario that `twinps sim FILE` replays")
      ("data-plane", value_or(&data_plane, std::string("tcp"))->notifier(one_of_data_planes()),
       kDataPlaneHelp);
  SecurityFlags security_flags;
  security_flags.add_to(opts);
  MetricsFlags metrics_flags;
  metrics_flags.add_to(opts, /*coordinator=*/true);
  log::init("twinps train");
  po::variables_map vm;
  if (int rc = parse(argc, argv,
                     "usage: twinps train (--in-memory | --in-process | with TF_CONFIG) [--model M.textproto "
                     "--train-data GLOB [--eval-data GLOB]] [options]",
                     opts, vm);
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
  model_flags.seed = s.seed;
  auto run = load_model_run(model_flags, vm, /*need_train_data=*/true);
  if (!run.ok()) {
    print_error("train", run.status());
    return kExitBadInput;
  }
  s.run = std::move(*run);
  s.coordinator.connect_timeout = from_seconds(connect_timeout);
  s.coordinator.rpc_timeout = from_seconds(rpc_timeout);
  s.coordinator.heartbeat_interval = from_seconds(heartbeat);
  s.coordinator.heartbeat_timeout = 2 * from_seconds(heartbeat);
  s.coordinator.waiting_report_interval = from_seconds(s.progress_every_seconds);
  s.coordinator.record_dispatch_log = !s.report_path.empty();
  s.coordinator.mode = s.run.mode;
  s.coordinator.staleness_bound = s.run.staleness_bound;
  s.coordinator.backup_workers = s.run.backup_workers;
  s.coordinator.ps_failure = s.run.ps_failure;
  s.coordinator.ps_recovery_wait = s.run.ps_recovery_wait;

  sim::FaultRecorder recorder;
  if (vm.count("record-faults")) {
    if (vm.count("in-memory")) {
      std::fprintf(stderr, "twinps train: --record-faults records a real run (--in-process or TF_CONFIG), not --in-memory\n");
      return kExitBadInput;
    }
    if (Status st = check_record_path(s.record_path); !st.ok()) {
      print_error("train", st);
      return kExitBadInput;
    }
    s.recorder = &recorder;
    s.coordinator.on_event = recorder.observer();
    s.replay_flags = replay_flags(argc, argv);
  }
  s.coordinator.on_event = log_failures(std::move(s.coordinator.on_event));
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
