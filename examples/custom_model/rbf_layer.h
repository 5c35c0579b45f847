#pragma once
// A custom layer for twinps: radial basis functions with learned centers and
// widths. For each of `units` units j with center c_j and width gamma_j,
//
//   out[b, j] = exp(-gamma_j * ||x_b - c_j||^2)
//
// Its variables are "<layer>/centers" [units x input width] and
// "<layer>/log_gamma" [units] (gamma_j = exp(log_gamma_j), so the width
// stays positive whatever the optimizer does). Spec parameters:
//
//   units         required, >= 1
//   center_range  centers start uniform in [-range, range] (default 1)
//   initial_gamma gamma's starting value, > 0 (default 1)
//
// It is registered under the type "rbf" by register_rbf_layer(); a spec uses
// it as `custom { type: "rbf" param { name: "units" number: 8 } }`.
#include "core/model/custom_layer.h"

namespace custom_model {

class RbfLayer final : public twinps::model::Layer {
 public:
  RbfLayer(Eigen::Index inputs, Eigen::Index units) : inputs_(inputs), units_(units) {}

  std::string_view kind() const override { return "rbf"; }
  Eigen::Index output_width() const override { return units_; }
  std::vector<twinps::Shape> param_shapes() const override { return {{units_, inputs_}, {units_}}; }

  void forward(std::span<const twinps::Matrix* const> inputs, std::span<const twinps::Matrix* const> params,
               twinps::Matrix& out, twinps::model::Saved& saved, const twinps::model::ForwardMode& mode) const override;
  void backward(std::span<const twinps::Matrix* const> inputs, std::span<const twinps::Matrix* const> params,
                const twinps::Matrix& out, const twinps::Matrix& dout, const twinps::model::Saved& saved,
                std::span<twinps::Matrix* const> dinputs, std::span<twinps::Matrix> dparams) const override;

  double forward_flops(std::int64_t batch) const override;
  double backward_flops(std::int64_t batch) const override { return 2 * forward_flops(batch); }

 private:
  Eigen::Index inputs_, units_;
};

// Registers RbfLayer as the custom layer type "rbf", once: every call
// returns the first one's status (ALREADY_EXISTS when another "rbf" was
// registered before). Call before loading a spec that uses it.
twinps::Status register_rbf_layer();

}  // namespace custom_model
