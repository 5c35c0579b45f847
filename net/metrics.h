#pragma once
// A task's Prometheus endpoint: GET /metrics over HTTP (or HTTPS with the
// task's TLS certificate), on a thread of its own, in Prometheus's text
// format (prometheus-cpp's data model and TextSerializer). What it serves is a snapshot the task publishes from its own
// executor (MetricsServer::publish): the figures come from the plain stats
// structs core and net keep (CoordinatorStats, ParameterStoreStats, ...),
// read on the thread that owns them, so nothing in core knows about
// Prometheus and nothing is read across threads. Names follow Prometheus's
// conventions: a twinps_ prefix, base units (seconds, bytes), counters
// ending in _total, metadata in a _info pseudo-metric.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <prometheus/metric_family.h>

#include "core/runtime/status.h"
#include "net/security.h"

namespace twinps::net {

// Builds one snapshot: metric families in the order they are added.
class MetricsSnapshot {
 public:
  using Labels = std::map<std::string, std::string>;
  void counter(const std::string& name, const std::string& help, double value, const Labels& labels = {});
  void gauge(const std::string& name, const std::string& help, double value, const Labels& labels = {});
  // `bounds` are the buckets' upper bounds (ascending); `counts[i]` the
  // observations in bucket i (not cumulative), with one more for +Inf.
  void histogram(const std::string& name, const std::string& help, const std::vector<double>& bounds,
                 const std::vector<std::uint64_t>& counts, double sum, const Labels& labels = {});
  std::vector<prometheus::MetricFamily> take() { return std::move(families_); }

 private:
  prometheus::MetricFamily& family(const std::string& name, const std::string& help, prometheus::MetricType type);
  std::vector<prometheus::MetricFamily> families_;
};

// GET /metrics on its own thread (Asio), HTTP or, with the task's TLS
// material, HTTPS (mutual with mutual_tls). Anything else gets 404; a client
// has 10 s and 8 KiB for its request.
class MetricsServer {
 public:
  // Listens on host:port (a wildcard host: every interface; port 0: the OS picks).
  static StatusOr<std::unique_ptr<MetricsServer>> start(const std::string& host, int port,
                                                        const SecurityOptions& security);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  int port() const;
  bool https() const;
  // Replaces what /metrics serves (thread-safe).
  void publish(std::vector<prometheus::MetricFamily> families);
  // Called on the server's thread before each scrape is answered, to publish
  // fresh figures (it may wait a little for the task's executor); nullptr:
  // serve the last published snapshot.
  void set_refresh(std::function<void()> refresh);

  struct Impl;

 private:
  explicit MetricsServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace twinps::net
