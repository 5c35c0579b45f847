#include "rbf_layer.h"

#include <cmath>

namespace custom_model {

using twinps::Matrix;

namespace {

// ||x_b - c_j||^2 for every record b and unit j: [batch x units].
Matrix squared_distances(const Matrix& x, const Matrix& centers) {
  const Eigen::VectorXf x_norms = x.rowwise().squaredNorm();
  const Eigen::RowVectorXf c_norms = centers.rowwise().squaredNorm().transpose();
  Matrix d = -2.0f * (x * centers.transpose());
  d.colwise() += x_norms;
  d.rowwise() += c_norms;
  return d.cwiseMax(0.0f);  // rounding can make a tiny distance negative
}

// gamma_j = exp(log_gamma_j) as a row: [1 x units].
Eigen::RowVectorXf gammas(const Matrix& log_gamma) {
  return log_gamma.col(0).array().exp().matrix().transpose();
}

}  // namespace

void RbfLayer::forward(std::span<const Matrix* const> inputs, std::span<const Matrix* const> params, Matrix& out,
                       twinps::model::Saved& saved, const twinps::model::ForwardMode&) const {
  const Matrix& x = *inputs[0];
  const Matrix& centers = *params[0];
  const Eigen::RowVectorXf gamma = gammas(*params[1]);
  Matrix distances = squared_distances(x, centers);
  out = (-(distances.array().rowwise() * gamma.array())).exp().matrix();
  // The distances are what backward needs besides the output.
  saved.assign(1, std::move(distances));
}

void RbfLayer::backward(std::span<const Matrix* const> inputs, std::span<const Matrix* const> params,
                        const Matrix& out, const Matrix& dout, const twinps::model::Saved& saved,
                        std::span<Matrix* const> dinputs, std::span<Matrix> dparams) const {
  const Matrix& x = *inputs[0];
  const Matrix& centers = *params[0];
  const Eigen::RowVectorXf gamma = gammas(*params[1]);
  const Matrix& distances = saved[0];
  // dL/d(distance[b, j]) = dout * out * (-gamma_j).
  const Matrix g = dout.cwiseProduct(out);
  const Matrix ddist = -(g.array().rowwise() * gamma.array()).matrix();
  // d(distance[b, j])/dx_b = 2 (x_b - c_j); d/dc_j = -2 (x_b - c_j).
  const Eigen::VectorXf ddist_rows = ddist.rowwise().sum();
  const Eigen::RowVectorXf ddist_cols = ddist.colwise().sum();
  if (dinputs[0] != nullptr) {
    Matrix dx = x;
    dx.array().colwise() *= ddist_rows.array();
    *dinputs[0] += 2.0f * (dx - ddist * centers);
  }
  Matrix dcenters = centers;
  dcenters.array().colwise() *= ddist_cols.transpose().array();
  dparams[0] = -2.0f * (ddist.transpose() * x - dcenters);
  // d(out[b, j])/d(log_gamma_j) = out * (-distance) * gamma_j.
  const Eigen::RowVectorXf dgamma =
      (g.array() * distances.array()).colwise().sum().matrix().cwiseProduct(gamma) * -1.0f;
  dparams[1] = dgamma.transpose();
}

double RbfLayer::forward_flops(std::int64_t batch) const {
  // x c^T (2 per multiply-add), the norms, and the exponent per output.
  return static_cast<double>(batch) * static_cast<double>(units_) * (2.0 * static_cast<double>(inputs_) + 4.0);
}

twinps::Status register_rbf_layer() {
  static const twinps::Status registered = [] {
    return twinps::model::register_custom_layer(
        "rbf", [](const twinps::model::CustomLayerArgs& args) -> twinps::StatusOr<twinps::model::CustomLayerBuild> {
          if (args.input_widths.size() != 1)
            return absl::InvalidArgumentError("an rbf layer reads 1 input, got " +
                                              std::to_string(args.input_widths.size()));
          auto units = args.params.integer("units");
          if (!units.ok()) return units.status();
          auto range = args.params.number("center_range", 1.0);
          if (!range.ok()) return range.status();
          auto gamma = args.params.number("initial_gamma", 1.0);
          if (!gamma.ok()) return gamma.status();
          if (!(*range > 0)) return absl::InvalidArgumentError("param \"center_range\": must be > 0");
          if (!(*gamma > 0)) return absl::InvalidArgumentError("param \"initial_gamma\": must be > 0");
          const Eigen::Index in = args.input_widths[0];
          twinps::model::CustomLayerBuild build;
          build.layer = std::make_unique<RbfLayer>(in, *units);
          build.variables = {{"centers", {*units, in}, twinps::Initializer::uniform(-*range, *range)},
                             {"log_gamma", {*units}, twinps::Initializer::constant(std::log(*gamma))}};
          return build;
        });
  }();
  return registered;
}

}  // namespace custom_model
