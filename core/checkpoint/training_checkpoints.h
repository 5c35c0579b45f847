#pragma once
// Checkpoints from the coordinator's side: where a (re)started run begins, and
// saving the parameter servers' state between epochs (spec P6, P7). Shared by
// every runtime: the in-memory cluster, the simulator (coordinator-crash
// scenarios) and real mode.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/checkpoint/checkpoint_manager.h"
#include "core/coordinator/cluster_coordinator.h"

namespace twinps {

struct StartingPoint {
  std::vector<ShardState> shards;  // what to create the variables from
  std::int64_t step = 0;           // the optimizer's iterations when saved (0 when fresh)
  std::optional<std::string> restored_from;  // the checkpoint used, if any
  std::map<std::string, std::string> metadata;
  std::vector<RefusedCheckpoint> refused;  // newer checkpoints that were damaged, with reasons
};

// The newest checkpoint that verifies, cut into `variables`; or `fresh` when
// there is none (or no manager). A checkpoint that does not fit the model is
// an error, never silently replaced by fresh values.
StatusOr<StartingPoint> restore_or_initialize(const CheckpointManager* manager,
                                              const std::vector<VariableLayout>& variables,
                                              const OptimizerConfig& optimizer, std::vector<ShardState> fresh);

// Exports every shard (values, optimizer slots, update counts) from the
// parameter servers and saves them under the value of the counter variable
// `step_counter` (the optimizer's iterations). Call it after join(), when no
// closure is running, for a consistent snapshot.
Task<StatusOr<std::string>> save_checkpoint(ClusterCoordinator& coordinator, CheckpointManager& manager,
                                            std::map<std::string, std::string> metadata = {},
                                            std::string step_counter = "iterations");

// The epoch a run restored at `step` resumes at (P7: iterations // steps_per_epoch).
inline int resume_epoch(std::int64_t step, int steps_per_epoch) {
  return steps_per_epoch > 0 ? static_cast<int>(step / steps_per_epoch) : 0;
}

}  // namespace twinps
