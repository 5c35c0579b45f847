#include "tools/task_metrics.h"

#include <csignal>
#include <filesystem>
#include <future>
#include <thread>

#include "core/runtime/status.h"
#include "net/log.h"

namespace twinps::cli {

void MetricsFlags::add_to(po::options_description& options, bool coordinator) {
  options.add_options()
      ("metrics-port", po::value(&port)->default_value(-1),
       "serve Prometheus metrics at http(s)://HOST:PORT/metrics on the --bind address (0: the OS picks; -1: none)")
      ("log-level", po::value(&level), "trace, debug, info, warn, error or off (default: $TWINPS_LOG_LEVEL or info)");
  if (coordinator)
    options.add_options()("bind", po::value(&bind), "listen for /metrics on this local address (default: every interface)")("metrics-linger", po::value(&linger)->default_value(0),
                          "keep serving the final metrics this many seconds after training (SIGTERM ends it)");
}

Status MetricsFlags::apply_log_level() const {
  if (level.empty() || log::set_level(level)) return absl::OkStatus();
  return absl::InvalidArgumentError("--log-level must be trace, debug, info, warn, error or off, not '" + level + "'");
}

StatusOr<std::unique_ptr<TaskMetrics>> TaskMetrics::start(const MetricsFlags& flags, const std::string& host,
                                                          const TaskId& task, const net::SecurityOptions& security) {
  if (flags.port < 0) return std::unique_ptr<TaskMetrics>();
  if (flags.port > 65535)
    return absl::InvalidArgumentError("--metrics-port must be from 0 to 65535, not " + std::to_string(flags.port));
  if (flags.linger < 0) return absl::InvalidArgumentError("--metrics-linger must not be negative");
  auto server = net::MetricsServer::start(host, flags.port, security);
  if (!server.ok()) return server.status();
  std::unique_ptr<TaskMetrics> m(new TaskMetrics());
  m->server_ = std::move(*server);
  m->host_ = host.empty() ? "0.0.0.0" : host;
  m->task_ = task;
  m->publish();
  return m;
}

TaskMetrics::~TaskMetrics() {
  if (server_) server_->set_refresh(nullptr);
  *alive_ = false;
}

std::string TaskMetrics::url() const {
  const std::string host = host_.find(':') != std::string::npos ? "[" + host_ + "]" : host_;
  return std::string(server_->https() ? "https" : "http") + "://" + host + ":" + std::to_string(port()) + "/metrics";
}

void TaskMetrics::on_epoch(const training::EpochResult& e, std::int64_t start_iterations) {
  training_.epochs = e.epoch + 1;
  training_.accuracy = e.train.accuracy.value_or(0);
  training_.steps = e.iterations - start_iterations;
}

void TaskMetrics::on_finished(const training::TrainResult& r, std::int64_t batch_size, const Status& outcome) {
  batch_size_ = batch_size;
  if (outcome.ok()) {
    training_.steps = r.steps_trained;
    training_.examples = r.steps_trained * batch_size;
    const double seconds = to_seconds(r.training_finished - r.training_started);
    if (seconds > 0) {
      training_.steps_per_second = static_cast<double>(r.steps_trained) / seconds;
      training_.examples_per_second = static_cast<double>(training_.examples) / seconds;
    }
  } else if (auto failed = failed_task(outcome); failed && failed->job == Job::kPs) {
    training_.ps_failed = true;
  }
}

void TaskMetrics::attach(net::AsioExecutor& executor) {
  // A scrape asks the executor for fresh figures and waits up to a second
  // (a busy or stopped executor: the last snapshot, at most a second old).
  server_->set_refresh([this, &executor, alive = std::weak_ptr<bool>(alive_)] {
    auto done = std::make_shared<std::promise<void>>();
    auto published = done->get_future();
    executor.post([this, alive, done] {
      if (auto a = alive.lock(); a && *a) publish();
      done->set_value();
    });
    published.wait_for(std::chrono::seconds(1));
  });
  publish_every(executor, kSecond);
}

void TaskMetrics::publish_every(net::AsioExecutor& executor, Duration period) {
  executor.post_after(period, [this, &executor, period, alive = std::weak_ptr<bool>(alive_)] {
    auto a = alive.lock();
    if (!a || !*a) return;
    publish();
    publish_every(executor, period);
  });
}

void TaskMetrics::freeze() {
  server_->set_refresh(nullptr);  // waits for a scrape in progress
  publish();
  *alive_ = false;
  node_ = nullptr;
  coordinator_ = nullptr;
}

void TaskMetrics::publish() {
  net::MetricsSnapshot m;
  m.gauge("twinps_task_info", "The task this endpoint belongs to (always 1).", 1,
          {{"task", task_.short_name()}, {"role", std::string(job_name(task_.job))}});
  if (coordinator_) {
    const CoordinatorStats& s = coordinator_->stats();
    m.counter("twinps_closures_scheduled_total", "Closures scheduled by the coordinator.", s.scheduled);
    m.counter("twinps_closures_completed_total", "Closures that completed.", s.completed);
    m.counter("twinps_closures_failed_total", "Closures that failed with an application error.", s.failed);
    m.counter("twinps_closures_retried_total", "Closures put back after a worker, ps or timeout failure.", s.retried);
    m.counter("twinps_closures_cancelled_total", "Closures cancelled (queued or in flight) when an error was raised.",
              s.cancelled);
    m.counter("twinps_worker_failures_total", "Workers found failed (calls, deadlines, heartbeats).",
              s.worker_failures);
    m.counter("twinps_worker_recoveries_total", "Failed workers that rejoined.", s.worker_recoveries);
    m.counter("twinps_ps_failures_total",
              "Parameter-server failures seen by the coordinator (retried transient ones and the one a run ended on).",
              static_cast<double>(s.ps_failures_retried + (training_.ps_failed ? 1 : 0)));
    m.counter("twinps_errors_raised_total", "Errors raised to the training program.", s.errors_raised);
    m.counter("twinps_training_steps_total", "Training steps completed in this run.",
              static_cast<double>(training_.steps));
    m.counter("twinps_training_examples_total", "Examples trained on in this run (steps x batch size).",
              static_cast<double>(training_.examples ? training_.examples : training_.steps * batch_size_));
    m.gauge("twinps_training_steps_per_second", "Steps per second over the run (set when it finishes).",
            training_.steps_per_second);
    m.gauge("twinps_training_examples_per_second", "Examples per second over the run (set when it finishes).",
            training_.examples_per_second);
    m.gauge("twinps_training_epochs_completed", "Epochs completed in this run.", training_.epochs);
    m.gauge("twinps_training_accuracy", "Accuracy at the end of the last epoch.", training_.accuracy);
  }
  if (node_) {
    const auto t = node_->transport().stats();
    m.counter("twinps_grpc_calls_total", "Calls this task made over gRPC.", t.grpc_calls);
    m.counter("twinps_data_plane_calls_total", "Calls this task made over the data plane.", t.data_plane_calls);
    m.counter("twinps_data_plane_received_bytes_total", "Bytes received on data-plane connections.",
              t.data_bytes_received);
    m.counter("twinps_data_plane_sent_bytes_total", "Bytes sent on data-plane connections.", t.data_bytes_sent);
    m.counter("twinps_data_plane_connections_accepted_total", "Data-plane connections accepted.",
              t.data_connections_accepted);
    m.counter("twinps_data_plane_same_host_connections_accepted_total",
              "Data-plane connections accepted over the Unix socket, from tasks on this host.",
              t.data_same_host_connections_accepted);
    m.counter("twinps_data_plane_shared_memory_sent_bytes_total",
              "Tensor bytes sent to tasks on this host through shared memory instead of a socket.",
              t.data_ring_bytes_sent);
    m.counter("twinps_unauthenticated_refused_total",
              "Calls and data-plane connections refused for want of the cluster token.", t.unauthenticated_refused);
    if (const ParameterServerNode* ps = node_->ps()) {
      const ParameterStoreStats& p = ps->store().stats();
      m.counter("twinps_ps_pull_requests_total", "Pull requests served.", p.pull_requests);
      m.counter("twinps_ps_push_requests_total", "Push requests accepted and applied.", p.push_requests);
      m.counter("twinps_ps_received_bytes_total", "Bytes of values and row ids in applied pushes (ps in).",
                p.bytes_pushed);
      m.counter("twinps_ps_sent_bytes_total", "Bytes of values and counters returned by pulls (ps out).",
                p.bytes_pulled);
      m.counter("twinps_ps_duplicate_pushes_total", "Pushes acknowledged as duplicates, not applied.",
                p.duplicates_dropped);
      m.counter("twinps_ps_fenced_pushes_total", "Pushes refused for a stale fence.", p.fenced_pushes);
      m.counter("twinps_ps_rejected_requests_total", "Requests refused as invalid.", p.rejected_requests);
      m.counter("twinps_ps_updates_computed_on_arrival_total",
                "Dense gradients applied from the next value computed while they arrived.",
                p.updates_computed_on_arrival);
      m.counter("twinps_ps_arrivals_overtaken_total",
                "Updates computed on arrival and given up: another push moved the shard first.",
                p.arrivals_overtaken);
      {
        // Staleness: parameter versions behind, per applied gradient (core/ps/staleness.h).
        const StalenessHistogram& st = p.staleness;
        std::vector<double> bounds(StalenessHistogram::kBounds.begin(), StalenessHistogram::kBounds.end());
        m.histogram("twinps_ps_gradient_staleness", "Versions of its shard applied between the read a gradient was "
                    "computed from and the gradient (per applied gradient).", bounds,
                    std::vector<std::uint64_t>(st.counts.begin(), st.counts.end()), static_cast<double>(st.sum));
        m.counter("twinps_ps_unversioned_gradients_total", "Gradients applied without a read version (not measured).",
                  static_cast<double>(st.unmeasured));
      }
      const ApplyLatency& a = ps->apply_latency();
      std::vector<double> bounds;
      for (Duration b : ApplyLatency::kBounds) bounds.push_back(to_seconds(b));
      m.histogram("twinps_ps_apply_latency_seconds", "Time to apply an accepted push.", bounds,
                  std::vector<std::uint64_t>(a.counts.begin(), a.counts.end()), to_seconds(a.sum));
    }
    if (const WorkerNode* w = node_->worker())
      m.counter("twinps_worker_closures_run_total", "Closures this worker ran.", w->closures_run());
  }
  server_->publish(m.take());
}

namespace {
volatile std::sig_atomic_t g_linger_stop = 0;
void on_linger_signal(int) { g_linger_stop = 1; }
}  // namespace

void linger_for_scrapes(const TaskMetrics& metrics, double seconds) {
  if (seconds <= 0) return;
  spdlog::info("final metrics served at {} for {} s (SIGTERM ends it)", metrics.url(), seconds);
  auto old_term = std::signal(SIGTERM, on_linger_signal);
  auto old_int = std::signal(SIGINT, on_linger_signal);
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!g_linger_stop && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::signal(SIGTERM, old_term);
  std::signal(SIGINT, old_int);
}

}  // namespace twinps::cli
