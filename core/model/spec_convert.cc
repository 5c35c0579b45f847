#include "core/model/spec_convert.h"

#include "core/ps/optimizer.h"

namespace twinps::model {

namespace {

LearningRateSchedule schedule(const LearningRate& lr, double keras_default) {
  LearningRateSchedule s = LearningRateSchedule::constant(keras_default);
  switch (lr.kind_case()) {
    case LearningRate::kConstant: s.initial = lr.constant(); break;
    case LearningRate::kExponentialDecay:
      s.kind = LearningRateSchedule::Kind::kExponentialDecay;
      s.initial = lr.exponential_decay().initial();
      s.decay_steps = lr.exponential_decay().decay_steps();
      s.decay_rate = lr.exponential_decay().decay_rate();
      s.staircase = lr.exponential_decay().staircase();
      break;
    case LearningRate::kInverseTimeDecay:
      s.kind = LearningRateSchedule::Kind::kInverseTimeDecay;
      s.initial = lr.inverse_time_decay().initial();
      s.decay_steps = lr.inverse_time_decay().decay_steps();
      s.decay_rate = lr.inverse_time_decay().decay_rate();
      s.staircase = lr.inverse_time_decay().staircase();
      break;
    case LearningRate::kPiecewiseConstant:
      s.kind = LearningRateSchedule::Kind::kPiecewiseConstant;
      s.boundaries.assign(lr.piecewise_constant().boundaries().begin(), lr.piecewise_constant().boundaries().end());
      s.values.assign(lr.piecewise_constant().values().begin(), lr.piecewise_constant().values().end());
      break;
    case LearningRate::KIND_NOT_SET: break;
  }
  return s;
}

}  // namespace

OptimizerConfig default_optimizer_config() {
  OptimizerConfig c;
  c.kind = OptimizerConfig::Kind::kSgd;
  c.learning_rate = LearningRateSchedule::constant(0.01);
  return c;
}

StatusOr<OptimizerConfig> optimizer_config(const OptimizerGroup& g) {
  OptimizerConfig c;
  double keras_default_lr = 0.001;
  switch (g.kind_case()) {
    case OptimizerGroup::kSgd:
      c.kind = OptimizerConfig::Kind::kSgd;
      c.momentum = g.sgd().momentum();
      c.nesterov = g.sgd().nesterov();
      keras_default_lr = 0.01;
      break;
    case OptimizerGroup::kAdagrad:
      c.kind = OptimizerConfig::Kind::kAdagrad;
      c.initial_accumulator_value = g.adagrad().initial_accumulator_value();
      c.epsilon = g.adagrad().epsilon();
      break;
    case OptimizerGroup::kRmsprop:
      c.kind = OptimizerConfig::Kind::kRmsprop;
      c.rho = g.rmsprop().rho();
      c.momentum = g.rmsprop().momentum();
      c.epsilon = g.rmsprop().epsilon();
      c.centered = g.rmsprop().centered();
      break;
    case OptimizerGroup::kAdam:
      c.kind = OptimizerConfig::Kind::kAdam;
      c.beta_1 = g.adam().beta_1();
      c.beta_2 = g.adam().beta_2();
      c.epsilon = g.adam().epsilon();
      c.lazy_adam = g.adam().lazy();
      break;
    case OptimizerGroup::KIND_NOT_SET:
      return absl::InvalidArgumentError("choose an update rule: sgd, adagrad, rmsprop or adam");
  }
  c.learning_rate = schedule(g.learning_rate(), keras_default_lr);
  TWINPS_RETURN_IF_ERROR(validate_optimizer_config(c));
  return c;
}

StatusOr<PartitionerPtr> make_partitioner(const Partitioner& p) {
  switch (p.kind_case()) {
    case Partitioner::kFixedShards: {
      auto r = twinps::FixedShardsPartitioner::create(p.fixed_shards());
      if (!r.ok()) return r.status();
      return PartitionerPtr(*r);
    }
    case Partitioner::kMinSize: {
      auto r = twinps::MinSizePartitioner::create(p.min_size().min_shard_bytes(), p.min_size().max_shards());
      if (!r.ok()) return r.status();
      return PartitionerPtr(*r);
    }
    case Partitioner::kMaxSize: {
      if (!p.max_size().has_max_shard_bytes()) return absl::InvalidArgumentError("max_size needs max_shard_bytes");
      std::optional<std::int64_t> cap;
      if (p.max_size().has_max_shards()) cap = p.max_size().max_shards();
      auto r = twinps::MaxSizePartitioner::create(p.max_size().max_shard_bytes(), cap);
      if (!r.ok()) return r.status();
      return PartitionerPtr(*r);
    }
    case Partitioner::KIND_NOT_SET: break;
  }
  return absl::InvalidArgumentError("choose a partitioner: fixed_shards, min_size or max_size");
}

twinps::Initializer make_initializer(const Initializer& spec, twinps::Initializer fallback) {
  switch (spec.kind_case()) {
    case Initializer::kZeros: return twinps::Initializer::zeros();
    case Initializer::kConstant: return twinps::Initializer::constant(spec.constant());
    case Initializer::kUniform: return twinps::Initializer::uniform(spec.uniform().min(), spec.uniform().max());
    case Initializer::kGlorotUniform: return twinps::Initializer::glorot_uniform();
    case Initializer::kNormal: return twinps::Initializer::normal(spec.normal().mean(), spec.normal().stddev());
    case Initializer::KIND_NOT_SET: break;
  }
  return fallback;
}

}  // namespace twinps::model
