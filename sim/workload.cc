#include "sim/workload.h"

namespace twinps::sim {

namespace {

// The partitioner a scenario names; null when it names none.
StatusOr<PartitionerPtr> make_partitioner(const scenario::Partitioner& p) {
  switch (p.kind_case()) {
    case scenario::Partitioner::kFixedShards: return FixedShardsPartitioner::create(p.fixed_shards());
    case scenario::Partitioner::kMinSize:
      return MinSizePartitioner::create(p.min_size().min_shard_bytes(), p.min_size().max_shards());
    case scenario::Partitioner::kMaxSize:
      return MaxSizePartitioner::create(
          p.max_size().max_shard_bytes(),
          p.max_size().has_max_shards() ? std::optional<std::int64_t>(p.max_size().max_shards()) : std::nullopt);
    case scenario::Partitioner::KIND_NOT_SET: break;
  }
  return PartitionerPtr();
}

}  // namespace

StatusOr<synthetic::ModelSpec> model_spec(const scenario::SyntheticModel& model, const scenario::PsService& ps) {
  synthetic::ModelSpec spec;
  spec.auto_placement = model.placement() == scenario::AUTO;
  spec.placement_prices = PsWorkPrices{ps.per_request_us(), ps.per_row_us(), ps.per_kib_us()};
  spec.batch_size = model.batch_size();
  spec.flops_per_step = model.step_gflops() * 1e9;
  for (const auto& k : model.step_kernel())
    spec.step_kernels.push_back({k.kind(), k.flops(), k.bytes(), k.inputs(), k.records()});
  spec.steps_per_closure = model.steps_per_closure();
  spec.examples_per_epoch = model.examples_per_epoch();
  spec.exactly_once = model.visitation() == scenario::EXACTLY_ONCE;
  for (const auto& v : model.variable()) {
    synthetic::Variable var;
    var.name = v.name();
    var.shape.assign(v.shape().begin(), v.shape().end());
    var.read_only = v.read_only();
    var.per_step = v.per_step();
    var.rows_per_step = v.rows_per_step();
    var.zipf_exponent = v.zipf_exponent();
    if (v.has_partitioner()) {
      auto own = make_partitioner(v.partitioner());
      if (!own.ok()) return own.status();
      var.partitioner = *own;
    }
    spec.variables.push_back(std::move(var));
  }
  if (model.has_partitioner()) {
    auto made = make_partitioner(model.partitioner());
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
