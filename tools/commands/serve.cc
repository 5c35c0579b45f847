// twinps serve: a parameter-server or worker task, serving until SIGTERM/SIGINT.
#include <csignal>
#include <cstdio>

#include "core/models/synthetic/synthetic.h"
#include "core/training/model_functions.h"
#include "net/allocator_tuning.h"
#include "net/log.h"
#include "net/locked_trace.h"
#include "net/real_node.h"
#include "sim/scenario_loader.h"
#include "sim/workload.h"
#include "tools/cli.h"
#include "tools/data_plane_flag.h"
#include "tools/serving_flags.h"
#include "tools/task_metrics.h"
#include "tools/commands/commands.h"
#include "tools/tf_config.h"
#include "tools/trace_file.h"
#include "tools/transport_cut.h"

namespace twinps::cli {
namespace {

volatile std::sig_atomic_t g_stop = 0;

// Fault injection: every step of this worker takes `delay` longer (a slow or
// straggling machine). It uses the same compute seam the simulator models.
class FixedStepDelay final : public CostModel {
 public:
  explicit FixedStepDelay(Duration delay) : delay_(delay) {}
  Duration compute(const TaskId& task, const ComputeCost&) override {
    // At debug level, a numbered line per step: a readiness signal for tests
    // and operators that need to know a step is under way on this task.
    spdlog::debug("{}: delayed step {} begins", task.short_name(), ++steps_);
    return delay_;
  }

