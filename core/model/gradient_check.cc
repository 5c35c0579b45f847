#include "core/model/gradient_check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/runtime/random.h"

namespace twinps::model {

namespace {

Matrix random_matrix(Eigen::Index rows, Eigen::Index cols, RandomStream& r, double scale) {
  Matrix m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = static_cast<float>(r.uniform(-scale, scale));
  return m;
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

class Check {
 public:
  Check(const Layer& layer, std::vector<Matrix> inputs, std::vector<Matrix> params, bool training, std::uint64_t seed)
      : layer_(layer), inputs_(std::move(inputs)), params_(std::move(params)), training_(training), seed_(seed) {}

  // L = sum(out * weights), with the layer's randomness drawn the same every time.
  double loss() {
    Matrix out;
    Saved saved;
    forward(out, saved);
    return (out.cast<double>().array() * weights_.cast<double>().array()).sum();
  }

  StatusOr<GradientCheckResult> run(float step, double tolerance) {
    Matrix out;
    Saved saved;
    forward(out, saved);
    const Eigen::Index batch = inputs_.at(0).rows();
    if (out.rows() != batch || out.cols() != layer_.output_width())
      return absl::InvalidArgumentError("forward() gave a " + std::to_string(out.rows()) + " x " +
                                        std::to_string(out.cols()) + " output for " + std::to_string(batch) +
                                        " records; expected " + std::to_string(batch) + " x " +
                                        std::to_string(layer_.output_width()));
    RandomStream w(RandomStream(seed_).fork("weights"));
    weights_ = random_matrix(out.rows(), out.cols(), w, 1.0);

    std::vector<Matrix> dinputs;
    for (auto& x : inputs_) dinputs.push_back(Matrix::Zero(x.rows(), x.cols()));
    std::vector<Matrix*> dinput_ptrs;
    for (auto& d : dinputs) dinput_ptrs.push_back(&d);
    std::vector<Matrix> dparams(params_.size());
    layer_.backward(pointers(inputs_), pointers(params_), out, weights_, saved, dinput_ptrs, dparams);

    GradientCheckResult result;
    for (std::size_t k = 0; k < inputs_.size(); ++k)
      TWINPS_RETURN_IF_ERROR(compare("input " + std::to_string(k), inputs_[k], dinputs[k], step, tolerance, result));
    for (std::size_t j = 0; j < params_.size(); ++j)
      TWINPS_RETURN_IF_ERROR(compare("param " + std::to_string(j), params_[j], dparams[j], step, tolerance, result));
    return result;
  }

 private:
  static std::vector<const Matrix*> pointers(const std::vector<Matrix>& ms) {
    std::vector<const Matrix*> out;
    for (const auto& m : ms) out.push_back(&m);
    return out;
  }

  void forward(Matrix& out, Saved& saved) {
    RandomStream random(RandomStream(seed_).fork("layer"));  // one mask for every evaluation
    ForwardMode mode;
    mode.training = training_;
    mode.random = &random;
    layer_.forward(pointers(inputs_), pointers(params_), out, saved, mode);
  }

  Status compare(const std::string& what, Matrix& x, const Matrix& analytic, float step, double tolerance,
                 GradientCheckResult& result) {
    if (analytic.rows() != x.rows() || analytic.cols() != x.cols())
      return absl::InvalidArgumentError(what + ": backward() gave a " + std::to_string(analytic.rows()) + " x " +
                                        std::to_string(analytic.cols()) + " gradient for a " +
                                        std::to_string(x.rows()) + " x " + std::to_string(x.cols()) + " value");
    for (Eigen::Index i = 0; i < x.size(); ++i) {
      const float saved = x.data()[i];
      x.data()[i] = saved + step;
      const double up = loss();
      x.data()[i] = saved - step;
      const double down = loss();
      x.data()[i] = saved;
      const double numeric = (up - down) / (2.0 * static_cast<double>(step));
      const double error = std::abs(static_cast<double>(analytic.data()[i]) - numeric) / std::max(1.0, std::abs(numeric));
      ++result.elements_checked;
      result.worst_relative_error = std::max(result.worst_relative_error, error);
      if (!(error <= tolerance))
        return absl::InvalidArgumentError(what + " element " + std::to_string(i) + ": backward gives " +
                                          number(analytic.data()[i]) + ", finite differences " + number(numeric) +
                                          " (relative error " + number(error) + " > " + number(tolerance) + ")");
    }
    return absl::OkStatus();
  }

  const Layer& layer_;
  std::vector<Matrix> inputs_, params_;
  bool training_;
  std::uint64_t seed_;
  Matrix weights_;
};

}  // namespace

StatusOr<GradientCheckResult> check_layer_gradients(const Layer& layer, const std::vector<Eigen::Index>& input_widths,
                                                    const GradientCheckOptions& options) {
  if (input_widths.empty()) return absl::InvalidArgumentError("a layer reads at least one input");
  RandomStream random(RandomStream(options.seed).fork("values"));
  std::vector<Matrix> inputs = options.inputs;
  if (inputs.empty())
    for (Eigen::Index width : input_widths) inputs.push_back(random_matrix(options.batch, width, random, options.scale));
  if (inputs.size() != input_widths.size())
    return absl::InvalidArgumentError(std::to_string(inputs.size()) + " inputs given for " +
                                      std::to_string(input_widths.size()) + " widths");
  std::vector<Matrix> params = options.params;
  const std::vector<Shape> shapes = layer.param_shapes();
  if (params.empty())
    for (const Shape& s : shapes)
      params.push_back(random_matrix(static_cast<Eigen::Index>(storage_rows(s)),
                                     static_cast<Eigen::Index>(storage_cols(s)), random, options.scale));
  if (params.size() != shapes.size())
    return absl::InvalidArgumentError(std::to_string(params.size()) + " parameters given; the layer takes " +
                                      std::to_string(shapes.size()));
  return Check(layer, std::move(inputs), std::move(params), options.training, options.seed)
      .run(options.step, options.tolerance);
}

}  // namespace twinps::model
