// Every layer's and every loss's backward against central finite differences,
// plus the forward values users rely on (combiners, pair order, AUC).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "core/model/layers.h"
#include "core/model/losses.h"

namespace twinps::model {
namespace {

Matrix random_matrix(Eigen::Index rows, Eigen::Index cols, RandomStream& r, double scale = 1.0) {
  Matrix m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = static_cast<float>(r.uniform(-scale, scale));
  return m;
}

// Compares `analytic` = dL/dx with central differences of `loss` around x.
// float32 arithmetic: a step of 1e-2 keeps rounding error (~1e-7 / 1e-2)
// and truncation error (~1e-4 for these smooth functions) far below the
// tolerance, while a wrong gradient (a missing factor, a transposed term)
// is off by O(1).
void expect_gradient(const char* what, Matrix& x, const Matrix& analytic, const std::function<double()>& loss,
                     float step = 1e-2f, double tolerance = 2e-3) {
  ASSERT_EQ(analytic.rows(), x.rows()) << what;
  ASSERT_EQ(analytic.cols(), x.cols()) << what;
  for (Eigen::Index i = 0; i < x.size(); ++i) {
    const float saved = x.data()[i];
    x.data()[i] = saved + step;
    const double up = loss();
    x.data()[i] = saved - step;
    const double down = loss();
    x.data()[i] = saved;
    const double numeric = (up - down) / (2.0 * step);
    EXPECT_NEAR(analytic.data()[i], numeric, tolerance * std::max(1.0, std::abs(numeric)))
        << what << " element " << i;
  }
}

// L = sum(out * weights): dL/dout = weights, a random direction so that
// every output element's gradient path is exercised.
struct LayerCheck {
  const Layer& layer;
  std::vector<Matrix> inputs;
  std::vector<Matrix> params;
  Matrix weights;
  ForwardMode mode;
  std::uint64_t dropout_seed = 9;

  double loss() {
    std::vector<const Matrix*> in, p;
    for (auto& m : inputs) in.push_back(&m);
    for (auto& m : params) p.push_back(&m);
    Matrix out;
    Saved saved;
    RandomStream random(dropout_seed);  // the same mask for every evaluation
    ForwardMode m = mode;
    m.random = &random;
    layer.forward(in, p, out, saved, m);
    return static_cast<double>((out.array() * weights.array()).sum());
  }

