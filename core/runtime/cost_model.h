#pragma once
// Modelled duration of computation, for runtimes whose clock does not move by
// itself. On real hardware a step's Eigen work takes real time and the
// runtime has no cost model (nullptr): nothing is added. The simulator
// supplies one, so a step's compute shows up on the simulated clock, scaled
// per task (stragglers) and drawn from the run's seed.
#include <cstdint>
#include <string_view>

#include "core/cluster/task_id.h"
#include "core/runtime/time.h"

namespace twinps {

struct ComputeCost {
  std::string_view what;       // "tutorial/train_step", for traces
  std::int64_t examples = 0;   // examples processed
  double flops = 0;            // floating-point operations, when known
};

class CostModel {
 public:
  virtual ~CostModel() = default;
  // How long `task` takes for `cost` starting now; 0 for no delay.
  virtual Duration compute(const TaskId& task, const ComputeCost& cost) = 0;
};

}  // namespace twinps
