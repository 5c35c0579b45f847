#pragma once
// The optimizers a parameter server applies to its trainable shards: SGD (with
// momentum and Nesterov), Adagrad, RMSprop (plain, momentum, centered) and
// Adam, with Keras's (OptimizerV2) update formulas and defaults.
//
// The `step` every call takes is the number of updates already applied to the
// shard (0 for its first update). It plays the role of Keras's `iterations`:
// learning-rate schedules read it as is and Adam's bias correction uses step+1.
// Keras reads one global `iterations` variable, which every ps would have to
// fetch on every step (the hotspot TensorFlow's tutorial warns about); each
// shard counting its own updates keeps the update local.
//
// Sparse gradients (rows of an embedding):
//   * duplicate row ids are summed first, as Keras does before any sparse apply;
//   * SGD, Adagrad and RMSprop touch only the given rows, like TensorFlow's
//     ResourceSparseApply* kernels. (Keras's RMSprop without momentum is the
//     exception upstream: its sparse path decays the `rms`/`mg` slots of every
//     row. twinps keeps to the touched rows there as well.)
//   * Adam follows Keras: the moments of *every* row decay, the touched rows
//     receive the gradient, and every row's value moves by its new moments.
//     With OptimizerConfig::lazy_adam only the touched rows' moments and values
//     change (TF Addons' LazyAdam), which is what large embeddings usually want.
#include <cstdint>
#include <string>
#include <vector>

#include "core/ps/optimizer_config.h"
#include "core/runtime/status.h"
#include "core/tensor/tensor.h"

namespace twinps {

// INVALID_ARGUMENT naming the offending field ("optimizer.beta_1 must be in
// [0, 1), got 1"), or OK. Only the fields the chosen kind uses are checked.
Status validate_optimizer_config(const OptimizerConfig& config);

// "adam(lr=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-07)" for messages.
std::string describe(const OptimizerConfig& config);

// The learning rate a schedule gives at `step` (Keras's schedule formulas).
double learning_rate_at(const LearningRateSchedule& schedule, std::int64_t step);

// Sums the values of repeated row ids; rows keep the order of their first
// occurrence. values.rows() must equal rows.size().
SparseRows sum_duplicate_rows(const RowIds& rows, const Matrix& values);

class Optimizer {
 public:
  // Validates the config (see validate_optimizer_config).
  static StatusOr<Optimizer> create(const OptimizerConfig& config);

  const OptimizerConfig& config() const { return config_; }
  std::string name() const { return optimizer_name(config_.kind); }

  // Keras's slot names, in the order shards keep their slots:
  // SGD {"momentum"} when momentum > 0, else none; Adagrad {"accumulator"};
  // RMSprop {"rms", "momentum" if momentum > 0, "mg" if centered}; Adam {"m", "v"}.
  const std::vector<std::string>& slot_names() const { return slot_names_; }
  std::size_t slot_count() const { return slot_names_.size(); }

  // Fresh slots for a rows x cols shard: Adagrad's accumulator starts at
  // initial_accumulator_value, every other slot at zero.
  std::vector<Matrix> make_slots(std::int64_t rows, std::int64_t cols) const;

  double learning_rate(std::int64_t step) const { return learning_rate_at(config_.learning_rate, step); }

  // value -= update(grad). Slots must be the ones make_slots gave for the
  // shard (same count and shape) and grad the shard's shape; INVALID_ARGUMENT
  // otherwise, with nothing changed.
  Status apply_dense(Matrix& value, std::vector<Matrix>& slots, const Matrix& grad, std::int64_t step) const;

  // apply_dense for `n` floats of a shard, from flat memory, written
  // elsewhere: next_value = value - update(grad), next_slots likewise, with
  // `value` and `slots` left as they are. Operands are the same elements of
  // the shard's value, its slots (in slot_names() order) and a gradient of
  // its shape, so a shard updated span by span ends bit for bit as
  // apply_dense leaves it. Shapes are the caller's to check.
  void apply_dense_span(const float* value, const std::vector<const float*>& slots, const float* grad, std::size_t n,
                        std::int64_t step, float* next_value, const std::vector<float*>& next_slots) const;

  // The same for a gradient of some rows: grad.rows() == rows.size(), each id in
  // [0, value.rows()); ids may repeat (they are summed).
  Status apply_sparse(Matrix& value, std::vector<Matrix>& slots, const RowIds& rows, const Matrix& grad,
                      std::int64_t step) const;

 private:
  explicit Optimizer(const OptimizerConfig& config);
  Status check_operands(const Matrix& value, const std::vector<Matrix>& slots, std::int64_t grad_cols) const;

  OptimizerConfig config_;
  std::vector<std::string> slot_names_;
};

}  // namespace twinps
