#pragma once
// How a parameter server updates its trainable shards. The learning rate is a
// constant or a schedule of the shard's own update count, evaluated on the
// parameter server: never a variable that every step must read from one ps
// (the hotspot TensorFlow's tutorial warns about).
#include <cstdint>
#include <string>
#include <vector>

namespace twinps {

struct LearningRateSchedule {
  enum class Kind { kConstant, kExponentialDecay, kInverseTimeDecay, kPiecewiseConstant };
  Kind kind = Kind::kConstant;
  double initial = 0.01;
  // Exponential: initial * rate^(step/decay_steps); inverse time: initial / (1 + rate*step/decay_steps).
  double decay_steps = 1000;
  double decay_rate = 0.96;
  bool staircase = false;
  // Piecewise constant: values[0] up to and including step boundaries[0], values[i] for
  // boundaries[i-1] < step <= boundaries[i], values.back() after the last boundary (Keras's
  // PiecewiseConstantDecay); values.size() == boundaries.size() + 1, boundaries ascending.
  std::vector<std::int64_t> boundaries;
  std::vector<double> values;

  static LearningRateSchedule constant(double lr) {
    LearningRateSchedule s;
    s.initial = lr;
    return s;
  }
  bool operator==(const LearningRateSchedule&) const = default;
};

struct OptimizerConfig {
  enum class Kind { kSgd, kAdagrad, kRmsprop, kAdam };
  Kind kind = Kind::kSgd;
  LearningRateSchedule learning_rate;
  // Defaults are Keras's (tf.keras.optimizers.*).
  double momentum = 0.0;   // SGD, RMSprop
  bool nesterov = false;   // SGD
  double rho = 0.9;        // RMSprop
  bool centered = false;   // RMSprop
  double epsilon = 1e-7;   // Adagrad, RMSprop, Adam
  double beta_1 = 0.9;     // Adam
  double beta_2 = 0.999;   // Adam
  double initial_accumulator_value = 0.1;  // Adagrad
  // Adam, sparse gradients only: update the moments and values of the touched
  // rows alone (TF Addons' LazyAdam) instead of Keras's default, which decays
  // the moments of every row and so moves untouched rows too.
  bool lazy_adam = false;

  bool operator==(const OptimizerConfig&) const = default;
};

std::string optimizer_name(OptimizerConfig::Kind kind);

}  // namespace twinps
