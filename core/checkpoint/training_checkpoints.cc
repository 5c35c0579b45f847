#include "core/checkpoint/training_checkpoints.h"

namespace twinps {

StatusOr<StartingPoint> restore_or_initialize(const CheckpointManager* manager,
                                              const std::vector<VariableLayout>& variables,
                                              const OptimizerConfig& optimizer, std::vector<ShardState> fresh) {
  StartingPoint start;
  if (manager) {
    auto restored = manager->restore_latest(variables, optimizer);
    if (restored.ok()) {
      start.shards = std::move(restored->shards);
      start.step = restored->step;
      start.restored_from = restored->name;
      start.metadata = std::move(restored->metadata);
      start.refused = std::move(restored->refused);
      return start;
    }
    if (restored.status().code() != StatusCode::kNotFound) return restored.status();
  }
  start.shards = std::move(fresh);
  return start;
}

Task<StatusOr<std::string>> save_checkpoint(ClusterCoordinator& coordinator, CheckpointManager& manager,
                                            std::map<std::string, std::string> metadata, std::string step_counter) {
  const Time start = coordinator.now();
  auto shards = co_await coordinator.export_variables();
  if (!shards.ok()) co_return shards.status();
  std::int64_t step = 0;
  if (const VariableLayout* counter = coordinator.variables().find(step_counter)) {
    for (const auto& s : *shards)
      if (s.spec.id == counter->shards.front().id) step = s.counter;
  }
  auto saved = manager.save(step, coordinator.variables().all(), *shards, coordinator.optimizer(), metadata);
  coordinator.trace().span(coordinator.self(), "program", "save checkpoint", start, coordinator.now() - start,
                           {TraceArg{"step", static_cast<double>(step)}, TraceArg{"ok", saved.ok() ? 1.0 : 0.0}});
  co_return saved;
}

}  // namespace twinps
