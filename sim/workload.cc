#include "sim/workload.h"

namespace twinps::sim {

StatusOr<synthetic::ModelSpec> model_spec(const scenario::SyntheticModel& model) {
  synthetic::ModelSpec spec;
  spec.batch_size = model.batch_size();
  for (const auto& v : model.variable()) {
    synthetic::Variable var;
    var.name = v.name();
    var.shape.assign(v.shape().begin(), v.shape().end());
    var.read_only = v.read_only();
    var.per_step = v.per_step();
    var.rows_per_step = v.rows_per_step();
    var.zipf_exponent = v.zipf_exponent();
    spec.variables.push_back(std::move(var));
  }
  if (model.has_partitioner()) {
    const auto& p = model.partitioner();
    StatusOr<PartitionerPtr> made = PartitionerPtr();
    switch (p.kind_case()) {
      case scenario::Partitioner::kFixedShards: made = FixedShardsPartitioner::create(p.fixed_shards()); break;
      case scenario::Partitioner::kMinSize:
        made = MinSizePartitioner::create(p.min_size().min_shard_bytes(), p.min_size().max_shards());
        break;
      case scenario::Partitioner::kMaxSize:
        made = MaxSizePartitioner::create(
            p.max_size().max_shard_bytes(),
            p.max_size().has_max_shards() ? std::optional<std::int64_t>(p.max_size().max_shards()) : std::nullopt);
        break;
      case scenario::Partitioner::KIND_NOT_SET: break;
    }
    if (!made.ok()) return made.status();
    spec.partitioner = *made;
  }
  const auto& o = model.optimizer();
  switch (o.kind()) {
    case scenario::Optimizer::SGD: spec.optimizer.kind = OptimizerConfig::Kind::kSgd; break;
    case scenario::Optimizer::ADAGRAD: spec.optimizer.kind = OptimizerConfig::Kind::kAdagrad; break;
    case scenario::Optimizer::RMSPROP: spec.optimizer.kind = OptimizerConfig::Kind::kRmsprop; break;
    case scenario::Optimizer::ADAM: spec.optimizer.kind = OptimizerConfig::Kind::kAdam; break;
  }
  spec.optimizer.learning_rate = LearningRateSchedule::constant(o.learning_rate());
  return spec;
}

}  // namespace twinps::sim
