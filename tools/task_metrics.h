#pragma once
// The Prometheus endpoint of a real task (`--metrics-port` on serve and
// train): which figures it exports and where they come from. Everything is
// read on the task's executor thread from the stats its parts already keep
// (the coordinator's CoordinatorStats, the ps's ParameterStoreStats and
// ApplyLatency, the transport's counters) and published as a snapshot
// (net/metrics.h) every second and once more at the end of a run, so a
// scrape after training sees exactly the figures the run's summary prints.
#include <memory>
#include <optional>
#include <string>

#include "core/coordinator/cluster_coordinator.h"
#include "core/training/trainer.h"
#include "net/metrics.h"
#include "net/real_node.h"
#include "tools/cli.h"

namespace twinps::cli {

struct MetricsFlags {
  int port = -1;       // --metrics-port: -1 = no endpoint, 0 = the OS picks
  double linger = 0;   // --metrics-linger (train): seconds the final figures stay up
  std::string bind;    // --bind (train; serve shares its own --bind): where the endpoint listens
  std::string level;   // --log-level

  void add_to(po::options_description& options, bool coordinator);
  // Applies --log-level; INVALID_ARGUMENT naming the flag if it names no level.
  Status apply_log_level() const;
};

class TaskMetrics {
 public:
  // The endpoint on `host` (--bind; "" = every interface); nullptr without --metrics-port.
  static StatusOr<std::unique_ptr<TaskMetrics>> start(const MetricsFlags& flags, const std::string& host,
                                                      const TaskId& task, const net::SecurityOptions& security);
  int port() const { return server_->port(); }
  std::string url() const;

  // Sources; each must outlive this object (or be unwatched with nullptr).
  void watch(net::RealNode* node) { node_ = node; }
  void watch(const ClusterCoordinator* coordinator) { coordinator_ = coordinator; }
  // The coordinator's training figures.
  // (accuracy: 0 for a model that does not measure it)
  void on_epoch(const training::EpochResult& e, std::int64_t start_iterations);
  void on_finished(const training::TrainResult& r, std::int64_t batch_size, const Status& outcome);

  // Builds the snapshot now (on the executor's thread, or once it stopped).
  void publish();
  // Reads the sources on `executor`: at each scrape, and every second (the
  // snapshot served when the executor is busy), until this goes or freeze().
  void attach(net::AsioExecutor& executor);
  // Publishes the final figures and stops reading the sources (which may then go).
  void freeze();

  ~TaskMetrics();

 private:
  TaskMetrics() = default;
  void publish_every(net::AsioExecutor& executor, Duration period);
  std::unique_ptr<net::MetricsServer> server_;
  std::string host_;
  TaskId task_;
  net::RealNode* node_ = nullptr;
  const ClusterCoordinator* coordinator_ = nullptr;
  struct Training {
    std::int64_t steps = 0;
    int epochs = 0;
    double accuracy = 0;
    double steps_per_second = 0, examples_per_second = 0;
    std::int64_t examples = 0;
    bool ps_failed = false;  // the run ended on a ps failure
  } training_;
  std::int64_t batch_size_ = 0;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

// Keeps a finished task's endpoint up for `seconds` (or until SIGTERM /
// SIGINT), so a scraper sees the final figures.
void linger_for_scrapes(const TaskMetrics& metrics, double seconds);

}  // namespace twinps::cli
