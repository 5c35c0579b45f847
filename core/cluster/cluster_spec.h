#pragma once
// The cluster: which tasks exist and where they listen. It comes from the
// TF_CONFIG environment variable (TensorFlow's JSON format), from flags, or
// from make_cluster() for in-process and simulated clusters.
//
// TF_CONFIG is user input, so parse_tf_config() rejects anything malformed or
// inconsistent with INVALID_ARGUMENT and a message that names the source and
// the field ("TF_CONFIG: cluster.ps[1] ..."); it never fills in a default.
#include <array>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/cluster/task_id.h"
#include "core/runtime/status.h"

namespace twinps {

class ClusterSpec {
 public:
  ClusterSpec() = default;

  // Replaces the addresses of `job`; task i listens on addresses[i]. Not
  // validated here: parse_tf_config() validates what users write.
  void set_job(Job job, std::vector<std::string> addresses);

  int num_tasks(Job job) const { return static_cast<int>(jobs_[index(job)].size()); }
  int num_workers() const { return num_tasks(Job::kWorker); }
  int num_ps() const { return num_tasks(Job::kPs); }
  bool has_chief() const { return num_tasks(Job::kChief) > 0; }
  bool has_task(const TaskId& task) const;
  // True when no job has any task.
  bool empty() const;

  // The tasks of `job` in index order ({} when the job is absent).
  std::vector<TaskId> tasks(Job job) const;
  const std::vector<std::string>& addresses(Job job) const { return jobs_[index(job)]; }
  // "host:port" of `task`; INVALID_ARGUMENT when the cluster has no such task.
  StatusOr<std::string> address(const TaskId& task) const;

  // {"chief": [...], "worker": [...], "ps": [...], "evaluator": [...]}, jobs in
  // that order, jobs without tasks left out: the "cluster" part of TF_CONFIG.
  std::string to_json() const;

  bool operator==(const ClusterSpec&) const = default;

 private:
  static std::size_t index(Job job) { return static_cast<std::size_t>(job); }
  std::array<std::vector<std::string>, std::size(kAllJobs)> jobs_;
};

// What TF_CONFIG tells one process: the cluster and which task it is. `task`
// is empty when TF_CONFIG has no "task" part. An evaluator may leave out
// "cluster" (it does not talk to the training cluster), so `cluster` can be
// empty for one.
struct TfConfig {
  ClusterSpec cluster;
  std::optional<TaskId> task;

  // The TF_CONFIG JSON for this configuration; parse_tf_config() reads it back.
  std::string to_json() const;
  bool operator==(const TfConfig&) const = default;
};

// Parses TensorFlow's TF_CONFIG format:
//   {"cluster": {"worker": ["h1:2222", ...], "ps": [...], "chief": [...]},
//    "task": {"type": "worker", "index": 1}}
// plus the optional string keys "rpc_layer" (must be "grpc") and "environment"
// (set by some launchers; not used). `source` prefixes every error message
// (e.g. "TF_CONFIG", or a file name). Checks: JSON syntax and types, known
// keys and job names, "host:port" addresses, no address used twice, at most
// one chief and one evaluator, and a task that exists in the cluster.
// Training-specific rules are in validate_for_training().
StatusOr<TfConfig> parse_tf_config(std::string_view json, std::string_view source = "TF_CONFIG");

// A cluster parameter-server training can run on: at least one worker, at
// least one ps, at most one chief.
Status validate_for_training(const ClusterSpec& cluster, std::string_view source = "TF_CONFIG");

// OK when `address` is "host:port" with a port in 1..65535 (IPv6 hosts in
// brackets: "[::1]:2222"); otherwise INVALID_ARGUMENT
// "{source}: {field} "{address}" {what is wrong}".
Status check_host_port(std::string_view address, std::string_view field, std::string_view source);

// An in-process cluster: optional chief, then `workers` workers and `ps`
// parameter servers, each at address(task). Negative counts mean none.
ClusterSpec make_cluster(int workers, int ps, bool chief, const std::function<std::string(TaskId)>& address);

}  // namespace twinps
