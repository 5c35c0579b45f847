#pragma once
// `twinps sim --real SCENARIO`: the scenario's cluster launched as real
// processes on this machine (tools/process_cluster.h), its coordinator
// program (sim/scenario_program.h, the simulator's own) run by a coordinator
// in this process, and its faults applied on wall-clock time by the same
// fault schedule (core/faults/fault_schedule.h) driving ProcessCluster
// instead of the simulated nodes. The result has the simulator's shape, so
// the same expectations check it (those without a real-time meaning are
// reported not applicable).
#include <string>
#include <vector>

#include "core/runtime/status.h"
#include "scenario.pb.h"  // generated from sim/scenario.proto
#include "sim/fault_recorder.h"
#include "sim/real_mode.h"
#include "sim/simulation.h"
#include "sim/spec_workload.h"

namespace twinps::cli {

struct RealRun {
  sim::SimResult result;  // times relative to the program's start
  // What went wrong acting on the processes (a restart that never served):
  // a run with any fails.
  std::vector<std::string> problems;
  double wall_s = 0;
  // From the program's start to the coordinator's (the cluster set up).
  double setup_s = 0;
  // Faults that fell due while the cluster was still being set up, fired
  // once it was: each with how late.
  std::vector<std::string> late_faults;
  // At the end: OK, or which server exited (not by a fault) and its stderr —
  // usually why a run failed.
  Status servers_alive;
};

struct RealScenarioOptions {
  std::string data_plane = "tcp";  // as `twinps serve --data-plane` (tools/data_plane_flag.h)
  // Read every process's CPU time and run delay (/proc schedstat) as each
  // action starts and ends (ActionRecord.cpu_at_*, waiting_at_*).
  bool measure_cpu = false;
  // A scenario with a `model_spec` needs it (what `twinps sim` builds from
  // the spec and its flags): its `train` actions run the trainer on the real
  // processes, the workers' steps delayed as the scenario's compute says.
  const sim::SpecWorkload* spec = nullptr;
  // With a recorder, the coordinator's events go to it (`--record-faults`);
  // it must outlive the run.
  sim::FaultRecorder* recorder = nullptr;
  // The largest cluster (tasks, the chief included) this run launches.
  int max_tasks = sim::kRealModeMaxTasks;
};

// `scenario` must have passed validate_scenario() and have no real-mode
// obstacles (sim/real_mode.h). The servers' logs go under `work_dir`.
StatusOr<RealRun> run_real_scenario(const scenario::Scenario& scenario, const std::string& work_dir,
                                    const RealScenarioOptions& options = {});

}  // namespace twinps::cli
