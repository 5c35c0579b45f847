#include "core/model/losses.h"

#include <algorithm>
#include <cmath>

namespace twinps::model {

namespace {

double sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }

// log(sum(exp(row))) without overflow.
double log_sum_exp(const Matrix& logits, Eigen::Index r) {
  const double m = logits.row(r).maxCoeff();
  double s = 0;
  for (Eigen::Index c = 0; c < logits.cols(); ++c) s += std::exp(static_cast<double>(logits(r, c)) - m);
  return m + std::log(s);
}

Eigen::Index class_of(const Matrix& labels, Eigen::Index r) { return static_cast<Eigen::Index>(labels(r, 0)); }

}  // namespace

std::vector<double> per_record_loss(LossKind kind, const Matrix& logits, const Matrix& labels) {
  std::vector<double> out(static_cast<std::size_t>(logits.rows()));
  for (Eigen::Index r = 0; r < logits.rows(); ++r) {
    double l = 0;
    switch (kind) {
      case LossKind::kBinaryCrossEntropy: {
        const double z = logits(r, 0), y = labels(r, 0);
        l = std::max(z, 0.0) - z * y + std::log1p(std::exp(-std::abs(z)));
        break;
      }
      case LossKind::kSoftmaxCrossEntropy:
        l = log_sum_exp(logits, r) - logits(r, class_of(labels, r));
        break;
      case LossKind::kMeanSquaredError:
        for (Eigen::Index c = 0; c < logits.cols(); ++c) {
          const double d = static_cast<double>(logits(r, c)) - labels(r, c);
          l += d * d;
        }
        l /= static_cast<double>(logits.cols());
        break;
    }
    out[static_cast<std::size_t>(r)] = l;
  }
  return out;
}

LossResult compute_loss(LossKind kind, const Matrix& logits, const Matrix& labels) {
  LossResult out;
  const Eigen::Index n = logits.rows();
  if (n == 0) {
    out.dlogits = Matrix::Zero(0, logits.cols());
    return out;
  }
  for (double l : per_record_loss(kind, logits, labels)) out.loss += l;
  out.loss /= static_cast<double>(n);
  const double inv_n = 1.0 / static_cast<double>(n);
  out.dlogits.resize(n, logits.cols());
  for (Eigen::Index r = 0; r < n; ++r) {
    switch (kind) {
      case LossKind::kBinaryCrossEntropy:
        out.dlogits(r, 0) = static_cast<float>((sigmoid(logits(r, 0)) - labels(r, 0)) * inv_n);
        break;
      case LossKind::kSoftmaxCrossEntropy: {
        const double lse = log_sum_exp(logits, r);
        for (Eigen::Index c = 0; c < logits.cols(); ++c)
          out.dlogits(r, c) = static_cast<float>(std::exp(static_cast<double>(logits(r, c)) - lse) * inv_n);
        out.dlogits(r, class_of(labels, r)) -= static_cast<float>(inv_n);
        break;
      }
      case LossKind::kMeanSquaredError:
        for (Eigen::Index c = 0; c < logits.cols(); ++c)
          out.dlogits(r, c) = static_cast<float>(2.0 * (static_cast<double>(logits(r, c)) - labels(r, c)) * inv_n /
                                                 static_cast<double>(logits.cols()));
        break;
    }
  }
  return out;
}

double correct_predictions(LossKind kind, const Matrix& logits, const Matrix& labels) {
  double correct = 0;
  for (Eigen::Index r = 0; r < logits.rows(); ++r) {
    if (kind == LossKind::kBinaryCrossEntropy) {
      const float predicted = sigmoid(logits(r, 0)) > 0.5 ? 1.0f : 0.0f;
      correct += predicted == labels(r, 0) ? 1 : 0;
    } else if (kind == LossKind::kSoftmaxCrossEntropy) {
      Eigen::Index best = 0;
      logits.row(r).maxCoeff(&best);
      correct += best == class_of(labels, r) ? 1 : 0;
    }
  }
  return correct;
}

std::vector<float> auc_thresholds(int n) {
  constexpr float kEpsilon = 1e-7f;
  std::vector<float> t;
  t.reserve(static_cast<std::size_t>(n));
  t.push_back(0.0f - kEpsilon);
  for (int i = 1; i <= n - 2; ++i) t.push_back(static_cast<float>(i) / static_cast<float>(n - 1));
  t.push_back(1.0f + kEpsilon);
  return t;
}

void auc_counts(const Matrix& logits, const Matrix& labels, const std::vector<float>& thresholds, Matrix& counts,
                Matrix& totals) {
  const auto n = static_cast<Eigen::Index>(thresholds.size());
  counts = Matrix::Zero(2, n);
  totals = Matrix::Zero(1, 2);
  for (Eigen::Index r = 0; r < logits.rows(); ++r) {
    const auto p = static_cast<float>(sigmoid(logits(r, 0)));
    const bool positive = labels(r, 0) > 0.5f;
    totals(0, positive ? 0 : 1) += 1;
    // Thresholds ascend: the prediction is above the first k of them.
    const auto above = std::lower_bound(thresholds.begin(), thresholds.end(), p) - thresholds.begin();
    counts.row(positive ? 0 : 1).head(above).array() += 1.0f;
  }
}

double auc_from_counts(const Matrix& counts, const Matrix& totals) {
  const double positives = totals(0, 0), negatives = totals(0, 1);
  if (positives <= 0 || negatives <= 0) return 0;
  double area = 0;
  for (Eigen::Index i = 0; i + 1 < counts.cols(); ++i) {
    const double tpr0 = counts(0, i) / positives, tpr1 = counts(0, i + 1) / positives;
    const double fpr0 = counts(1, i) / negatives, fpr1 = counts(1, i + 1) / negatives;
    area += (fpr0 - fpr1) * (tpr0 + tpr1) / 2;
  }
  return area;
}

}  // namespace twinps::model
