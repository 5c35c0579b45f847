#include "sim/trainer_action.h"

#include "core/model/spec_loader.h"
#include "core/models/tutorial/tutorial_spec.h"

namespace twinps::sim {

StatusOr<ScenarioProgram::TrainerSetup> tutorial_setup(const scenario::Tutorial& t, int ps, std::uint64_t seed) {
  model::LoadedSpec loaded = model::parse_model_spec(tutorial::spec_text(), tutorial::kSpecFileName);
  if (!loaded.ok()) return absl::InternalError(loaded.error_text());
  model::spec::ModelSpec spec = std::move(loaded.spec);
  spec.set_batch_size(t.batch_size());
  for (auto& g : *spec.mutable_optimizer()) g.mutable_learning_rate()->set_constant(t.learning_rate());
  spec.mutable_partitioner()->set_fixed_shards(t.has_num_shards() ? t.num_shards() : ps);
  spec.set_init_seed(seed + 1);
  auto compiled = model::CompiledModel::compile(spec);
  if (!compiled.ok()) return compiled.status();
  ScenarioProgram::TrainerSetup setup{*compiled, nullptr, training::tutorial_data(seed, 200, 200),
                                      training::tutorial_data(seed + 1, 16, 0), {}};
  setup.options.epochs = t.epochs();
  setup.options.steps_per_epoch = t.steps_per_epoch();
  setup.options.eval_every_epochs = 0;
  setup.options.eval_steps = 2;
  if (t.visitation() == scenario::EXACTLY_ONCE) {
    setup.options.visitation = training::Visitation::kExactlyOnce;
    setup.options.data_seed = seed;
  }
  return setup;
}

std::unique_ptr<CheckpointManager> scenario_checkpoints(const scenario::Scenario& sc, CheckpointStorage& storage) {
  const bool save = sc.has_tutorial() ? sc.tutorial().checkpoint_every_epoch()
                                      : sc.has_checkpoints() && sc.checkpoints().every_epoch();
  if (!save) return nullptr;
  return std::make_unique<CheckpointManager>(
      storage, sc.has_tutorial() ? sc.tutorial().max_to_keep() : sc.checkpoints().max_to_keep());
}

}  // namespace twinps::sim
