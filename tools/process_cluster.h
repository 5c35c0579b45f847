#pragma once
// A real cluster of `twinps serve` processes on this machine (this binary
// started again in another role, as TensorFlow runs one binary for every
// task), each with its output under a directory, all stopped when the handle
// goes away. The caller's own process is the chief: it only calls out, so
// nothing listens on the chief's address.
//
// Every server binds port 0 and reports the port the OS gave it on its
// readiness line ("serving on 127.0.0.1:PORT", `twinps serve --port 0`): no
// port is guessed. Parameter servers start first; workers, which call them,
// are given their addresses. An address a task is not told yet (a worker's,
// in a ps's TF_CONFIG) is a placeholder the task never dials: ps call nobody,
// workers only ps.
//
// It is also ClusterControl (core/faults/cluster_control.h) on the processes,
// the actuator `twinps sim --real` drives a scenario's faults with:
//   kill       SIGKILL;
//   restart    the same command on the same port (a new incarnation);
//   pause      SIGSTOP (hung: alive, connections open, answering nothing);
//   resume     SIGCONT;
//   slow       a duty cycle of SIGCONT and SIGSTOP on the attached executor:
//              in every 100 ms the task runs 100/factor ms;
//   partition  a transport-level cut (tools/transport_cut.h, which says why).
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/cluster/task_id.h"
#include "core/faults/cluster_control.h"
#include "core/runtime/executor.h"
#include "core/runtime/status.h"
#include "tools/subprocess.h"
#include "tools/transport_cut.h"

namespace twinps::cli {

struct ProcessClusterOptions {
  int workers = 1;
  int ps = 1;
  // Added to those servers' command lines (e.g. --model FILE for workers).
  std::vector<std::string> ps_args, worker_args;
  // Added to one task's only (a straggling worker's fault injection).
  std::map<TaskId, std::vector<std::string>> task_args;
  std::string log_dir;
  // Set: the servers take partitions (--cut-file under log_dir), a lost call
  // failing after this long.
  std::optional<Duration> cut_detection;
};

class ProcessCluster final : public ClusterControl {
 public:
  // Returns once every task says it is serving; UNAVAILABLE (with the task's
  // stderr) if one does not.
  static StatusOr<std::unique_ptr<ProcessCluster>> start(ProcessClusterOptions options);
  static StatusOr<std::unique_ptr<ProcessCluster>> start(int workers, int ps, const std::vector<std::string>& ps_args,
                                                         const std::vector<std::string>& worker_args,
                                                         const std::string& log_dir,
                                                         const std::map<TaskId, std::vector<std::string>>& task_args = {});
  ~ProcessCluster() override;
  ProcessCluster(const ProcessCluster&) = delete;
  ProcessCluster& operator=(const ProcessCluster&) = delete;

  // Every task's "127.0.0.1:port", the chief's (a placeholder) included.
  const std::map<TaskId, std::string>& addresses() const { return addresses_; }
  // A server's process id (for reading its CPU time); -1 if it is not running.
  int pid(const TaskId& t) const;
  // OK while every server that should run does; otherwise which one exited,
  // and its stderr.
  Status check_alive();

  // The executor the actuators' timers run on (a slow task's duty cycle, a
  // restarted task's readiness check): the coordinator's. Required before
  // slow() or restart().
  void attach(Executor& executor) { executor_ = &executor; }
  // The chief's own cut (this process): its transport must be wrapped with it.
  const TransportCut& chief_cut() const { return chief_cut_; }
  // What went wrong acting on the processes (a restart that never served):
  // a run that had any must not pass.
  const std::vector<std::string>& problems() const { return problems_; }

  // ClusterControl.
  Status kill(const TaskId& task) override;
  Status restart(const TaskId& task) override;
  Status pause(const TaskId& task) override;
  Status resume(const TaskId& task) override;
  StatusOr<PartitionId> partition(const std::vector<TaskId>& a, const std::vector<TaskId>& b) override;
  Status heal(PartitionId id) override;
  Status slow(const TaskId& task, double factor) override;
  Status unslow(const TaskId& task, double factor) override;

 private:
  struct Server {
    Child child;
    std::vector<std::string> args;  // the command, without --port
    std::string tf_config;
    int starts = 0;
    bool up = false;
    bool paused = false;
    double slow = 1;            // product of the slow() factors in force
    std::uint64_t cycle = 0;    // the duty cycle's generation (a new one stops the old)
    bool cycle_stopped = false; // the duty cycle has it stopped right now
    // Its port while it is down (killed, not yet serving again): held so that
    // no other socket (an outgoing connection's, say) takes it meanwhile.
    std::optional<ReservedPort> held_port;
  };

  ProcessCluster() = default;
  Server* server(const TaskId& t);
  std::string cut_file(const TaskId& t) const;
  // Starts `t` on `port` (0: any) and records it; does not wait.
  Status launch(const TaskId& t, int port);
  // Waits for `t`'s readiness line and records its address.
  Status await_ready(const TaskId& t, std::chrono::milliseconds timeout);
  void watch_restart(const TaskId& t, int polls_left);
  void duty_cycle(const TaskId& t, std::uint64_t generation);
  Status apply_cuts();

  ProcessClusterOptions options_;
  std::map<TaskId, std::string> addresses_;
  std::map<TaskId, Server> servers_;
  Executor* executor_ = nullptr;
  TransportCut chief_cut_;
  std::map<PartitionId, std::pair<std::vector<TaskId>, std::vector<TaskId>>> partitions_;
  PartitionId next_partition_ = 1;
  std::vector<std::string> problems_;
};

}  // namespace twinps::cli
