#pragma once
// Processes that keep every core of this machine busy the way a cluster's
// own tasks do: one per core, at normal priority, each computing the
// worker's gradient kernel (synthetic::compute_gradient) in a loop.
// `twinps calibrate` measures the fixed prices of a call and of a control
// step beside them: on a virtual machine a thread woken beside an idle core
// first wakes that core's halted virtual CPU through the hypervisor, which
// costs the woken and the waking thread CPU time a busy core does not
// (MessageCosts.control_on_busy_host_us in sim/scenario.proto).
//
// Why not spinners of the lowest priority (SCHED_IDLE), as until
// 2026-12-02: a host's tasks do not run at that priority, and the price
// beside such spinners was not a busy host's. Measured here with `twinps
// bench ps` of one-float keys, the ps's CPU a call was 22-25 us alone,
// 85-118 us beside a SCHED_IDLE or nice-19 spinner on each core, and
// 14-33 us beside a nice-0 loop on each core or beside a second caller and
// ps (docs/fidelity.md, "Busy neighbours").
// A neighbour's own CPU is no task's: measurements read their tasks' CPU.
#include <string>
#include <vector>

#include "core/runtime/status.h"
#include "tools/subprocess.h"

namespace twinps::cli {

class BusyNeighbours {
 public:
  // Starts one neighbour per online core (`twinps calibrate
  // --busy-neighbour`), each stopping by itself after `seconds` if this
  // process is gone; waits until each says it computes. Their output goes
  // under `dir`.
  static StatusOr<BusyNeighbours> start(double seconds, const std::string& dir);
  // The neighbours stop when the handle goes away.

 private:
  std::vector<Child> neighbours_;
};

// The neighbour's side: a line on stdout, then the gradient kernel in a loop
// for `seconds` of wall time. Returns the exit code.
int compute_as_a_neighbour(double seconds);

}  // namespace twinps::cli
