#pragma once
// A fault schedule: what ClusterControl (cluster_control.h) does to which
// tasks, and when. The simulator runs it on simulated time, `twinps sim
// --real` on wall-clock time (an Asio executor): the same schedule, the same
// actuator calls, in the same order.
//
// Faults that belong to one mode's model only (a slower host link, a hot
// variable) are not here: the simulator schedules those itself.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/cluster/task_id.h"
#include "core/faults/cluster_control.h"
#include "core/runtime/executor.h"
#include "core/runtime/time.h"

namespace twinps {

struct ClusterFault {
  enum class Kind {
    kKill,       // kill `task`; at the end, restart it
    kPause,      // pause `task` (hung, not dead); at the end, resume it
    kPartition,  // cut `side_a` from `side_b`; at the end, heal
    kSlow,       // `task` runs `factor` times slower; at the end, its speed returns
  };
  Kind kind = Kind::kKill;
  Time at = 0;
  std::optional<Time> end;  // absent: for good
  TaskId task;
  std::vector<TaskId> side_a, side_b;  // kPartition (side_b empty: every other task)
  double factor = 1;                   // kSlow

  // As the fault log shows it: "kill worker:0 until 3.000 s", times counted
  // from `origin`.
  std::string describe(Time origin = 0) const;
};

// Called when a fault starts (with its description) and whenever an actuator
// fails (with the reason): the run's fault log.
using FaultLog = std::function<void(Time at, const std::string& what)>;

// Posts the fault's start at `fault.at` and its end (if any) on `executor`,
// acting on `control`. Both must outlive the posted events. Descriptions
// count time from `origin` (where a wall-clock run's scenario time 0 is).
void schedule_cluster_fault(const ClusterFault& fault, Executor& executor, ClusterControl& control, FaultLog log,
                            Time origin = 0);

// "1.250 s", as fault logs print times.
std::string fault_time_string(Time t);

}  // namespace twinps
