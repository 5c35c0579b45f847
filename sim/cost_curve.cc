#include "sim/cost_curve.h"

#include <algorithm>

namespace twinps::sim {

double curve_cost(const CostCurve& curve, double bytes) {
  double x0 = 0, y0 = 0;
  for (std::size_t i = 0; i < curve.size(); ++i) {
    const auto [x1, y1] = curve[i];
    if (bytes <= x1 || i + 1 == curve.size()) return std::max(0.0, y0 + (y1 - y0) * (bytes - x0) / std::max(x1 - x0, 1.0));
    x0 = x1, y0 = y1;
  }
  return 0;
}

}  // namespace twinps::sim
