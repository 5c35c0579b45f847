#pragma once
// Real clusters for calibration and validation: `twinps serve` processes on
// loopback ports (this binary started again in another role, as TensorFlow
// runs one binary for every task), each with its output in a log file, and
// stopped — SIGTERM, then SIGKILL if it lingers — when the handle goes away.
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/cluster/task_id.h"
#include "core/runtime/status.h"

namespace twinps::cli {

// This executable, to start it again in another role.
std::string self_binary();

// A TCP port on 127.0.0.1 that was free a moment ago, never the same twice in a process.
StatusOr<int> free_loopback_port();

class ServerProcess {
 public:
  // Starts `args` (args[0] is the program) with `env` ("K=V") added; stdout
  // and stderr go to `log`.
  static StatusOr<std::unique_ptr<ServerProcess>> start(const std::vector<std::string>& args,
                                                        const std::vector<std::string>& env, const std::string& log);
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // Waits until the log contains `text`; false on timeout or if the process exited.
  bool wait_for_log(const std::string& text, std::chrono::milliseconds timeout);
  std::string log_text() const;
  int pid() const { return pid_; }
  void stop();

 private:
  ServerProcess() = default;
  bool exited();
  int pid_ = -1;
  std::string log_;
};

// A cluster of `twinps serve` processes: every ps and worker on its own
// loopback port, TF_CONFIG naming them all (and a chief address, for the
// caller's coordinator, which only calls out).
class ProcessCluster {
 public:
  // `serve_args` are added to every server's command line (e.g. --model FILE).
  // Logs go under `log_dir`. Returns once every task says it is serving.
  static StatusOr<std::unique_ptr<ProcessCluster>> start(int workers, int ps, const std::vector<std::string>& serve_args,
                                                         const std::string& log_dir);
  ~ProcessCluster();

  // Address of a task ("127.0.0.1:port").
  std::string address(const TaskId& t) const;
  const std::map<TaskId, std::string>& addresses() const { return addresses_; }

 private:
  ProcessCluster() = default;
  std::map<TaskId, std::string> addresses_;
  std::vector<std::unique_ptr<ServerProcess>> servers_;
};

// A fresh empty directory under the system's temp dir.
StatusOr<std::string> make_temp_dir(const std::string& tag);

}  // namespace twinps::cli
