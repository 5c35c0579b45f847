#include "core/model/layers.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include <absl/container/flat_hash_map.h>

namespace twinps::model {

// ---------------------------------------------------------------- Dense

std::vector<Shape> DenseLayer::param_shapes() const {
  std::vector<Shape> shapes{{in_, units_}};
  if (use_bias_) shapes.push_back({units_});
  return shapes;
}

void DenseLayer::forward(std::span<const Matrix* const> inputs, std::span<const Matrix* const> params, Matrix& out,
                         Saved&, const ForwardMode&) const {
  out.noalias() = *inputs[0] * *params[0];
  if (use_bias_) out.rowwise() += params[1]->col(0).transpose();  // the bias is stored [units x 1]
  switch (activation_) {
    case Activation::kNone: break;
    case Activation::kRelu: out = out.cwiseMax(0.0f); break;
    case Activation::kSigmoid: out = (1.0f + (-out.array()).exp()).inverse().matrix(); break;
    case Activation::kTanh: out = out.array().tanh().matrix(); break;
  }
}

void DenseLayer::backward(std::span<const Matrix* const> inputs, std::span<const Matrix* const> params,
                          const Matrix& out, const Matrix& dout, const Saved&, std::span<Matrix* const> dinputs,
                          std::span<Matrix> dparams) const {
  // dz = dout * activation'(z), written with the output (which the
  // activation's derivative can be expressed in, so nothing else is kept).
  Matrix dz;
  switch (activation_) {
    case Activation::kNone: dz = dout; break;
    case Activation::kRelu: dz = (out.array() > 0.0f).select(dout, 0.0f); break;
    case Activation::kSigmoid: dz = (dout.array() * out.array() * (1.0f - out.array())).matrix(); break;
    case Activation::kTanh: dz = (dout.array() * (1.0f - out.array().square())).matrix(); break;
  }
  dparams[0].noalias() = inputs[0]->transpose() * dz;
  if (use_bias_) dparams[1] = dz.colwise().sum().transpose();
  if (dinputs[0] != nullptr) dinputs[0]->noalias() += dz * params[0]->transpose();
}

double DenseLayer::forward_flops(std::int64_t batch) const {
  const double b = static_cast<double>(batch), in = static_cast<double>(in_), units = static_cast<double>(units_);
  return 2 * b * in * units + (use_bias_ ? b * units : 0) + (activation_ != Activation::kNone ? b * units : 0);
}

double DenseLayer::backward_flops(std::int64_t batch) const {
  // dW = x^T dz and dx = dz W^T, plus the bias's column sums and dz.
  const double b = static_cast<double>(batch), in = static_cast<double>(in_), units = static_cast<double>(units_);
  return 4 * b * in * units + 2 * b * units;
}

// ---------------------------------------------------------------- Concatenate

ConcatenateLayer::ConcatenateLayer(std::vector<Eigen::Index> widths) : widths_(std::move(widths)) {
  for (auto w : widths_) width_ += w;
}

void ConcatenateLayer::forward(std::span<const Matrix* const> inputs, std::span<const Matrix* const>, Matrix& out,
                               Saved&, const ForwardMode&) const {
  out.resize(inputs[0]->rows(), width_);
  Eigen::Index col = 0;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    out.middleCols(col, widths_[k]) = *inputs[k];
    col += widths_[k];
  }
}

void ConcatenateLayer::backward(std::span<const Matrix* const>, std::span<const Matrix* const>, const Matrix&,
                                const Matrix& dout, const Saved&, std::span<Matrix* const> dinputs,
                                std::span<Matrix>) const {
  Eigen::Index col = 0;
  for (std::size_t k = 0; k < dinputs.size(); ++k) {
    if (dinputs[k] != nullptr) *dinputs[k] += dout.middleCols(col, widths_[k]);
    col += widths_[k];
  }
}

// ---------------------------------------------------------------- Add

void AddLayer::forward(std::span<const Matrix* const> inputs, std::span<const Matrix* const>, Matrix& out, Saved&,
                       const ForwardMode&) const {
  out = *inputs[0];
  for (std::size_t k = 1; k < inputs.size(); ++k) out += *inputs[k];
}

