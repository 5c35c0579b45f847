#include "core/ps/optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

namespace twinps {
namespace {

std::string num(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

// Written as !(x > lo) rather than x <= lo so that NaN fails every check.
Status require_positive(const char* field, double x) {
  if (!(x > 0) || !std::isfinite(x))
    return absl::InvalidArgumentError(std::string("optimizer.") + field + " must be > 0, got " + num(x));
  return absl::OkStatus();
}
Status require_non_negative(const char* field, double x) {
  if (!(x >= 0) || !std::isfinite(x))
    return absl::InvalidArgumentError(std::string("optimizer.") + field + " must be >= 0, got " + num(x));
  return absl::OkStatus();
}
// [0, 1) for decay rates (rho, beta): 1 would never forget, and Adam's bias
// correction would divide by zero.
Status require_unit_open(const char* field, double x) {
  if (!(x >= 0 && x < 1))
    return absl::InvalidArgumentError(std::string("optimizer.") + field + " must be in [0, 1), got " + num(x));
  return absl::OkStatus();
}
// [0, 1] for momentum, as Keras checks it.
Status require_unit_closed(const char* field, double x) {
  if (!(x >= 0 && x <= 1))
    return absl::InvalidArgumentError(std::string("optimizer.") + field + " must be in [0, 1], got " + num(x));
  return absl::OkStatus();
}

Status validate_schedule(const LearningRateSchedule& s) {
  using Kind = LearningRateSchedule::Kind;
  switch (s.kind) {
    case Kind::kConstant:
      return require_positive("learning_rate.initial", s.initial);
    case Kind::kExponentialDecay:
      TWINPS_RETURN_IF_ERROR(require_positive("learning_rate.initial", s.initial));
      TWINPS_RETURN_IF_ERROR(require_positive("learning_rate.decay_steps", s.decay_steps));
      return require_positive("learning_rate.decay_rate", s.decay_rate);
    case Kind::kInverseTimeDecay:
      TWINPS_RETURN_IF_ERROR(require_positive("learning_rate.initial", s.initial));
      TWINPS_RETURN_IF_ERROR(require_positive("learning_rate.decay_steps", s.decay_steps));
      return require_non_negative("learning_rate.decay_rate", s.decay_rate);
    case Kind::kPiecewiseConstant: {
      if (s.values.size() != s.boundaries.size() + 1)
        return absl::InvalidArgumentError("optimizer.learning_rate.values has " + std::to_string(s.values.size()) +
                                          " entries; a piecewise constant schedule with " +
                                          std::to_string(s.boundaries.size()) + " boundaries needs " +
                                          std::to_string(s.boundaries.size() + 1));
      for (std::size_t i = 1; i < s.boundaries.size(); ++i)
        if (s.boundaries[i] <= s.boundaries[i - 1])
          return absl::InvalidArgumentError("optimizer.learning_rate.boundaries must be ascending, but boundaries[" +
                                            std::to_string(i) + "]=" + std::to_string(s.boundaries[i]) +
                                            " follows " + std::to_string(s.boundaries[i - 1]));
      for (std::size_t i = 0; i < s.values.size(); ++i) {
        std::string field = "learning_rate.values[" + std::to_string(i) + "]";
        TWINPS_RETURN_IF_ERROR(require_positive(field.c_str(), s.values[i]));
      }
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError("optimizer.learning_rate.kind is not a known schedule");
}

}  // namespace

Status validate_optimizer_config(const OptimizerConfig& c) {
  TWINPS_RETURN_IF_ERROR(validate_schedule(c.learning_rate));
  using Kind = OptimizerConfig::Kind;
  switch (c.kind) {
    case Kind::kSgd:
      return require_unit_closed("momentum", c.momentum);
    case Kind::kAdagrad:
      TWINPS_RETURN_IF_ERROR(require_positive("epsilon", c.epsilon));
      return require_non_negative("initial_accumulator_value", c.initial_accumulator_value);
    case Kind::kRmsprop:
      TWINPS_RETURN_IF_ERROR(require_unit_open("rho", c.rho));
      TWINPS_RETURN_IF_ERROR(require_unit_closed("momentum", c.momentum));
      return require_positive("epsilon", c.epsilon);
    case Kind::kAdam:
      TWINPS_RETURN_IF_ERROR(require_unit_open("beta_1", c.beta_1));
      TWINPS_RETURN_IF_ERROR(require_unit_open("beta_2", c.beta_2));
      return require_positive("epsilon", c.epsilon);
  }
  return absl::InvalidArgumentError("optimizer.kind is not a known optimizer");
}

std::string describe(const OptimizerConfig& c) {
  const auto& s = c.learning_rate;
  std::string lr;
  switch (s.kind) {
    case LearningRateSchedule::Kind::kConstant: lr = num(s.initial); break;
    case LearningRateSchedule::Kind::kExponentialDecay:
      lr = "exponential_decay(" + num(s.initial) + ", " + num(s.decay_steps) + ", " + num(s.decay_rate) +
           (s.staircase ? ", staircase)" : ")");
      break;
    case LearningRateSchedule::Kind::kInverseTimeDecay:
      lr = "inverse_time_decay(" + num(s.initial) + ", " + num(s.decay_steps) + ", " + num(s.decay_rate) +
           (s.staircase ? ", staircase)" : ")");
      break;
    case LearningRateSchedule::Kind::kPiecewiseConstant:
      lr = "piecewise_constant(" + std::to_string(s.boundaries.size()) + " boundaries)";
      break;
  }
  std::string out = optimizer_name(c.kind) + "(lr=" + lr;
  switch (c.kind) {
    case OptimizerConfig::Kind::kSgd:
      out += ", momentum=" + num(c.momentum) + (c.nesterov ? ", nesterov" : "");
      break;
    case OptimizerConfig::Kind::kAdagrad:
      out += ", initial_accumulator_value=" + num(c.initial_accumulator_value) + ", epsilon=" + num(c.epsilon);
      break;
    case OptimizerConfig::Kind::kRmsprop:
      out += ", rho=" + num(c.rho) + ", momentum=" + num(c.momentum) + ", epsilon=" + num(c.epsilon) +
             (c.centered ? ", centered" : "");
      break;
    case OptimizerConfig::Kind::kAdam:
      out += ", beta_1=" + num(c.beta_1) + ", beta_2=" + num(c.beta_2) + ", epsilon=" + num(c.epsilon) +
             (c.lazy_adam ? ", lazy" : "");
      break;
  }
  return out + ")";
}

double learning_rate_at(const LearningRateSchedule& s, std::int64_t step) {
  const double t = static_cast<double>(step);
  switch (s.kind) {
    case LearningRateSchedule::Kind::kConstant:
      return s.initial;
    case LearningRateSchedule::Kind::kExponentialDecay: {
      double p = t / s.decay_steps;
      if (s.staircase) p = std::floor(p);
      return s.initial * std::pow(s.decay_rate, p);
    }
    case LearningRateSchedule::Kind::kInverseTimeDecay: {
      double p = t / s.decay_steps;
      if (s.staircase) p = std::floor(p);
      return s.initial / (1.0 + s.decay_rate * p);
    }
    case LearningRateSchedule::Kind::kPiecewiseConstant:
      for (std::size_t i = 0; i < s.boundaries.size(); ++i)
        if (step <= s.boundaries[i]) return s.values[i];
      return s.values.empty() ? s.initial : s.values.back();
  }
  return s.initial;
}

// Repeated ids are found by sorting (id, index) pairs, not with a map: a
// std::map of a push's 1,024 ids allocated a node per row and was 6 % of a
// ps's CPU on a sparse embedding (perf, 2026-11-27), for pushes that mostly
// repeat no id at all.
SparseRows sum_duplicate_rows(const RowIds& rows, const Matrix& values) {
  std::vector<std::pair<std::int64_t, std::size_t>> by_id(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) by_id[i] = {rows[i], i};
  std::sort(by_id.begin(), by_id.end());
  const auto same_id = [](const auto& a, const auto& b) { return a.first == b.first; };
  SparseRows out;
  if (std::adjacent_find(by_id.begin(), by_id.end(), same_id) == by_id.end()) {
    out.rows = rows;
    out.values = values;
    return out;
  }
  // Each distinct id's first occurrence (the first of its run after the
  // sort) and, for every index, which distinct id it has.
  std::vector<std::size_t> first, id_of(rows.size());
  for (std::size_t k = 0; k < by_id.size(); ++k) {
    if (k == 0 || by_id[k].first != by_id[k - 1].first) first.push_back(by_id[k].second);
    id_of[by_id[k].second] = first.size() - 1;
  }
  // Output rows in order of first occurrence.
  std::vector<std::size_t> order(first.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&first](std::size_t a, std::size_t b) { return first[a] < first[b]; });
  std::vector<Eigen::Index> output_row(first.size());
  out.rows.resize(first.size());
  for (std::size_t r = 0; r < order.size(); ++r) {
    output_row[order[r]] = static_cast<Eigen::Index>(r);
    out.rows[r] = rows[first[order[r]]];
  }
  out.values = Matrix::Zero(static_cast<Eigen::Index>(first.size()), values.cols());
  for (std::size_t i = 0; i < rows.size(); ++i)
    out.values.row(output_row[id_of[i]]) += values.row(static_cast<Eigen::Index>(i));
  return out;
}

// ---------------------------------------------------------------- Optimizer

StatusOr<Optimizer> Optimizer::create(const OptimizerConfig& config) {
  TWINPS_RETURN_IF_ERROR(validate_optimizer_config(config));
  return Optimizer(config);
}

Optimizer::Optimizer(const OptimizerConfig& config) : config_(config) {
  switch (config.kind) {
    case OptimizerConfig::Kind::kSgd:
      if (config.momentum > 0) slot_names_ = {"momentum"};
      break;
    case OptimizerConfig::Kind::kAdagrad:
      slot_names_ = {"accumulator"};
      break;
    case OptimizerConfig::Kind::kRmsprop:
      slot_names_ = {"rms"};
      if (config.momentum > 0) slot_names_.push_back("momentum");
      if (config.centered) slot_names_.push_back("mg");
      break;
    case OptimizerConfig::Kind::kAdam:
      slot_names_ = {"m", "v"};
      break;
  }
}

std::vector<Matrix> Optimizer::make_slots(std::int64_t rows, std::int64_t cols) const {
  const float init = config_.kind == OptimizerConfig::Kind::kAdagrad
                         ? static_cast<float>(config_.initial_accumulator_value)
                         : 0.0f;
  return std::vector<Matrix>(slot_names_.size(), Matrix::Constant(rows, cols, init));
}

Status Optimizer::check_operands(const Matrix& value, const std::vector<Matrix>& slots,
                                 std::int64_t grad_cols) const {
  if (slots.size() != slot_names_.size())
    return absl::InvalidArgumentError(name() + " needs " + std::to_string(slot_names_.size()) + " slots, got " +
                                      std::to_string(slots.size()));
  for (std::size_t i = 0; i < slots.size(); ++i)
    if (slots[i].rows() != value.rows() || slots[i].cols() != value.cols())
      return absl::InvalidArgumentError("slot '" + slot_names_[i] + "' is " + std::to_string(slots[i].rows()) + "x" +
                                        std::to_string(slots[i].cols()) + " but the value is " +
                                        std::to_string(value.rows()) + "x" + std::to_string(value.cols()));
  if (grad_cols != value.cols())
    return absl::InvalidArgumentError("gradient has " + std::to_string(grad_cols) + " columns, the value " +
                                      std::to_string(value.cols()));
  return absl::OkStatus();
}

namespace {

struct Coefficients {
  float lr = 0;
  float momentum = 0;
  float rho = 0;
  float epsilon = 0;
  float beta_1 = 0;
  float beta_2 = 0;
  float adam_alpha = 0;  // lr * sqrt(1 - beta_2^t) / (1 - beta_1^t)
};

Coefficients coefficients(const OptimizerConfig& c, double lr, std::int64_t step) {
  Coefficients k;
  k.lr = static_cast<float>(lr);
  k.momentum = static_cast<float>(c.momentum);
  k.rho = static_cast<float>(c.rho);
  k.epsilon = static_cast<float>(c.epsilon);
  k.beta_1 = static_cast<float>(c.beta_1);
  k.beta_2 = static_cast<float>(c.beta_2);
  // Keras's local_step = iterations + 1: the first update has t = 1.
  const double t = static_cast<double>(step) + 1.0;
  k.adam_alpha =
      static_cast<float>(lr * std::sqrt(1.0 - std::pow(c.beta_2, t)) / (1.0 - std::pow(c.beta_1, t)));
  return k;
}

// The rules are elementwise, so each runs over flat spans of floats: a whole
// shard, the gathered rows of a sparse gradient, or a piece of a shard whose
// gradient is still arriving (apply_dense_span). Each reads a value and its
// slots and writes the next ones, in place (`out` the same memory as `in`:
// elementwise, so no element is read after it is written) or elsewhere.
// Without FMA contraction an element's result does not depend on where its
// span starts or where it is written.
using Flat = Eigen::Map<Eigen::ArrayXf>;
using ConstFlat = Eigen::Map<const Eigen::ArrayXf>;

struct Span {
  ConstFlat x;                 // the value
  std::vector<ConstFlat> s;    // its slots
  ConstFlat g;                 // the gradient
  Flat x_out;                  // the next value
  std::vector<Flat> s_out;     // the next slots
};

void sgd_step(const OptimizerConfig& c, const Coefficients& k, Span& p) {
  if (p.s.empty()) {
    p.x_out = p.x - k.lr * p.g;
    return;
  }
  // TensorFlow's KerasMomentum kernel: accum = momentum*accum - lr*g.
  p.s_out[0] = k.momentum * p.s[0] - k.lr * p.g;
  if (c.nesterov)
    p.x_out = p.x + (k.momentum * p.s_out[0] - k.lr * p.g);
  else
    p.x_out = p.x + p.s_out[0];
}

void adagrad_step(const Coefficients& k, Span& p) {
  p.s_out[0] = p.s[0] + p.g.square();
  p.x_out = p.x - k.lr * p.g / (p.s_out[0].sqrt() + k.epsilon);
}

void rmsprop_step(const OptimizerConfig& c, const Coefficients& k, Span& p) {
  const ConstFlat& g = p.g;
  Flat& ms = p.s_out[0];
  ms = k.rho * p.s[0] + (1 - k.rho) * g.square();
  if (c.momentum > 0) {
    // The ApplyRMSProp kernels: epsilon inside the square root.
    Flat& mom = p.s_out[1];
    if (c.centered) {
      Flat& mg = p.s_out[2];
      mg = k.rho * p.s[2] + (1 - k.rho) * g;
      mom = k.momentum * p.s[1] + k.lr * g / (ms - mg.square() + k.epsilon).sqrt();
    } else {
      mom = k.momentum * p.s[1] + k.lr * g / (ms + k.epsilon).sqrt();
    }
    p.x_out = p.x - mom;
  } else if (c.centered) {
    // Keras's own formula without momentum: epsilon outside the square root.
    Flat& mg = p.s_out[1];
    mg = k.rho * p.s[1] + (1 - k.rho) * g;
    p.x_out = p.x - k.lr * g / ((ms - mg.square()).sqrt() + k.epsilon);
  } else {
    p.x_out = p.x - k.lr * g / (ms.sqrt() + k.epsilon);
  }
}

void adam_step(const Coefficients& k, Span& p) {
  Flat& m = p.s_out[0];
  Flat& v = p.s_out[1];
  m = k.beta_1 * p.s[0] + (1 - k.beta_1) * p.g;
  v = k.beta_2 * p.s[1] + (1 - k.beta_2) * p.g.square();
  p.x_out = p.x - k.adam_alpha * m / (v.sqrt() + k.epsilon);
}

// One update rule over `n` floats: reads `value`, `slots`, `grad`, writes
// `next_value`, `next_slots` (which may be `value` and `slots` themselves).
void apply_rule(const OptimizerConfig& c, const Coefficients& k, const float* value,
                const std::vector<const float*>& slots, const float* grad, std::size_t n, float* next_value,
                const std::vector<float*>& next_slots) {
  const auto size = static_cast<Eigen::Index>(n);
  Span p{ConstFlat(value, size), {}, ConstFlat(grad, size), Flat(next_value, size), {}};
  p.s.reserve(slots.size());
  p.s_out.reserve(slots.size());
  for (std::size_t i = 0; i < slots.size(); ++i) {
    p.s.emplace_back(slots[i], size);
    p.s_out.emplace_back(next_slots[i], size);
  }
  switch (c.kind) {
    case OptimizerConfig::Kind::kSgd: sgd_step(c, k, p); break;
    case OptimizerConfig::Kind::kAdagrad: adagrad_step(k, p); break;
    case OptimizerConfig::Kind::kRmsprop: rmsprop_step(c, k, p); break;
    case OptimizerConfig::Kind::kAdam: adam_step(k, p); break;
  }
}

void apply_rule(const OptimizerConfig& c, const Coefficients& k, Matrix& value, std::vector<Matrix>& slots,
                const Matrix& grad) {
  std::vector<const float*> in(slots.size());
  std::vector<float*> out(slots.size());
  for (std::size_t i = 0; i < slots.size(); ++i) in[i] = out[i] = slots[i].data();
  apply_rule(c, k, value.data(), in, grad.data(), static_cast<std::size_t>(value.size()), value.data(), out);
}

}  // namespace

Status Optimizer::apply_dense(Matrix& value, std::vector<Matrix>& slots, const Matrix& grad,
                              std::int64_t step) const {
  TWINPS_RETURN_IF_ERROR(check_operands(value, slots, grad.cols()));
  if (grad.rows() != value.rows())
    return absl::InvalidArgumentError("gradient has " + std::to_string(grad.rows()) + " rows, the value " +
                                      std::to_string(value.rows()));
  if (step < 0) return absl::InvalidArgumentError("step must be >= 0, got " + std::to_string(step));
  apply_rule(config_, coefficients(config_, learning_rate(step), step), value, slots, grad);
  return absl::OkStatus();
}

void Optimizer::apply_dense_span(const float* value, const std::vector<const float*>& slots, const float* grad,
                                 std::size_t n, std::int64_t step, float* next_value,
                                 const std::vector<float*>& next_slots) const {
  apply_rule(config_, coefficients(config_, learning_rate(step), step), value, slots, grad, n, next_value, next_slots);
}

Status Optimizer::apply_sparse(Matrix& value, std::vector<Matrix>& slots, const RowIds& rows, const Matrix& grad,
                               std::int64_t step) const {
  TWINPS_RETURN_IF_ERROR(check_operands(value, slots, grad.cols()));
  if (static_cast<std::size_t>(grad.rows()) != rows.size())
    return absl::InvalidArgumentError("sparse gradient has " + std::to_string(grad.rows()) + " value rows for " +
                                      std::to_string(rows.size()) + " row ids");
  for (std::size_t i = 0; i < rows.size(); ++i)
    if (rows[i] < 0 || rows[i] >= value.rows())
      return absl::InvalidArgumentError("row id " + std::to_string(rows[i]) + " (index " + std::to_string(i) +
                                        ") is outside [0, " + std::to_string(value.rows()) + ")");
  if (step < 0) return absl::InvalidArgumentError("step must be >= 0, got " + std::to_string(step));

  // A worker's push comes ascending and distinct (split_sparse orders each
  // shard's rows): applied as it is, with no sort and no copy.
  SparseRows summed;
  const bool distinct = ascending_distinct(rows);
  if (!distinct) summed = sum_duplicate_rows(rows, grad);
  const RowIds& g_rows = distinct ? rows : summed.rows;
  const Matrix& g_values = distinct ? grad : summed.values;
  const Coefficients k = coefficients(config_, learning_rate(step), step);

  if (config_.kind == OptimizerConfig::Kind::kAdam && !config_.lazy_adam) {
    // Keras: m = beta_1*m for every row, then m[rows] += (1-beta_1)*g (v alike),
    // and every row's value moves by its new moments.
    Matrix& m = slots[0];
    Matrix& v = slots[1];
    m *= k.beta_1;
    v *= k.beta_2;
    for (std::size_t i = 0; i < g_rows.size(); ++i) {
      const auto r = static_cast<Eigen::Index>(g_rows[i]);
      const auto gi = g_values.row(static_cast<Eigen::Index>(i)).array();
      m.row(r).array() += (1 - k.beta_1) * gi;
      v.row(r).array() += (1 - k.beta_2) * gi.square();
    }
    value.array() -= k.adam_alpha * m.array() / (v.array().sqrt() + k.epsilon);
    return absl::OkStatus();
  }

  // Every other rule is row-wise: gather the touched rows, run the dense rule
  // on them, scatter them back. Untouched rows and their slots stay as they are.
  auto gather = [&](const Matrix& m) {
    Matrix out;
    gather_rows(m, g_rows, out);
    return out;
  };
  auto scatter = [&](const Matrix& rows, Matrix& m) {
    for (std::size_t i = 0; i < g_rows.size(); ++i)
      m.row(static_cast<Eigen::Index>(g_rows[i])) = rows.row(static_cast<Eigen::Index>(i));
  };
  Matrix touched = gather(value);
  std::vector<Matrix> touched_slots;
  touched_slots.reserve(slots.size());
  for (const Matrix& s : slots) touched_slots.push_back(gather(s));
  apply_rule(config_, k, touched, touched_slots, g_values);
  scatter(touched, value);
  for (std::size_t i = 0; i < slots.size(); ++i) scatter(touched_slots[i], slots[i]);
  return absl::OkStatus();
}

}  // namespace twinps
