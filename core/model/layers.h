#pragma once
// The layers a model spec composes, each with its forward and its backward
// written once; a model graph (core/model/graph.h) chains them, so no model
// ever has a hand-derived gradient of its own. Every layer's backward is
// checked against finite differences in tests/core/layers_test.cc.
//
// Activations are [batch x width] row-major float matrices (core's Matrix).
// Layers are immutable after construction and keep nothing between calls:
// what a forward pass leaves for its backward goes into the caller's
// `Saved`, so one layer object serves every worker thread at once.
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "core/runtime/random.h"
#include "core/tensor/tensor.h"

namespace twinps::model {

// What a forward pass keeps for its backward (a dropout mask ...).
using Saved = std::vector<Matrix>;

struct ForwardMode {
  bool training = false;
  // Draws of training-only randomness (dropout); required when training.
  RandomStream* random = nullptr;
};

// A layer from matrices to a matrix, with parameters (kernel, bias) passed in
// as values pulled for this step.
class Layer {
 public:
  virtual ~Layer() = default;
  virtual std::string_view kind() const = 0;
  virtual Eigen::Index output_width() const = 0;
  // Shapes of the parameters forward() and backward() take, in order.
  virtual std::vector<Shape> param_shapes() const { return {}; }

  // out = f(inputs; params). `inputs` are [batch x width_i], all with the
  // same batch; `out` is resized.
  virtual void forward(std::span<const Matrix* const> inputs, std::span<const Matrix* const> params, Matrix& out,
                       Saved& saved, const ForwardMode& mode) const = 0;

  // Given dout = dL/d(out): adds dL/d(inputs[k]) into *dinputs[k] (already
  // sized like the input; null where no gradient is wanted) and writes
  // dL/d(params[j]) into dparams[j] (resized).
  virtual void backward(std::span<const Matrix* const> inputs, std::span<const Matrix* const> params,
                        const Matrix& out, const Matrix& dout, const Saved& saved,
                        std::span<Matrix* const> dinputs, std::span<Matrix> dparams) const = 0;

  // Floating-point operations of forward() and of backward() on `batch`
  // records (multiply and add counted separately), for cost models.
  virtual double forward_flops(std::int64_t batch) const = 0;
  virtual double backward_flops(std::int64_t batch) const = 0;
};

enum class Activation { kNone, kRelu, kSigmoid, kTanh };

// activation(x W + b). Params: kernel [in x units], then bias [units] if used.
class DenseLayer final : public Layer {
 public:
  DenseLayer(Eigen::Index in, Eigen::Index units, Activation activation, bool use_bias)
      : in_(in), units_(units), activation_(activation), use_bias_(use_bias) {}
  std::string_view kind() const override { return "dense"; }
  Eigen::Index output_width() const override { return units_; }
  std::vector<Shape> param_shapes() const override;
  void forward(std::span<const Matrix* const> inputs, std::span<const Matrix* const> params, Matrix& out,
               Saved& saved, const ForwardMode& mode) const override;
  void backward(std::span<const Matrix* const> inputs, std::span<const Matrix* const> params, const Matrix& out,
                const Matrix& dout, const Saved& saved, std::span<Matrix* const> dinputs,
                std::span<Matrix> dparams) const override;
  double forward_flops(std::int64_t batch) const override;
  double backward_flops(std::int64_t batch) const override;

 private:
  Eigen::Index in_, units_;
  Activation activation_;
  bool use_bias_;
};

// Inputs side by side.
class ConcatenateLayer final : public Layer {
 public:
  explicit ConcatenateLayer(std::vector<Eigen::Index> widths);
  std::string_view kind() const override { return "concatenate"; }
  Eigen::Index output_width() const override { return width_; }
  void forward(std::span<const Matrix* const> inputs, std::span<const Matrix* const> params, Matrix& out,
               Saved& saved, const ForwardMode& mode) const override;
  void backward(std::span<const Matrix* const> inputs, std::span<const Matrix* const> params, const Matrix& out,
                const Matrix& dout, const Saved& saved, std::span<Matrix* const> dinputs,
                std::span<Matrix> dparams) const override;
  double forward_flops(std::int64_t) const override { return 0; }
  double backward_flops(std::int64_t) const override { return 0; }

 private:
  std::vector<Eigen::Index> widths_;
  Eigen::Index width_ = 0;
};

// Elementwise sum of inputs of one width.
class AddLayer final : public Layer {
 public:
  AddLayer(int inputs, Eigen::Index width) : inputs_(inputs), width_(width) {}
  std::string_view kind() const override { return "add"; }
  Eigen::Index output_width() const override { return width_; }
  void forward(std::span<const Matrix* const> inputs, std::span<const Matrix* const> params, Matrix& out,
               Saved& saved, const ForwardMode& mode) const override;
  void backward(std::span<const Matrix* const> inputs, std::span<const Matrix* const> params, const Matrix& out,
                const Matrix& dout, const Saved& saved, std::span<Matrix* const> dinputs,
                std::span<Matrix> dparams) const override;
  double forward_flops(std::int64_t batch) const override {
    return static_cast<double>(batch) * static_cast<double>(width_) * (inputs_ - 1);
  }
  double backward_flops(std::int64_t batch) const override {
    return static_cast<double>(batch) * static_cast<double>(width_) * inputs_;
  }