void AddLayer::backward(std::span<const Matrix* const>, std::span<const Matrix* const>, const Matrix&,
                        const Matrix& dout, const Saved&, std::span<Matrix* const> dinputs,
                        std::span<Matrix>) const {
  for (Matrix* d : dinputs)
    if (d != nullptr) *d += dout;
}

// ---------------------------------------------------------------- Dropout

void DropoutLayer::forward(std::span<const Matrix* const> inputs, std::span<const Matrix* const>, Matrix& out,
                           Saved& saved, const ForwardMode& mode) const {
  if (!mode.training || rate_ == 0) {
    out = *inputs[0];
    saved.clear();
    return;
  }
  const float keep = 1.0f - rate_;
  Matrix mask(inputs[0]->rows(), inputs[0]->cols());
  for (Eigen::Index i = 0; i < mask.size(); ++i) mask.data()[i] = mode.random->uniform() < keep ? 1.0f / keep : 0.0f;
  out = inputs[0]->cwiseProduct(mask);
  saved.assign(1, std::move(mask));
}

void DropoutLayer::backward(std::span<const Matrix* const>, std::span<const Matrix* const>, const Matrix&,
                            const Matrix& dout, const Saved& saved, std::span<Matrix* const> dinputs,
                            std::span<Matrix>) const {
  if (dinputs[0] == nullptr) return;
  if (saved.empty()) {
    *dinputs[0] += dout;
  } else {
    *dinputs[0] += dout.cwiseProduct(saved[0]);
  }
}

// ---------------------------------------------------------------- DotInteraction

DotInteractionLayer::DotInteractionLayer(int inputs, Eigen::Index dim, bool self_interaction) : dim_(dim) {
  for (int i = 0; i < inputs; ++i)
    for (int j = self_interaction ? i : i + 1; j < inputs; ++j) pairs_.emplace_back(i, j);
}

void DotInteractionLayer::forward(std::span<const Matrix* const> inputs, std::span<const Matrix* const>,
                                  Matrix& out, Saved&, const ForwardMode&) const {
  // Pair by pair into a [pairs x batch] block (each pair's results
  // contiguous), then transposed: writing columns of the row-major output
  // directly would touch a cache line per record per pair.
  Matrix by_pair(output_width(), inputs[0]->rows());
  for (std::size_t k = 0; k < pairs_.size(); ++k) {
    const auto [i, j] = pairs_[k];
    by_pair.row(static_cast<Eigen::Index>(k)) = inputs[i]->cwiseProduct(*inputs[j]).rowwise().sum().transpose();
  }
  out = by_pair.transpose();
}

void DotInteractionLayer::backward(std::span<const Matrix* const> inputs, std::span<const Matrix* const>,
                                   const Matrix&, const Matrix& dout, const Saved&,
                                   std::span<Matrix* const> dinputs, std::span<Matrix>) const {
  // d(x_i . x_j)/dx_i = x_j, per record, scaled by that record's dout. Each
  // pair reads one column of dout: transposed once, those are contiguous.
  const Matrix by_pair = dout.transpose();
  for (std::size_t k = 0; k < pairs_.size(); ++k) {
    const auto [i, j] = pairs_[k];
    const auto g = by_pair.row(static_cast<Eigen::Index>(k)).transpose();
    if (dinputs[i] != nullptr) dinputs[i]->array() += inputs[j]->array().colwise() * g.array();
    if (dinputs[j] != nullptr) dinputs[j]->array() += inputs[i]->array().colwise() * g.array();
  }
}

double DotInteractionLayer::forward_flops(std::int64_t batch) const {
  return 2 * static_cast<double>(batch) * static_cast<double>(pairs_.size()) * static_cast<double>(dim_);
}

// ---------------------------------------------------------------- Embedding

