#pragma once
// Processes that keep every core of this machine busy at the lowest priority
// (SCHED_IDLE): any other thread that wakes takes a core from one of them at
// once, so no core is ever idle. `twinps calibrate` measures the control
// plane with and without them: on a virtual machine a thread woken beside an
// idle core first wakes that core's halted virtual CPU through the
// hypervisor, which costs the woken and the waking thread CPU time a busy
// core does not (MessageCosts.control_on_busy_host_us in sim/scenario.proto).
// A spinner's own CPU is no task's: measurements read their tasks' CPU.
#include <string>
#include <vector>

#include "core/runtime/status.h"
#include "tools/subprocess.h"

namespace twinps::cli {

class IdleSpinners {
 public:
  // Starts one spinner per online core (`twinps calibrate --idle-spinner`),
  // each stopping by itself after `seconds` if this process is gone; waits
  // until each says it spins at idle priority. Their output goes under `dir`.
  static StatusOr<IdleSpinners> start(double seconds, const std::string& dir);
  // The spinners stop when the handle goes away.

 private:
  std::vector<Child> spinners_;
};

// The spinner's side: SCHED_IDLE, a line on stdout, then a busy loop for
// `seconds` of wall time. Returns the exit code (1 if the policy is refused).
int spin_at_idle_priority(double seconds);

}  // namespace twinps::cli
