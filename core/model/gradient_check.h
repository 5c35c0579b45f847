#pragma once
// A layer's backward() against central finite differences of its forward():
// the check every built-in layer passes in tests/core/layers_test.cc, for
// layers written outside core (custom layers, core/model/custom_layer.h).
//
// The loss is L = sum(out * W) for a fixed random W, so that every output
// element's gradient path is exercised; each input and parameter element x
// is moved by +-step and (L(x + step) - L(x - step)) / (2 step) compared
// with what backward() gave for it. In float32 a step of 1e-2 keeps rounding
// error (~1e-7 / 1e-2) and truncation error (~1e-4 for smooth functions) far
// below the tolerance, while a wrong gradient (a missing factor, a
// transposed term, a sign) is off by O(1).
#include <cstdint>
#include <string>
#include <vector>

#include "core/model/layers.h"
#include "core/runtime/status.h"

namespace twinps::model {

struct GradientCheckOptions {
  Eigen::Index batch = 4;  // records of the random inputs
  std::uint64_t seed = 1;  // of the random inputs, parameters and W
  // Inputs and parameters are drawn uniformly from [-scale, scale] unless
  // given here (then used as they are: e.g. away from a kink at 0).
  double scale = 1.0;
  std::vector<Matrix> inputs;
  std::vector<Matrix> params;
  float step = 1e-2f;
  // |backward - differences| <= tolerance * max(1, |differences|).
  double tolerance = 2e-3;
  bool training = false;  // forward in training mode (dropout draws one fixed mask)
};

struct GradientCheckResult {
  std::int64_t elements_checked = 0;
  // The largest |backward - differences| / max(1, |differences|) seen.
  double worst_relative_error = 0;
};

// OK with what was checked, or INVALID_ARGUMENT naming the first element
// whose gradient is off ("param 0 element 5: backward gives 0.31, finite
// differences 0.12"), or a forward whose output has the wrong shape.
StatusOr<GradientCheckResult> check_layer_gradients(const Layer& layer, const std::vector<Eigen::Index>& input_widths,
                                                    const GradientCheckOptions& options = {});

}  // namespace twinps::model