EmbeddingLayer::Lookup EmbeddingLayer::plan(const IdBags& bags) {
  Lookup lookup;
  lookup.slot.reserve(bags.ids.size());
  // A hash map, not an ordered one: this runs for every embedding of every
  // step; with a tree (a node per distinct id) it took the ctr example's
  // worker 1.0 of 4.4 ms a step in-process, with this 0.18.
  absl::flat_hash_map<std::int64_t, std::int64_t> slot_of;
  slot_of.reserve(bags.ids.size());
  for (std::int64_t id : bags.ids) {
    auto [it, inserted] = slot_of.emplace(id, static_cast<std::int64_t>(lookup.rows.size()));
    if (inserted) lookup.rows.push_back(id);
    lookup.slot.push_back(it->second);
  }
  // The rows ascending, so the plan is the same on every run whatever the
  // map's own order, and so that what the step does with them next costs no
  // sort of its own: routing the pull to shards (plan_lookup) and cutting the
  // gradient's rows into shards (split_sparse) take ascending distinct ids in
  // one pass. Sorting here once took the ctr example's workers from two sorts
  // and a binary search per id to one sort (docs/fidelity.md).
  if (!std::is_sorted(lookup.rows.begin(), lookup.rows.end())) {
    std::vector<std::pair<std::int64_t, std::int64_t>> by_id;  // (id, its slot in first-seen order)
    by_id.reserve(lookup.rows.size());
    for (std::size_t i = 0; i < lookup.rows.size(); ++i) by_id.emplace_back(lookup.rows[i], static_cast<std::int64_t>(i));
    std::sort(by_id.begin(), by_id.end());
    std::vector<std::int64_t> new_slot(by_id.size());
    for (std::size_t i = 0; i < by_id.size(); ++i) {
      lookup.rows[i] = by_id[i].first;
      new_slot[static_cast<std::size_t>(by_id[i].second)] = static_cast<std::int64_t>(i);
    }
    for (std::int64_t& s : lookup.slot) s = new_slot[static_cast<std::size_t>(s)];
  }
  return lookup;
}

float EmbeddingLayer::scale(const IdBags& bags, std::int64_t r) const {
  if (combiner_ == Combiner::kSum) return 1.0f;
  const auto begin = bags.offsets[static_cast<std::size_t>(r)], end = bags.offsets[static_cast<std::size_t>(r) + 1];
  double total = 0;
  for (auto i = begin; i < end; ++i) {
    const double w = bags.weights.empty() ? 1.0 : bags.weights[static_cast<std::size_t>(i)];
    total += combiner_ == Combiner::kMean ? w : w * w;
  }
  if (combiner_ == Combiner::kSqrtn) total = std::sqrt(total);
  return total > 0 ? static_cast<float>(1.0 / total) : 0.0f;
}

void EmbeddingLayer::forward(const IdBags& bags, const Lookup& lookup, const Matrix& rows, Matrix& out) const {
  const std::int64_t n = bags.records();
  out = Matrix::Zero(n, dim_);
  for (std::int64_t r = 0; r < n; ++r) {
    const float s = scale(bags, r);
    for (auto i = bags.offsets[static_cast<std::size_t>(r)]; i < bags.offsets[static_cast<std::size_t>(r) + 1]; ++i) {
      const float w = bags.weights.empty() ? 1.0f : bags.weights[static_cast<std::size_t>(i)];
      out.row(r) += (w * s) * rows.row(lookup.slot[static_cast<std::size_t>(i)]);
    }
  }
}

void EmbeddingLayer::backward(const IdBags& bags, const Lookup& lookup, const Matrix& dout, Matrix& drows) const {
  drows = Matrix::Zero(static_cast<Eigen::Index>(lookup.rows.size()), dim_);
  for (std::int64_t r = 0; r < bags.records(); ++r) {
    const float s = scale(bags, r);
    for (auto i = bags.offsets[static_cast<std::size_t>(r)]; i < bags.offsets[static_cast<std::size_t>(r) + 1]; ++i) {
      const float w = bags.weights.empty() ? 1.0f : bags.weights[static_cast<std::size_t>(i)];
      drows.row(lookup.slot[static_cast<std::size_t>(i)]) += (w * s) * dout.row(r);
    }
  }
}

}  // namespace twinps::model
