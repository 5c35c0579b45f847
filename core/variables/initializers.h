#pragma once
// Initial values of variables, computed on the coordinator with the run's
// random stream (Keras's initializer formulas), and split into the shards the
// parameter servers create.
#include <vector>

#include "core/messages/messages.h"
#include "core/runtime/random.h"
#include "core/tensor/tensor.h"

namespace twinps {

struct Initializer {
  enum class Kind { kZeros, kConstant, kUniform, kGlorotUniform, kNormal };
  Kind kind = Kind::kZeros;
  double a = 0;  // constant value; uniform low; normal mean
  double b = 0;  // uniform high; normal stddev

  static Initializer zeros() { return {}; }
  static Initializer constant(double v) { return {Kind::kConstant, v, 0}; }
  static Initializer uniform(double lo, double hi) { return {Kind::kUniform, lo, hi}; }
  // Keras's glorot_uniform: U(-l, l) with l = sqrt(6 / (fan_in + fan_out)).
  static Initializer glorot_uniform() { return {Kind::kGlorotUniform, 0, 0}; }
  static Initializer normal(double mean, double stddev) { return {Kind::kNormal, mean, stddev}; }
};

// The full value of a variable of `shape`, as [rows x cols] storage.
Matrix initial_value(const Initializer& init, const Shape& shape, RandomStream& random);

// The ShardStates that hold `full` under `layout` (fresh: no slots, step 0).
std::vector<ShardState> shard_states(const VariableLayout& layout, const Matrix& full);
// Meta shards for `layout` (timing-only simulation): each shard's spec, no values.
std::vector<ShardState> meta_shard_states(const VariableLayout& layout);
// A counter variable's single shard with value `start`.
std::vector<ShardState> counter_shard_states(const VariableLayout& layout, std::int64_t start = 0);

}  // namespace twinps
