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

double level_curve_cost(const CostCurve& curve, double x) {
  if (curve.empty()) return 0;
  if (x <= curve.front().first) return std::max(0.0, curve.front().second);
  if (x >= curve.back().first) return std::max(0.0, curve.back().second);
  return curve_cost(curve, x);  // between two points: that segment's line
}

// Adjacent points that fall are pooled into their mean (pool adjacent
// violators), as often as it takes.
std::vector<double> nondecreasing(const std::vector<double>& y) {
  std::vector<std::pair<double, int>> blocks;  // (mean, points)
  for (double v : y) {
    blocks.emplace_back(v, 1);
    while (blocks.size() > 1 && blocks[blocks.size() - 2].first > blocks.back().first) {
      auto [mean, n] = blocks.back();
      blocks.pop_back();
      auto& before = blocks.back();
      before.first = (before.first * before.second + mean * n) / (before.second + n);
      before.second += n;
    }
  }
  std::vector<double> out;
  for (const auto& [mean, n] : blocks) out.insert(out.end(), static_cast<std::size_t>(n), mean);
  return out;
}

}  // namespace twinps::sim
