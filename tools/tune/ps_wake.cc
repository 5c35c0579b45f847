#include "tools/tune/ps_wake.h"

#include <algorithm>

namespace twinps::cli {

std::optional<double> awake_price_us(const PsPerCall& one, const PsPerCall& two, double* woke_share) {
  *woke_share = one.sleeps > 0 ? std::min(1.0, two.sleeps / one.sleeps) : 1.0;
  if (*woke_share > 0.9) return std::nullopt;
  return std::max(0.1, (two.ps_us - *woke_share * one.ps_us) / (1 - *woke_share));
}

sim::CostCurve idle_price_curve(const std::vector<PsPerCall>& paced, double per_request_us) {
  if (paced.size() < 2) return {};
  std::vector<std::pair<double, double>> points;  // (idle us, price us)
  for (const PsPerCall& c : paced)
    points.emplace_back(std::max(0.0, c.period_us - c.ps_us), per_request_us + c.ps_us - paced.front().ps_us);
  std::stable_sort(points.begin(), points.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<double> prices;
  for (const auto& p : points) prices.push_back(p.second);
  prices = sim::nondecreasing(prices);
  sim::CostCurve curve;
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (!curve.empty() && !(points[i].first > curve.back().first)) continue;  // the same idle: the first
    curve.emplace_back(points[i].first, std::max(0.1, prices[i]));
  }
  return curve;
}

}  // namespace twinps::cli