 private:
  Duration delay_;
  std::uint64_t steps_ = 0;
};
void on_signal(int) { g_stop = 1; }

// "host:port" with its port replaced by `port` (":N").
std::string with_port(const std::string& address, const std::string& port) {
  return address.substr(0, address.rfind(':')) + port;
}

}  // namespace

int run_serve(int argc, char** argv) {
  std::string role, tf_config, model_path, trace_path, cut_file;
  double cut_detection = 5;
  int index = -1;
  double ps_call_timeout = 30, step_delay = 0;
  int compute_factor = 1;
  std::size_t max_message_mb = 256;
  std::string data_plane = "tcp";
  po::options_description opts("twinps serve options");
  opts.add_options()("help,h", "show this help")
      ("role", po::value(&role)->notifier(one_of({"ps", "worker"})), "ps or worker (default: the task type in TF_CONFIG)")
      ("task-index", po::value(&index)->notifier(at_least(0)), "index of this task (default: the task index in TF_CONFIG)")
      ("tf-config", po::value(&tf_config), "cluster as TF_CONFIG JSON (default: the TF_CONFIG variable)")
      ("ps-call-timeout", value_or(&ps_call_timeout, 30.0)->notifier(positive()), "workers: seconds before a call to a ps fails")
      ("max-message-mb", value_or(&max_message_mb, std::size_t{256})->notifier(in_range<std::size_t>(1, 2047)), "largest message accepted or sent, in MiB")
      ("data-plane", value_or(&data_plane, std::string("tcp"))->notifier(one_of_data_planes()), kDataPlaneHelp)
      ("trace", po::value(&trace_path),
       "write this task's Chrome Trace Event file (merge the files of a cluster with `twinps trace merge`)")
      ("inject-step-delay", value_or(&step_delay, 0.0)->notifier(at_least(0.0)),
       "fault injection (workers): seconds added to every step, as on a slow machine")
      ("inject-compute-factor", po::value(&compute_factor)->default_value(1),
       "fault injection (workers with --model): every step's arithmetic is done this many times, as on a machine "
       "that many times slower (the simulator's compute.straggler factor)")
      ("cut-file", po::value(&cut_file),
       "fault injection (partitions): calls to the tasks this file names (one per line: chief, worker:N, ps:N) are "
       "lost; the file is read again whenever it changes (tools/transport_cut.h)")
      ("cut-detection", value_or(&cut_detection, 5.0)->notifier(positive()),
       "with --cut-file: seconds before a lost call fails with UNAVAILABLE")
      ("model", po::value(&model_path),
       "workers: also run the steps of this synthetic model (scenario.SyntheticModel in text format, as "
       "`twinps tune` takes). Not for model specs: `twinps train --model SPEC` ships its spec to every worker");
  ServingFlags serving;
  serving.add_to(opts);
  SecurityFlags security_flags;
  security_flags.add_to(opts);
  MetricsFlags metrics_flags;
  metrics_flags.add_to(opts, /*coordinator=*/false);
  log::init("twinps serve");
  po::variables_map vm;
  if (int rc = parse(argc, argv, "usage: twinps serve [--role ps|worker] [--task-index N] (with TF_CONFIG)", opts, vm);
      rc >= 0)
    return rc;
  if (compute_factor < 1 || compute_factor > 1000) {
    std::fprintf(stderr, "twinps serve: --inject-compute-factor must be from 1 to 1000 (got %d)\n", compute_factor);
    return kExitBadInput;
  }
  net::GrpcTransportOptions transport;
  if (!apply_data_plane("serve", data_plane, &transport)) return kExitBadInput;
  auto tfc = load_tf_config(tf_config);
  if (!tfc.ok()) {
    std::fprintf(stderr, "twinps serve: %s\n", std::string(tfc.status().message()).c_str());
    return kExitBadInput;
  }
  TaskId task;
  if (tfc->task) task = *tfc->task;
  if (!role.empty()) {
    auto job = parse_job(role);
    if (!job || (*job != Job::kPs && *job != Job::kWorker)) {
      std::fprintf(stderr, "twinps serve: --role must be ps or worker, not '%s'\n", role.c_str());
      return kExitBadInput;
    }
    task.job = *job;
  }
  if (index >= 0) task.index = index;
  if (!tfc->task && (role.empty() || index < 0)) {
    std::fprintf(stderr, "twinps serve: TF_CONFIG has no \"task\"; pass --role and --task-index\n");
    return kExitBadInput;
  }
  if (task.job != Job::kPs && task.job != Job::kWorker) {
    std::fprintf(stderr, "twinps serve: serves ps and worker tasks; %s runs 'twinps %s'\n", task.short_name().c_str(),
                 task.job == Job::kChief ? "train" : "eval");
    return kExitBadInput;
  }
  auto address = tfc->cluster.address(task);
  if (!address.ok()) {
    std::fprintf(stderr, "twinps serve: %s\n", std::string(address.status().message()).c_str());
    return kExitBadInput;
  }
  auto listen = serving.listen_address(*address);
  if (!listen.ok()) {
    std::fprintf(stderr, "twinps serve: %s\n", std::string(listen.status().message()).c_str());
    return kExitBadInput;
  }
  auto security = security_flags.security();
  if (!security.ok()) {
    std::fprintf(stderr, "twinps serve: %s\n", std::string(security.status().message()).c_str());
    return kExitBadInput;
  }
  if (Status st = metrics_flags.apply_log_level(); !st.ok()) {
    std::fprintf(stderr, "twinps serve: %s\n", std::string(st.message()).c_str());
    return kExitBadInput;
  }
  if (!security->token.empty() && !security->tls)
    spdlog::warn("the cluster token travels in clear on gRPC without TLS (--tls-cert/--tls-key/--tls-ca)");
  // Tensors arrive in fresh buffers: keep freed ones mapped rather than fault pages in again.
  net::tune_allocator_for_large_tensors();
  FunctionRegistry registry;
  training::register_training_functions(registry);
  std::unique_ptr<synthetic::Workload> synthetic_model;
  if (!model_path.empty()) {
    auto loaded = sim::load_model_file(model_path);
    for (const auto& e : loaded.errors) std::fprintf(stderr, "twinps serve: %s\n", e.to_string().c_str());
    if (!loaded.ok()) return kExitBadInput;
    auto spec = sim::model_spec(loaded.model);
    if (!spec.ok()) {
      std::fprintf(stderr, "twinps serve: %s: %s\n", model_path.c_str(), describe(spec.status()).c_str());
      return kExitBadInput;
    }
    synthetic_model = std::make_unique<synthetic::Workload>(std::move(*spec), /*timing_only=*/false);
    synthetic_model->set_compute_repeats(compute_factor);
    synthetic_model->register_functions(registry);
  }
  // Declared before the node, which records into it: destroyed (and closed) after it.
  std::unique_ptr<ChromeTraceWriter> trace;
  std::unique_ptr<net::LockedTraceSink> locked_trace;
  if (!trace_path.empty()) {
    trace = std::make_unique<ChromeTraceWriter>(trace_path);
    if (!trace->ok()) {
      std::fprintf(stderr, "twinps serve: %s\n", trace->error().c_str());
      return kExitBadInput;
    }
    locked_trace = std::make_unique<net::LockedTraceSink>(*trace);
  }
  net::RealNodeOptions o;
  o.task = task;
  o.listen_address = *listen;
  o.trace = locked_trace.get();
  o.resolve = resolver(tfc->cluster);
  o.registry = &registry;
  o.worker.ps_call_timeout = from_seconds(ps_call_timeout);
  o.transport = transport;
  o.transport.max_message_bytes = max_message_mb << 20;
  serving.apply(&o.transport);
  o.transport.security = *security;
  TransportCut cut;
  std::unique_ptr<CutFileWatcher> cut_watcher;
  if (!cut_file.empty()) {
    cut_watcher = std::make_unique<CutFileWatcher>(cut_file, cut);
    cut_watcher->reload();
    o.wrap_transport = [&cut, detection = from_seconds(cut_detection)](Executor& ex, Transport& inner) {
      return cut.wrap(ex, inner, detection);
    };
  }
  FixedStepDelay delay(from_seconds(step_delay));
  if (step_delay > 0) o.cost = &delay;
  auto node = net::RealNode::create(std::move(o));
  if (!node.ok()) {
    spdlog::error("cannot serve {} on {}: {}", task.short_name(), address->c_str(), describe(node.status()));
    return kExitFailed;
  }
  if (trace) stamp_trace(*trace, task, (*node)->executor());
  auto metrics = TaskMetrics::start(metrics_flags, serving.bind, task, *security);
  if (!metrics.ok()) {
    spdlog::error("{}: {}", task.short_name(), describe(metrics.status()));
    return metrics.status().code() == StatusCode::kInvalidArgument ? kExitBadInput : kExitFailed;
  }
  // Handlers before the readiness line: a launcher may send SIGTERM the
  // moment it reads "serving on", and that must be a graceful stop, not the
  // default action (ObservabilityTest.LogsAreLeveledAndCanBeJson met it).
  std::signal(SIGTERM, on_signal);
  std::signal(SIGINT, on_signal);
  // The readiness line: with --port 0 it is where a launcher learns the
  // port the OS picked (tools/serving_line.h parses it; keep the two in step).
  const std::string bound = ":" + std::to_string((*node)->port());
  spdlog::info("{} serving on {} (listening on {}, data plane port {}, incarnation {:016x})", task.short_name(),
               with_port(*address, bound), with_port(*listen, bound), (*node)->transport().data_port(),
               (*node)->incarnation());
  // The executor runs on this thread; a periodic timer lets it notice signals.
  auto& ex = (*node)->executor();
  std::function<void()> tick;
  tick = [&] {
    if (cut_watcher && cut_watcher->reload()) {
      std::string names;
      for (const auto& t : cut.tasks()) names += " " + t.short_name();
      spdlog::info("{} cut from:{}", task.short_name(), names.empty() ? " nobody" : names);
    }
    ex.post_after(100 * kMillisecond, [&] { tick(); });
  };
  tick();
  if (*metrics) {
    (*metrics)->watch(node->get());
    (*metrics)->attach(ex);
    spdlog::info("{} metrics on {}", task.short_name(), (*metrics)->url());
  }
  ex.run_until([] { return g_stop != 0; });
  spdlog::info("{} stopping", task.short_name());
  return kExitOk;
}

}  // namespace twinps::cli
