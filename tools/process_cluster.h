#pragma once
// A real cluster for calibration and validation: `twinps serve` processes on
// loopback ports (this binary started again in another role, as TensorFlow
// runs one binary for every task), each with its output under a directory,
// all stopped when the handle goes away. The caller's own process is the
// chief (it only calls out, so nothing listens on the chief's address).
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/cluster/task_id.h"
#include "core/runtime/status.h"
#include "tools/subprocess.h"

namespace twinps::cli {

class ProcessCluster {
 public:
  // `ps_args` / `worker_args` are added to those servers' command lines (e.g.
  // --model FILE for workers). Returns once every task says it is serving;
  // UNAVAILABLE (with the task's stderr) if one does not.
  // `task_args` adds to one task's only (a straggling worker's fault injection).
  static StatusOr<std::unique_ptr<ProcessCluster>> start(int workers, int ps, const std::vector<std::string>& ps_args,
                                                         const std::vector<std::string>& worker_args,
                                                         const std::string& log_dir,
                                                         const std::map<TaskId, std::vector<std::string>>& task_args = {});
  ~ProcessCluster();
  ProcessCluster(const ProcessCluster&) = delete;
  ProcessCluster& operator=(const ProcessCluster&) = delete;

  // Every task's "127.0.0.1:port", the chief's included.
  const std::map<TaskId, std::string>& addresses() const { return addresses_; }
  // A server's process id (for reading its CPU time); -1 if it is not running.
  int pid(const TaskId& t) const;
  // OK while every server runs; otherwise which one exited, and its stderr.
  Status check_alive();

 private:
  ProcessCluster() = default;
  std::map<TaskId, std::string> addresses_;
  std::map<TaskId, Child> servers_;
};

}  // namespace twinps::cli
