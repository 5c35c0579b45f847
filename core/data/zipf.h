#pragma once
// Zipf-distributed integers: P(k) proportional to 1 / k^s for k in 1..n, in
// O(1) expected time per draw for any n (rejection-inversion, Hörmann and
// Derflinger 1996), so vocabularies of millions need no tables. Draws come
// from the project's RandomStream (deterministic on every machine).
#include <cmath>
#include <cstdint>

#include "core/runtime/random.h"

namespace twinps::data {

class ZipfSampler {
 public:
  // n >= 1 outcomes, exponent s > 0.
  ZipfSampler(std::int64_t n, double s)
      : n_(n),
        s_(s),
        h_integral_x1_(h_integral(1.5) - 1.0),
        h_integral_n_(h_integral(static_cast<double>(n) + 0.5)),
        squeeze_(2.0 - h_integral_inverse(h_integral(2.5) - h(2.0))) {}

  std::int64_t n() const { return n_; }

  // A draw in [1, n].
  std::int64_t sample(RandomStream& random) const {
    // Bounded in expectation (the acceptance rate is high for every s and
    // n); the cap only guards against a broken stream.
    for (int attempt = 0; attempt < 1000; ++attempt) {
      const double u = h_integral_n_ + random.uniform() * (h_integral_x1_ - h_integral_n_);
      const double x = h_integral_inverse(u);
      auto k = static_cast<std::int64_t>(x + 0.5);
      if (k < 1) k = 1;
      if (k > n_) k = n_;
      if (static_cast<double>(k) - x <= squeeze_ || u >= h_integral(static_cast<double>(k) + 0.5) - h(static_cast<double>(k)))
        return k;
    }
    return 1;
  }

 private:
  // h(x) = x^-s and H, an antiderivative of h, with its inverse; written with
  // expm1/log1p so that s near 1 loses no precision.
  double h(double x) const { return std::exp(-s_ * std::log(x)); }
  double h_integral(double x) const {
    const double log_x = std::log(x);
    return expm1_over_x((1.0 - s_) * log_x) * log_x;
  }
  double h_integral_inverse(double y) const {
    double t = y * (1.0 - s_);
    if (t < -1.0) t = -1.0;  // rounding can push it just past the domain
    return std::exp(log1p_over_x(t) * y);
  }
  static double expm1_over_x(double x) { return std::abs(x) > 1e-8 ? std::expm1(x) / x : 1.0 + x * 0.5 * (1.0 + x / 3.0); }
  static double log1p_over_x(double x) { return std::abs(x) > 1e-8 ? std::log1p(x) / x : 1.0 - x * (0.5 - x / 3.0); }

  std::int64_t n_;
  double s_;
  double h_integral_x1_, h_integral_n_, squeeze_;
};

}  // namespace twinps::data
