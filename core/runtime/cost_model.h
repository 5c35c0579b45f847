#pragma once
// Modelled duration of computation, for runtimes whose clock does not move by
// itself. On real hardware a step's Eigen work takes real time and the
// runtime has no cost model (nullptr): nothing is added. The simulator
// supplies one, so a step's compute shows up on the simulated clock, scaled
// per task (stragglers) and drawn from the run's seed.
#include <cstdint>
#include <span>
#include <string_view>

#include "core/cluster/task_id.h"
#include "core/runtime/time.h"
#include "core/runtime/unique_function.h"

namespace twinps {

// One kernel a step runs: its kind ("gradient", "matmul" ...), as the model
// describes it, with its floating-point operations and the bytes it moves.
// A cost model prices each kind from measurements of that kind.
struct KernelWork {
  std::string_view kind;
  double flops = 0;
  double bytes = 0;
  // Input elements the kernel builds before its arithmetic (a synthetic
  // gradient's batch x rows input): work that grows with batch x rows
  // whatever the width, which FLOPs and bytes alone cannot price.
  double inputs = 0;
  // Records it reads or maps (an input pipeline's kernels: a record's framing
  // and parsing cost the same whatever its values).
  double records = 0;
};

struct ComputeCost {
  std::string_view what;       // "tutorial/train_step", for traces
  std::int64_t examples = 0;   // examples processed
  double flops = 0;            // floating-point operations, when known
  std::span<const KernelWork> kernels = {};  // the same work kernel by kernel, when known
};

class CostModel {
 public:
  virtual ~CostModel() = default;
  // How long `task` takes for `cost` starting now; 0 for no delay.
  virtual Duration compute(const TaskId& task, const ComputeCost& cost) = 0;

  // How long `task` takes to copy a dense variable of `bytes` between its one
  // value and its shards: a worker assembles a read of several shards into
  // one matrix, and cuts a write into them (a one-shard variable moves, at no
  // cost). Charged apart from compute(): no step-time draw, no straggler
  // factor. 0 for no delay.
  virtual Duration copy(const TaskId& task, double bytes) {
    (void)task, (void)bytes;
    return 0;
  }

  // Whether computing is CPU work on cores that other work shares (the
  // simulator's hosts): its duration then depends on what else runs, and
  // run() carries it out instead of a sleep.
  virtual bool shares_cpu() const { return false; }
  // Runs `work` (compute()'s duration on an idle core) on the task's CPU and
  // calls `done` when it has finished.
  virtual void run(const TaskId& task, Duration work, Callback done) {
    (void)task, (void)work, (void)done;
  }
};

}  // namespace twinps
