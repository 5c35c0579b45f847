#pragma once
// A CPU cost measured at a few sizes rather than priced by one rate:
// allocation, page faults, copies and the caches make what bytes cost other
// than proportional (a push that fits a core's cache applies at several times
// the speed of one that streams from memory). `twinps calibrate` measures
// the points; the simulator interpolates between them.
#include <utility>
#include <vector>

namespace twinps::sim {

// (bytes, cost) points, increasing in bytes: the simulator keeps costs in
// ns, a calibration in us.
using CostCurve = std::vector<std::pair<double, double>>;

// The cost of `bytes` on `curve`: linear between its points, from (0, 0)
// to the first, and beyond the last by the last segment's slope; never
// negative. An empty curve costs nothing.
double curve_cost(const CostCurve& curve, double bytes);

// The cost at `x` on `curve`, held level outside it: linear between its
// points, the first point's cost before it and the last's beyond (a cost
// that settles, as a wake-up's does with the time slept). An empty curve
// costs nothing.
double level_curve_cost(const CostCurve& curve, double x);

// The sequence that never falls nearest to `y` (least squares): costs
// measured in order of what they grow with, their noise taken out.
std::vector<double> nondecreasing(const std::vector<double>& y);

}  // namespace twinps::sim
