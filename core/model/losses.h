#pragma once
// Losses on a head's logits and the metric counts a step accumulates on the
// parameter servers. Each loss gives its value averaged over the batch (as
// tf.nn.compute_average_loss with the batch as the global batch) and its
// gradient with respect to the logits; tests/core/layers_test.cc checks the
// gradients against finite differences.
#include <cstdint>
#include <vector>

#include "core/tensor/tensor.h"

namespace twinps::model {

enum class LossKind { kBinaryCrossEntropy, kSoftmaxCrossEntropy, kMeanSquaredError };

struct LossResult {
  double loss = 0;  // mean over the batch
  Matrix dlogits;   // dL/dlogits, [batch x width]
};

// `labels` is [batch x label width]: 0/1 (binary), a class id (softmax) or
// targets (mean squared error). Binary cross-entropy works on logits in its
// stable form max(z, 0) - z y + log(1 + exp(-|z|)); softmax cross-entropy
// through log-sum-exp.
LossResult compute_loss(LossKind kind, const Matrix& logits, const Matrix& labels);

// The loss of each record (for tests and evaluation), [batch].
std::vector<double> per_record_loss(LossKind kind, const Matrix& logits, const Matrix& labels);

// Records whose prediction is right: sigmoid(z) > 0.5 equals the label
// (binary), or the first arg max of the logits is the label (softmax).
double correct_predictions(LossKind kind, const Matrix& logits, const Matrix& labels);

// The thresholds Keras's AUC uses: -epsilon, i/(n-1) for i in 1..n-2, 1+epsilon.
std::vector<float> auc_thresholds(int n);

// Confusion counts of one batch at every threshold (prediction > threshold
// is positive): a [2 x n] matrix, row 0 the true positives, row 1 the false
// positives; and the batch's positive and negative labels in `totals`
// ([1 x 2]). Accumulated over batches, auc_from_counts() turns them into the
// area under the ROC curve.
void auc_counts(const Matrix& logits, const Matrix& labels, const std::vector<float>& thresholds, Matrix& counts,
                Matrix& totals);
// The ROC curve's area by the trapezoidal rule over the thresholds
// (Keras's AUC(curve="ROC", summation_method="interpolation")). 0 when
// either class is missing.
double auc_from_counts(const Matrix& counts, const Matrix& totals);

}  // namespace twinps::model
