#include "tools/tune/kernel_fit.h"

#include <Eigen/Dense>

#include "tools/cli.h"

namespace twinps::cli {

namespace {

// Least squares in relative terms: the coefficients b minimising the sum of
// ((X b - y) / y)^2.
std::vector<double> least_squares(const std::vector<std::vector<double>>& x, const std::vector<double>& y) {
  Eigen::MatrixXd a(static_cast<Eigen::Index>(x.size()), static_cast<Eigen::Index>(x.at(0).size()));
  Eigen::VectorXd b(static_cast<Eigen::Index>(y.size()));
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double w = y[i] > 0 ? 1 / y[i] : 1;
    for (std::size_t j = 0; j < x[i].size(); ++j)
      a(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) = w * x[i][j];
    b(static_cast<Eigen::Index>(i)) = w * y[i];
  }
  const Eigen::VectorXd coef = a.colPivHouseholderQr().solve(b);
  return std::vector<double>(coef.data(), coef.data() + coef.size());
}

}  // namespace

std::vector<double> nonnegative_least_squares(const std::vector<std::vector<double>>& x, const std::vector<double>& y) {
  const std::size_t k = x.at(0).size();
  std::vector<bool> used(k, true);
  for (std::size_t j = 0; j < k; ++j) {  // a regressor absent from every row has nothing to fit
    bool seen = false;
    for (const auto& row : x) seen |= row[j] != 0;
    used[j] = seen;
  }
  for (std::size_t round = 0; round < k; ++round) {
    std::vector<std::size_t> cols;
    for (std::size_t j = 0; j < k; ++j)
      if (used[j]) cols.push_back(j);
    if (cols.empty()) break;
    std::vector<std::vector<double>> xs;
    for (const auto& row : x) {
      std::vector<double> r;
      for (std::size_t j : cols) r.push_back(row[j]);
      xs.push_back(std::move(r));
    }
    const auto fit = least_squares(xs, y);
    std::vector<double> out(k, 0);
    bool negative = false;
    for (std::size_t i = 0; i < cols.size(); ++i) {
      out[cols[i]] = fit[i];
      if (fit[i] < 0) {
        used[cols[i]] = false;
        negative = true;
      }
    }
    if (!negative) return out;
  }
  return std::vector<double>(k, 0);
}

void fit_kernel_kind(const std::string& kind, const std::vector<KernelSample>& samples, scenario::CostProfile& p,
                     std::string* report) {
  std::vector<std::vector<double>> x;
  std::vector<double> y;
  *report += format("kernels of kind \"%s\":\n", kind.c_str());
  for (const KernelSample& s : samples) {
    const KernelWork& w = s.work;
    x.push_back({1.0, w.flops / 1e9, w.bytes / (1 << 30), w.inputs / 1e9, w.records});
    y.push_back(s.seconds);
    *report += format("  %-40s %9.5f GFLOP %8.1f KiB %9.0f inputs %6.0f records: %9.1f us\n", s.name.c_str(),
                      w.flops / 1e9, w.bytes / 1024, w.inputs, w.records, s.seconds * 1e6);
  }
  const auto fit = nonnegative_least_squares(x, y);
  auto* k = p.mutable_compute()->add_kernel();
  k->set_kind(kind);
  k->set_per_call_us(fit[0] * 1e6);
  k->set_per_gflop_s(fit[1]);
  k->set_per_gib_s(fit[2]);
  k->set_per_ginput_s(fit[3]);
  // Set even at 0: `calibrate --times 3` merges profiles field by field, and
  // a price one calibration fits to 0 and another does not is still one price.
  k->set_per_record_us(fit[4] * 1e6);
  *report += format("  fit: %.2f us per call + %.4f s per GFLOP + %.4f s per GiB + %.4f s per G input elements + %.3f us "
                    "per record\n",
                    fit[0] * 1e6, fit[1], fit[2], fit[3], fit[4] * 1e6);
}

}  // namespace twinps::cli
