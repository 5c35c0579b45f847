#pragma once
// ClusterControl: the task half of the fault actuators (docs/design.md,
// "Faults are actuators"); FaultyTransport (faulty_transport.h) is the
// message half. A fault schedule (fault_schedule.h) drives it, whichever
// cluster is underneath:
//   * the simulator implements it on simulated nodes (sim/simulation.cc):
//     a kill destroys a node's state, a pause stops its executor, a partition
//     loses messages in the network model, a slow task computes slower;
//   * the process launcher implements it on real processes
//     (tools/process_cluster.h): SIGKILL and a restart on the same address,
//     SIGSTOP/SIGCONT, a duty cycle of SIGSTOP/SIGCONT, a transport-level cut.
// So a scenario's faults mean the same thing in both modes.
//
// Every call acts at once, on the caller's executor; an actuator that cannot
// act (a process that does not restart) says why in its Status.
#include <vector>

#include "core/cluster/task_id.h"
#include "core/runtime/status.h"

namespace twinps {

class ClusterControl {
 public:
  using PartitionId = int;

  virtual ~ClusterControl() = default;

  // The task dies: its memory and connections are gone.
  virtual Status kill(const TaskId& task) = 0;
  // A killed task starts again (a new incarnation, empty memory) on the same
  // address; a no-op for a task that is up.
  virtual Status restart(const TaskId& task) = 0;
  // The task hangs, alive but running nothing (SIGSTOP): it keeps its memory
  // and connections, messages to it wait. resume() lets it run on.
  virtual Status pause(const TaskId& task) = 0;
  virtual Status resume(const TaskId& task) = 0;
  // Messages between a task in `a` and one in `b` (empty: every task not in
  // `a`) are lost until heal() with the id it returns.
  virtual StatusOr<PartitionId> partition(const std::vector<TaskId>& a, const std::vector<TaskId>& b) = 0;
  virtual Status heal(PartitionId id) = 0;
  // The task runs `factor` (> 1) times slower until unslow() with the same
  // factor; slowdowns of one task multiply.
  virtual Status slow(const TaskId& task, double factor) = 0;
  virtual Status unslow(const TaskId& task, double factor) = 0;
};

}  // namespace twinps
