#include "core/model/spec_convert.h"

#include "core/ps/optimizer.h"

namespace twinps::model {

using spec::LearningRate;
using spec::OptimizerGroup;

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

StatusOr<PartitionerPtr> make_partitioner(const spec::Partitioner& p) {
  switch (p.kind_case()) {
    case spec::Partitioner::kFixedShards: {
      auto r = FixedShardsPartitioner::create(p.fixed_shards());
      if (!r.ok()) return r.status();
      return PartitionerPtr(*r);
    }
    case spec::Partitioner::kMinSize: {
      auto r = MinSizePartitioner::create(p.min_size().min_shard_bytes(), p.min_size().max_shards());
      if (!r.ok()) return r.status();
      return PartitionerPtr(*r);
    }
    case spec::Partitioner::kMaxSize: {
      if (!p.max_size().has_max_shard_bytes()) return absl::InvalidArgumentError("max_size needs max_shard_bytes");
      std::optional<std::int64_t> cap;
      if (p.max_size().has_max_shards()) cap = p.max_size().max_shards();
      auto r = MaxSizePartitioner::create(p.max_size().max_shard_bytes(), cap);
      if (!r.ok()) return r.status();
      return PartitionerPtr(*r);
    }
    case spec::Partitioner::KIND_NOT_SET: break;
  }
  return absl::InvalidArgumentError("choose a partitioner: fixed_shards, min_size or max_size");
}

Initializer make_initializer(const spec::Initializer& init, Initializer fallback) {
  using K = spec::Initializer;
  switch (init.kind_case()) {
    case K::kZeros: return Initializer::zeros();
    case K::kConstant: return Initializer::constant(init.constant());
    case K::kUniform: return Initializer::uniform(init.uniform().min(), init.uniform().max());
    case K::kGlorotUniform: return Initializer::glorot_uniform();
    case K::kNormal: return Initializer::normal(init.normal().mean(), init.normal().stddev());
    case K::KIND_NOT_SET: break;
  }
  return fallback;
}

}  // namespace twinps::model