 private:
  int inputs_;
  Eigen::Index width_;
};

// Inverted dropout while training (saved[0] is the scaled mask); identity otherwise.
class DropoutLayer final : public Layer {
 public:
  DropoutLayer(float rate, Eigen::Index width) : rate_(rate), width_(width) {}
  std::string_view kind() const override { return "dropout"; }
  Eigen::Index output_width() const override { return width_; }
  void forward(std::span<const Matrix* const> inputs, std::span<const Matrix* const> params, Matrix& out,
               Saved& saved, const ForwardMode& mode) const override;
  void backward(std::span<const Matrix* const> inputs, std::span<const Matrix* const> params, const Matrix& out,
                const Matrix& dout, const Saved& saved, std::span<Matrix* const> dinputs,
                std::span<Matrix> dparams) const override;
  double forward_flops(std::int64_t batch) const override { return static_cast<double>(batch) * static_cast<double>(width_); }
  double backward_flops(std::int64_t batch) const override { return static_cast<double>(batch) * static_cast<double>(width_); }

 private:
  float rate_;
  Eigen::Index width_;
};

// DLRM's pairwise dot products of n inputs of width d: pairs (i, j), i < j
// (i <= j with self_interaction), in row-major order of i then j.
class DotInteractionLayer final : public Layer {
 public:
  DotInteractionLayer(int inputs, Eigen::Index dim, bool self_interaction);
  std::string_view kind() const override { return "dot_interaction"; }
  Eigen::Index output_width() const override { return static_cast<Eigen::Index>(pairs_.size()); }
  void forward(std::span<const Matrix* const> inputs, std::span<const Matrix* const> params, Matrix& out,
               Saved& saved, const ForwardMode& mode) const override;
  void backward(std::span<const Matrix* const> inputs, std::span<const Matrix* const> params, const Matrix& out,
                const Matrix& dout, const Saved& saved, std::span<Matrix* const> dinputs,
                std::span<Matrix> dparams) const override;
  double forward_flops(std::int64_t batch) const override;
  double backward_flops(std::int64_t batch) const override { return 2 * forward_flops(batch); }

 private:
  Eigen::Index dim_;
  std::vector<std::pair<int, int>> pairs_;
};

// ---------------------------------------------------------------- embeddings

// The ids of a batch, ragged: record r's ids are ids[offsets[r] ..
// offsets[r + 1]), each with a weight (weights empty: all 1).
struct IdBags {
  RowIds ids;
  std::vector<float> weights;
  std::vector<std::int64_t> offsets = {0};
  std::int64_t records() const { return static_cast<std::int64_t>(offsets.size()) - 1; }
};

enum class Combiner { kMean, kSum, kSqrtn };

// Looks up and combines each record's bag of rows. It works on the distinct
// rows of the batch only: plan() lists them once each, the step pulls just
// those rows from the parameter servers, and backward() gives one gradient
// row per distinct row, so a sparse push carries each touched row once.
class EmbeddingLayer {
 public:
  EmbeddingLayer(Eigen::Index dim, Combiner combiner) : dim_(dim), combiner_(combiner) {}
  Eigen::Index output_width() const { return dim_; }
  Combiner combiner() const { return combiner_; }

  struct Lookup {
    RowIds rows;                    // the distinct ids, ascending
    std::vector<std::int64_t> slot;  // for each id of the bags, its index in `rows`
  };
  static Lookup plan(const IdBags& bags);

  // out[r] = combine(weights * rows[slot]) over record r's ids; zeros for an
  // empty bag (or weights summing to 0 under MEAN/SQRTN).
  void forward(const IdBags& bags, const Lookup& lookup, const Matrix& rows, Matrix& out) const;
  // drows = dL/d(rows), [lookup.rows.size() x dim].
  void backward(const IdBags& bags, const Lookup& lookup, const Matrix& dout, Matrix& drows) const;

  double forward_flops(double ids) const { return 2 * ids * static_cast<double>(dim_); }
  double backward_flops(double ids) const { return 2 * ids * static_cast<double>(dim_); }

 private:
  // The factor each of record r's weights is scaled by (1 for SUM).
  float scale(const IdBags& bags, std::int64_t r) const;
  Eigen::Index dim_;
  Combiner combiner_;
};

}  // namespace twinps::model