  void run(float step = 1e-2f) {
    std::vector<const Matrix*> in, p;
    for (auto& m : inputs) in.push_back(&m);
    for (auto& m : params) p.push_back(&m);
    Matrix out;
    Saved saved;
    RandomStream random(dropout_seed);
    ForwardMode m = mode;
    m.random = &random;
    layer.forward(in, p, out, saved, m);
    ASSERT_EQ(out.cols(), layer.output_width());
    ASSERT_EQ(out.rows(), inputs[0].rows());
    if (weights.size() == 0) {
      RandomStream w(3);
      weights = random_matrix(out.rows(), out.cols(), w);
    }
    std::vector<Matrix> dinputs;
    for (auto& x : inputs) dinputs.push_back(Matrix::Zero(x.rows(), x.cols()));
    std::vector<Matrix*> dinput_ptrs;
    for (auto& d : dinputs) dinput_ptrs.push_back(&d);
    std::vector<Matrix> dparams(params.size());
    layer.backward(in, p, out, weights, saved, dinput_ptrs, dparams);
    for (std::size_t k = 0; k < inputs.size(); ++k)
      expect_gradient("input", inputs[k], dinputs[k], [&] { return loss(); }, step);
    for (std::size_t j = 0; j < params.size(); ++j) {
      ASSERT_EQ(dparams[j].rows(), params[j].rows());
      expect_gradient("param", params[j], dparams[j], [&] { return loss(); }, step);
    }
  }
};

TEST(LayersTest, DenseGradientsForEveryActivation) {
  for (Activation a : {Activation::kNone, Activation::kRelu, Activation::kSigmoid, Activation::kTanh}) {
    for (bool bias : {true, false}) {
      SCOPED_TRACE(static_cast<int>(a) * 2 + bias);
      DenseLayer layer(5, 3, a, bias);
      RandomStream r(1);
      LayerCheck check{layer, {random_matrix(4, 5, r)}, {random_matrix(5, 3, r)}, {}, {}};
      if (bias) check.params.push_back(random_matrix(3, 1, r));
      // ReLU has a kink at 0: a smaller step keeps the differences on one side of it.
      check.run(a == Activation::kRelu ? 1e-3f : 1e-2f);
    }
  }
}

TEST(LayersTest, DenseForwardIsXWPlusB) {
  DenseLayer layer(2, 1, Activation::kRelu, true);
  Matrix x(2, 2), w(2, 1), b(1, 1);
  x << 1, 2, -3, 1;
  w << 1, 1;
  b << 0.5;
  Matrix out;
  Saved saved;
  std::vector<const Matrix*> in{&x}, p{&w, &b};
  layer.forward(in, p, out, saved, {});
  EXPECT_FLOAT_EQ(out(0, 0), 3.5f);
  EXPECT_FLOAT_EQ(out(1, 0), 0.0f) << "relu(-1.5)";
  EXPECT_EQ(layer.param_shapes(), (std::vector<Shape>{{2, 1}, {1}}));
}

TEST(LayersTest, ConcatenateAndAddGradients) {
  RandomStream r(2);
  ConcatenateLayer concat({2, 3, 1});
  LayerCheck{concat, {random_matrix(3, 2, r), random_matrix(3, 3, r), random_matrix(3, 1, r)}, {}, {}, {}}.run();
  AddLayer add(3, 4);
  LayerCheck{add, {random_matrix(3, 4, r), random_matrix(3, 4, r), random_matrix(3, 4, r)}, {}, {}, {}}.run();
}

TEST(LayersTest, DropoutGradientWithItsMaskAndIdentityInEvaluation) {
  RandomStream r(3);
  DropoutLayer dropout(0.4f, 6);
  ForwardMode training{true, nullptr};
  LayerCheck{dropout, {random_matrix(5, 6, r)}, {}, {}, training}.run();

  // The mask keeps about 1 - rate of the values, scaled by 1/(1 - rate).
  Matrix x = Matrix::Ones(200, 50), out;
  Saved saved;
  RandomStream random(4);
  std::vector<const Matrix*> in{&x};
  dropout.forward(in, {}, out, saved, ForwardMode{true, &random});
  const double kept = (out.array() > 0).cast<double>().mean();
  EXPECT_NEAR(kept, 0.6, 0.02);
  EXPECT_NEAR(out.maxCoeff(), 1.0 / 0.6, 1e-5);
  dropout.forward(in, {}, out, saved, ForwardMode{false, nullptr});
  EXPECT_EQ(out, x) << "no dropout when evaluating";
}

TEST(LayersTest, DotInteractionGradientsAndPairOrder) {
  RandomStream r(5);
  DotInteractionLayer dot(3, 4, false);
  EXPECT_EQ(dot.output_width(), 3);
  LayerCheck{dot, {random_matrix(2, 4, r), random_matrix(2, 4, r), random_matrix(2, 4, r)}, {}, {}, {}}.run();
  DotInteractionLayer with_self(3, 4, true);
  EXPECT_EQ(with_self.output_width(), 6);
  LayerCheck{with_self, {random_matrix(2, 4, r), random_matrix(2, 4, r), random_matrix(2, 4, r)}, {}, {}, {}}.run();

  Matrix a(1, 2), b(1, 2), c(1, 2), out;
  a << 1, 0;
  b << 2, 3;
  c << 0, 5;
  Saved saved;
  std::vector<const Matrix*> in{&a, &b, &c};
  dot.forward(in, {}, out, saved, {});
  EXPECT_EQ(out, (Matrix(1, 3) << 2, 0, 15).finished()) << "(a.b, a.c, b.c)";
}

IdBags bags_of(std::vector<std::vector<std::int64_t>> records, std::vector<std::vector<float>> weights = {}) {
  IdBags bags;
  for (std::size_t r = 0; r < records.size(); ++r) {
    for (std::size_t i = 0; i < records[r].size(); ++i) {
      bags.ids.push_back(records[r][i]);
      if (!weights.empty()) bags.weights.push_back(weights[r][i]);
    }
    bags.offsets.push_back(static_cast<std::int64_t>(bags.ids.size()));
  }
  return bags;
}

TEST(LayersTest, EmbeddingPlansEachDistinctRowOnce) {
  const IdBags bags = bags_of({{7, 3, 7}, {3}, {}, {9, 9}});
  const auto lookup = EmbeddingLayer::plan(bags);
  EXPECT_EQ(lookup.rows, (RowIds{3, 7, 9})) << "distinct, ascending (what plan_lookup and split_sparse take in one pass)";
  EXPECT_EQ(lookup.slot, (std::vector<std::int64_t>{1, 0, 1, 0, 2, 2}));
}

TEST(LayersTest, EmbeddingCombinersFollowTensorFlow) {
  const IdBags bags = bags_of({{0, 1}, {1}, {}}, {{1, 3}, {2}, {}});
  const auto lookup = EmbeddingLayer::plan(bags);
  Matrix rows(2, 1);
  rows << 10, 20;
  Matrix out;
  EmbeddingLayer(1, Combiner::kSum).forward(bags, lookup, rows, out);
  EXPECT_EQ(out, (Matrix(3, 1) << 70, 40, 0).finished());
  EmbeddingLayer(1, Combiner::kMean).forward(bags, lookup, rows, out);
  EXPECT_EQ(out, (Matrix(3, 1) << 70.0f / 4, 20, 0).finished()) << "sum(w e) / sum(w); an empty bag is zeros";
  EmbeddingLayer(1, Combiner::kSqrtn).forward(bags, lookup, rows, out);
  EXPECT_FLOAT_EQ(out(0, 0), 70.0f / std::sqrt(10.0f)) << "sum(w e) / sqrt(sum(w^2))";
  EXPECT_FLOAT_EQ(out(1, 0), 20.0f);
}

TEST(LayersTest, EmbeddingGradientsForEveryCombiner) {
  for (Combiner c : {Combiner::kMean, Combiner::kSum, Combiner::kSqrtn}) {
    for (bool weighted : {false, true}) {
      SCOPED_TRACE(static_cast<int>(c) * 2 + weighted);
      const IdBags bags = weighted ? bags_of({{4, 2, 4}, {2}, {}, {5}}, {{0.5f, 2, 1}, {3}, {}, {-1}})
                                   : bags_of({{4, 2, 4}, {2}, {}, {5}});
      const auto lookup = EmbeddingLayer::plan(bags);
      const EmbeddingLayer layer(3, c);
      RandomStream r(6);
      Matrix rows = random_matrix(static_cast<Eigen::Index>(lookup.rows.size()), 3, r);
      const Matrix weights = random_matrix(bags.records(), 3, r);
      auto loss = [&] {
        Matrix out;
        layer.forward(bags, lookup, rows, out);
        return static_cast<double>((out.array() * weights.array()).sum());
      };
      Matrix drows;
      layer.backward(bags, lookup, weights, drows);
      ASSERT_EQ(drows.rows(), 3) << "one gradient row per distinct id";
      expect_gradient("rows", rows, drows, loss);
    }
  }
}

TEST(LossesTest, GradientsOfEveryLoss) {
  RandomStream r(7);
  Matrix binary_labels(6, 1);
  binary_labels << 1, 0, 0, 1, 1, 0;
  Matrix logits = random_matrix(6, 1, r, 3.0);
  {
    const LossResult l = compute_loss(LossKind::kBinaryCrossEntropy, logits, binary_labels);
    expect_gradient("bce", logits, l.dlogits,
                    [&] { return compute_loss(LossKind::kBinaryCrossEntropy, logits, binary_labels).loss; });
  }
  Matrix classes(5, 1);
  classes << 0, 3, 2, 2, 1;
  Matrix class_logits = random_matrix(5, 4, r, 3.0);
  {
    const LossResult l = compute_loss(LossKind::kSoftmaxCrossEntropy, class_logits, classes);
    expect_gradient("softmax", class_logits, l.dlogits,
                    [&] { return compute_loss(LossKind::kSoftmaxCrossEntropy, class_logits, classes).loss; });
  }
  Matrix targets = random_matrix(4, 3, r), outputs = random_matrix(4, 3, r);
  {
    const LossResult l = compute_loss(LossKind::kMeanSquaredError, outputs, targets);
    expect_gradient("mse", outputs, l.dlogits,
                    [&] { return compute_loss(LossKind::kMeanSquaredError, outputs, targets).loss; });
  }
}

TEST(LossesTest, ValuesMatchTheirDefinitions) {
  Matrix z(2, 1), y(2, 1);
  z << 0, 100;
  y << 1, 0;
  // log(2) for a zero logit; a confident wrong logit costs its size, without overflow.
  EXPECT_NEAR(compute_loss(LossKind::kBinaryCrossEntropy, z, y).loss, (std::log(2.0) + 100.0) / 2, 1e-9);
  Matrix logits(1, 3), label(1, 1);
  logits << 1, 2, 3;
  label << 2;
  const double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  EXPECT_NEAR(compute_loss(LossKind::kSoftmaxCrossEntropy, logits, label).loss, lse - 3.0, 1e-6);
  Matrix out(1, 2), target(1, 2);
  out << 1, 3;
  target << 0, 0;
  EXPECT_NEAR(compute_loss(LossKind::kMeanSquaredError, out, target).loss, 5.0, 1e-9) << "mean of 1 and 9";
}

TEST(LossesTest, AccuracyCountsRightPredictions) {
  Matrix z(3, 1), y(3, 1);
  z << 2, -1, 0.5;
  y << 1, 1, 1;
  EXPECT_EQ(correct_predictions(LossKind::kBinaryCrossEntropy, z, y), 2);
  Matrix logits(2, 3), classes(2, 1);
  logits << 0, 5, 1, 3, 1, 2;
  classes << 1, 2;
  EXPECT_EQ(correct_predictions(LossKind::kSoftmaxCrossEntropy, logits, classes), 1);
}

TEST(LossesTest, AucFromCountsApproachesTheExactArea) {
  // Scores whose exact ROC AUC is the fraction of (positive, negative) pairs
  // ranked right: positives {0.9, 0.7, 0.4}, negatives {0.8, 0.3, 0.2, 0.1}
  // -> (3 + 2 + 2 ... ) counted below.
  const std::vector<float> pos = {0.9f, 0.7f, 0.4f}, neg = {0.8f, 0.3f, 0.2f, 0.1f};
  double right = 0;
  for (float p : pos)
    for (float n : neg) right += p > n ? 1 : 0;
  const double exact = right / (pos.size() * neg.size());
  Matrix logits(7, 1), labels(7, 1);
  int i = 0;
  for (float p : pos) {
    logits(i, 0) = std::log(p / (1 - p));
    labels(i++, 0) = 1;
  }
  for (float n : neg) {
    logits(i, 0) = std::log(n / (1 - n));
    labels(i++, 0) = 0;
  }
  const auto thresholds = auc_thresholds(200);
  ASSERT_EQ(thresholds.size(), 200u);
  // Counted over two batches and summed, as the parameter servers accumulate them.
  Matrix c1, t1, c2, t2;
  auc_counts(logits.topRows(4), labels.topRows(4), thresholds, c1, t1);
  auc_counts(logits.bottomRows(3), labels.bottomRows(3), thresholds, c2, t2);
  EXPECT_NEAR(auc_from_counts(c1 + c2, t1 + t2), exact, 1e-9) << "no two scores share a threshold bucket";
  EXPECT_EQ(auc_from_counts(c1, Matrix::Zero(1, 2)), 0.0);
}

}  // namespace
}  // namespace twinps::model
