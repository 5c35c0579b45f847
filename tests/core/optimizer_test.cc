// Each optimizer against updates worked out from Keras's formulas, step by
// step, for a few steps; every learning-rate schedule; config validation.
#include "tests/core/matrix_literal.h"
#include "core/ps/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>

namespace twinps {
namespace {

using testutil::mat;

void expect_matrix_near(const Matrix& got, const Matrix& want, double tol = 1e-6) {
  ASSERT_EQ(got.rows(), want.rows());
  ASSERT_EQ(got.cols(), want.cols());
  for (Eigen::Index r = 0; r < got.rows(); ++r)
    for (Eigen::Index c = 0; c < got.cols(); ++c)
      EXPECT_NEAR(got(r, c), want(r, c), tol) << "at (" << r << "," << c << ")";
}

Optimizer make(const OptimizerConfig& c) {
  auto o = Optimizer::create(c);
  EXPECT_TRUE(o.ok()) << o.status();
  return *o;
}

OptimizerConfig config(OptimizerConfig::Kind kind, double lr) {
  OptimizerConfig c;
  c.kind = kind;
  c.learning_rate = LearningRateSchedule::constant(lr);
  return c;
}

// ---------------------------------------------------------------- validation

void expect_invalid(const OptimizerConfig& c, const std::string& field) {
  Status s = validate_optimizer_config(c);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << field;
  EXPECT_NE(std::string(s.message()).find(field), std::string::npos) << s.message();
  EXPECT_FALSE(Optimizer::create(c).ok());
}

TEST(OptimizerConfigTest, RejectsOutOfRangeFieldsNamingThem) {
  EXPECT_TRUE(validate_optimizer_config(OptimizerConfig{}).ok());

  auto c = config(OptimizerConfig::Kind::kSgd, 0.0);
  expect_invalid(c, "learning_rate.initial");
  c.learning_rate.initial = -1;
  expect_invalid(c, "learning_rate.initial");
  c.learning_rate.initial = std::nan("");
  expect_invalid(c, "learning_rate.initial");

  c = config(OptimizerConfig::Kind::kSgd, 0.1);
  c.momentum = 1.5;
  expect_invalid(c, "momentum");

  c = config(OptimizerConfig::Kind::kRmsprop, 0.1);
  c.rho = 1.0;
  expect_invalid(c, "optimizer.rho");
  c.rho = 0.9;
  c.epsilon = 0;
  expect_invalid(c, "epsilon");

  c = config(OptimizerConfig::Kind::kAdam, 0.1);
  c.beta_1 = 1.0;
  expect_invalid(c, "beta_1");
  c.beta_1 = 0.9;
  c.beta_2 = -0.1;
  expect_invalid(c, "beta_2");
  c.beta_2 = 0.999;
  c.epsilon = -1e-7;
  expect_invalid(c, "epsilon");

  c = config(OptimizerConfig::Kind::kAdagrad, 0.1);
  c.initial_accumulator_value = -0.1;
  expect_invalid(c, "initial_accumulator_value");

  c = config(OptimizerConfig::Kind::kSgd, 0.1);
  c.learning_rate.kind = LearningRateSchedule::Kind::kPiecewiseConstant;
  c.learning_rate.boundaries = {10, 20};
  c.learning_rate.values = {1.0, 0.5};
  expect_invalid(c, "learning_rate.values");
  c.learning_rate.boundaries = {20, 10};
  c.learning_rate.values = {1.0, 0.5, 0.1};
  expect_invalid(c, "learning_rate.boundaries");
  c.learning_rate.boundaries = {10, 20};
  c.learning_rate.values = {1.0, 0.0, 0.1};
  expect_invalid(c, "learning_rate.values[1]");

  c = config(OptimizerConfig::Kind::kSgd, 0.1);
  c.learning_rate.kind = LearningRateSchedule::Kind::kExponentialDecay;
  c.learning_rate.decay_steps = 0;
  expect_invalid(c, "learning_rate.decay_steps");
}

// ---------------------------------------------------------------- schedules

TEST(LearningRateScheduleTest, Constant) {
  auto s = LearningRateSchedule::constant(0.25);
  EXPECT_DOUBLE_EQ(learning_rate_at(s, 0), 0.25);
  EXPECT_DOUBLE_EQ(learning_rate_at(s, 123456), 0.25);
}

TEST(LearningRateScheduleTest, ExponentialDecaySmoothAndStaircase) {
  LearningRateSchedule s;
  s.kind = LearningRateSchedule::Kind::kExponentialDecay;
  s.initial = 0.1;
  s.decay_steps = 100;
  s.decay_rate = 0.5;
  EXPECT_DOUBLE_EQ(learning_rate_at(s, 0), 0.1);
  EXPECT_NEAR(learning_rate_at(s, 50), 0.1 * std::sqrt(0.5), 1e-12);
  EXPECT_NEAR(learning_rate_at(s, 200), 0.025, 1e-12);
  s.staircase = true;
  EXPECT_DOUBLE_EQ(learning_rate_at(s, 99), 0.1);
  EXPECT_NEAR(learning_rate_at(s, 100), 0.05, 1e-12);
  EXPECT_NEAR(learning_rate_at(s, 250), 0.025, 1e-12);
}

TEST(LearningRateScheduleTest, InverseTimeDecaySmoothAndStaircase) {
  LearningRateSchedule s;
  s.kind = LearningRateSchedule::Kind::kInverseTimeDecay;
  s.initial = 0.1;
  s.decay_steps = 10;
  s.decay_rate = 0.5;
  EXPECT_DOUBLE_EQ(learning_rate_at(s, 0), 0.1);
  EXPECT_NEAR(learning_rate_at(s, 5), 0.1 / 1.25, 1e-12);
  EXPECT_NEAR(learning_rate_at(s, 20), 0.05, 1e-12);
  s.staircase = true;
  EXPECT_DOUBLE_EQ(learning_rate_at(s, 9), 0.1);
  EXPECT_NEAR(learning_rate_at(s, 15), 0.1 / 1.5, 1e-12);
}

TEST(LearningRateScheduleTest, PiecewiseConstantIncludesEachBoundaryInTheEarlierPiece) {
  // Keras's PiecewiseConstantDecay: values[0] for step <= 10, values[1] for 10 < step <= 20.
  LearningRateSchedule s;
  s.kind = LearningRateSchedule::Kind::kPiecewiseConstant;
  s.boundaries = {10, 20};
  s.values = {1.0, 0.5, 0.1};
  EXPECT_DOUBLE_EQ(learning_rate_at(s, 0), 1.0);
  EXPECT_DOUBLE_EQ(learning_rate_at(s, 10), 1.0);
  EXPECT_DOUBLE_EQ(learning_rate_at(s, 11), 0.5);
  EXPECT_DOUBLE_EQ(learning_rate_at(s, 20), 0.5);
  EXPECT_DOUBLE_EQ(learning_rate_at(s, 21), 0.1);
  EXPECT_DOUBLE_EQ(learning_rate_at(s, 1000000), 0.1);
}

TEST(LearningRateScheduleTest, TheOptimizerUsesTheShardsStep) {
  auto c = config(OptimizerConfig::Kind::kSgd, 0.1);
  c.learning_rate.kind = LearningRateSchedule::Kind::kPiecewiseConstant;
  c.learning_rate.boundaries = {0};
  c.learning_rate.values = {1.0, 0.1};
  Optimizer opt = make(c);
  Matrix x = mat({{1.0f}});
  std::vector<Matrix> slots;
  ASSERT_TRUE(opt.apply_dense(x, slots, mat({{1.0f}}), /*step=*/0).ok());
  EXPECT_NEAR(x(0, 0), 0.0, 1e-7);  // 1 - 1.0 * 1
  ASSERT_TRUE(opt.apply_dense(x, slots, mat({{1.0f}}), /*step=*/1).ok());
  EXPECT_NEAR(x(0, 0), -0.1, 1e-7);  // 0 - 0.1 * 1
}

// ---------------------------------------------------------------- slots

TEST(OptimizerTest, SlotNamesFollowKeras) {
  auto sgd = config(OptimizerConfig::Kind::kSgd, 0.1);
  EXPECT_EQ(make(sgd).slot_count(), 0u);
  sgd.momentum = 0.9;
  EXPECT_EQ(make(sgd).slot_names(), (std::vector<std::string>{"momentum"}));
  EXPECT_EQ(make(config(OptimizerConfig::Kind::kAdagrad, 0.1)).slot_names(),
            (std::vector<std::string>{"accumulator"}));
  auto rms = config(OptimizerConfig::Kind::kRmsprop, 0.1);
  EXPECT_EQ(make(rms).slot_names(), (std::vector<std::string>{"rms"}));
  rms.momentum = 0.5;
  rms.centered = true;
  EXPECT_EQ(make(rms).slot_names(), (std::vector<std::string>{"rms", "momentum", "mg"}));
  EXPECT_EQ(make(config(OptimizerConfig::Kind::kAdam, 0.1)).slot_names(), (std::vector<std::string>{"m", "v"}));
}

TEST(OptimizerTest, AdagradAccumulatorStartsAtTheInitialValueOtherSlotsAtZero) {
  auto ada = config(OptimizerConfig::Kind::kAdagrad, 0.1);
  ada.initial_accumulator_value = 0.25;
  auto slots = make(ada).make_slots(2, 3);
  ASSERT_EQ(slots.size(), 1u);
  expect_matrix_near(slots[0], Matrix::Constant(2, 3, 0.25f));
  auto adam = make(config(OptimizerConfig::Kind::kAdam, 0.1)).make_slots(2, 3);
  ASSERT_EQ(adam.size(), 2u);
  expect_matrix_near(adam[1], Matrix::Zero(2, 3));
}

TEST(OptimizerTest, MismatchedOperandsAreRefusedAndChangeNothing) {
  Optimizer opt = make(config(OptimizerConfig::Kind::kAdam, 0.1));
  Matrix x = mat({{1, 2}, {3, 4}});
  std::vector<Matrix> one_slot{Matrix::Zero(2, 2)};
  EXPECT_EQ(opt.apply_dense(x, one_slot, mat({{1, 1}, {1, 1}}), 0).code(), StatusCode::kInvalidArgument);
  auto slots = opt.make_slots(2, 2);
  EXPECT_EQ(opt.apply_dense(x, slots, mat({{1, 1}}), 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(opt.apply_sparse(x, slots, {2}, mat({{1, 1}}), 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(opt.apply_sparse(x, slots, {-1}, mat({{1, 1}}), 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(opt.apply_sparse(x, slots, {0, 1}, mat({{1, 1}}), 0).code(), StatusCode::kInvalidArgument);
  expect_matrix_near(x, mat({{1, 2}, {3, 4}}));
  expect_matrix_near(slots[0], Matrix::Zero(2, 2));
}

TEST(OptimizerTest, SumDuplicateRowsKeepsFirstOccurrenceOrder) {
  SparseRows s = sum_duplicate_rows({3, 1, 3, 0, 1}, mat({{1}, {2}, {4}, {8}, {16}}));
  EXPECT_EQ(s.rows, (RowIds{3, 1, 0}));
  expect_matrix_near(s.values, mat({{5}, {18}, {8}}));
}

TEST(OptimizerTest, SumDuplicateRowsWithoutRepeatsIsTheInput) {
  SparseRows s = sum_duplicate_rows({7, 2, 9}, mat({{1, 2}, {3, 4}, {5, 6}}));
  EXPECT_EQ(s.rows, (RowIds{7, 2, 9}));
  expect_matrix_near(s.values, mat({{1, 2}, {3, 4}, {5, 6}}));
}

// Against the definition, summed one index at a time: 2,000 ids drawn from
// 300 (most repeat, in any order).
TEST(OptimizerTest, SumDuplicateRowsMatchesAnIndexByIndexSum) {
  RowIds rows;
  Matrix values(2000, 3);
  for (int i = 0; i < 2000; ++i) {
    rows.push_back((i * 7919 + i / 3) % 300);
    values.row(i) << static_cast<float>(i), static_cast<float>(i % 5), 1.0f;
  }
  RowIds want_rows;
  std::vector<Eigen::Index> slot(300, -1);
  Matrix want = Matrix::Zero(300, 3);
  for (int i = 0; i < 2000; ++i) {
    auto& r = slot[static_cast<std::size_t>(rows[static_cast<std::size_t>(i)])];
    if (r < 0) {
      r = static_cast<Eigen::Index>(want_rows.size());
      want_rows.push_back(rows[static_cast<std::size_t>(i)]);
    }
    want.row(r) += values.row(i);
  }
  SparseRows s = sum_duplicate_rows(rows, values);
  EXPECT_EQ(s.rows, want_rows);
  expect_matrix_near(s.values, want.topRows(static_cast<Eigen::Index>(want_rows.size())));
}

// ---------------------------------------------------------------- SGD

TEST(SgdTest, DenseWithoutMomentum) {
  Optimizer opt = make(config(OptimizerConfig::Kind::kSgd, 0.1));
  Matrix x = mat({{1.0f, -2.0f}});
  std::vector<Matrix> slots;
  ASSERT_TRUE(opt.apply_dense(x, slots, mat({{0.5f, -1.0f}}), 0).ok());
  expect_matrix_near(x, mat({{0.95f, -1.9f}}));  // x - 0.1 * g
  ASSERT_TRUE(opt.apply_dense(x, slots, mat({{2.0f, 0.0f}}), 1).ok());
  expect_matrix_near(x, mat({{0.75f, -1.9f}}));
}

TEST(SgdTest, DenseWithMomentum) {
  auto c = config(OptimizerConfig::Kind::kSgd, 0.1);
  c.momentum = 0.9;
  Optimizer opt = make(c);
  Matrix x = mat({{1.0f}});
  auto slots = opt.make_slots(1, 1);
  // accum = 0.9*accum - 0.1*g; x += accum
  ASSERT_TRUE(opt.apply_dense(x, slots, mat({{0.5f}}), 0).ok());
  EXPECT_NEAR(slots[0](0, 0), -0.05, 1e-7);
  EXPECT_NEAR(x(0, 0), 0.95, 1e-7);
  ASSERT_TRUE(opt.apply_dense(x, slots, mat({{-0.3f}}), 1).ok());
  EXPECT_NEAR(slots[0](0, 0), -0.015, 1e-7);  // -0.045 + 0.03
  EXPECT_NEAR(x(0, 0), 0.935, 1e-7);
  ASSERT_TRUE(opt.apply_dense(x, slots, mat({{1.0f}}), 2).ok());
  EXPECT_NEAR(slots[0](0, 0), -0.1135, 1e-7);  // -0.0135 - 0.1
  EXPECT_NEAR(x(0, 0), 0.8215, 1e-7);
}

TEST(SgdTest, DenseWithNesterovMomentum) {
  auto c = config(OptimizerConfig::Kind::kSgd, 0.1);
  c.momentum = 0.9;
  c.nesterov = true;
  Optimizer opt = make(c);
  Matrix x = mat({{1.0f}});
  auto slots = opt.make_slots(1, 1);
  // accum = 0.9*accum - 0.1*g; x += 0.9*accum - 0.1*g
  ASSERT_TRUE(opt.apply_dense(x, slots, mat({{0.5f}}), 0).ok());
  EXPECT_NEAR(x(0, 0), 1.0 + 0.9 * -0.05 - 0.05, 1e-7);  // 0.905
  ASSERT_TRUE(opt.apply_dense(x, slots, mat({{-0.3f}}), 1).ok());
  EXPECT_NEAR(x(0, 0), 0.905 + 0.9 * -0.015 + 0.03, 1e-7);  // 0.9215
}

TEST(SgdTest, SparseTouchesOnlyGivenRowsAndSumsDuplicates) {
  auto c = config(OptimizerConfig::Kind::kSgd, 0.1);
  c.momentum = 0.5;
  Optimizer opt = make(c);
  Matrix x = mat({{1, 1}, {2, 2}, {3, 3}});
  auto slots = opt.make_slots(3, 2);
  // Row 2 appears twice: its gradient is (1+2, 0+0) = (3, 0).
  ASSERT_TRUE(opt.apply_sparse(x, slots, {2, 0, 2}, mat({{1, 0}, {1, 1}, {2, 0}}), 0).ok());
  expect_matrix_near(slots[0], mat({{-0.1f, -0.1f}, {0, 0}, {-0.3f, 0}}));
  expect_matrix_near(x, mat({{0.9f, 0.9f}, {2, 2}, {2.7f, 3}}));
  ASSERT_TRUE(opt.apply_sparse(x, slots, {0}, mat({{0, 1}}), 1).ok());
  // accum row 0 = 0.5*(-0.1, -0.1) - 0.1*(0, 1) = (-0.05, -0.15); row 2 untouched.
  expect_matrix_near(slots[0], mat({{-0.05f, -0.15f}, {0, 0}, {-0.3f, 0}}));
  expect_matrix_near(x, mat({{0.85f, 0.75f}, {2, 2}, {2.7f, 3}}));

  Optimizer plain = make(config(OptimizerConfig::Kind::kSgd, 0.5));
  std::vector<Matrix> none;
  Matrix y = mat({{1}, {1}});
  ASSERT_TRUE(plain.apply_sparse(y, none, {1, 1}, mat({{1}, {1}}), 0).ok());
  expect_matrix_near(y, mat({{1}, {0}}));
}

// ---------------------------------------------------------------- Adagrad

TEST(AdagradTest, DenseTwoSteps) {
  auto c = config(OptimizerConfig::Kind::kAdagrad, 0.1);  // initial accumulator 0.1, epsilon 1e-7
  Optimizer opt = make(c);
  Matrix x = mat({{1.0f, 2.0f}});
  auto slots = opt.make_slots(1, 2);
  // accum += g^2; x -= lr * g / (sqrt(accum) + eps)
  ASSERT_TRUE(opt.apply_dense(x, slots, mat({{0.3f, -0.4f}}), 0).ok());
  double a0 = 0.1 + 0.09, a1 = 0.1 + 0.16;
  double x0 = 1.0 - 0.1 * 0.3 / (std::sqrt(a0) + 1e-7), x1 = 2.0 + 0.1 * 0.4 / (std::sqrt(a1) + 1e-7);
  expect_matrix_near(slots[0], mat({{float(a0), float(a1)}}));
  expect_matrix_near(x, mat({{float(x0), float(x1)}}));
  ASSERT_TRUE(opt.apply_dense(x, slots, mat({{0.1f, 0.2f}}), 1).ok());
  a0 += 0.01;
  a1 += 0.04;
  x0 -= 0.1 * 0.1 / (std::sqrt(a0) + 1e-7);
  x1 -= 0.1 * 0.2 / (std::sqrt(a1) + 1e-7);
  expect_matrix_near(slots[0], mat({{float(a0), float(a1)}}));
  expect_matrix_near(x, mat({{float(x0), float(x1)}}));
}

TEST(AdagradTest, SparseTouchesOnlyGivenRows) {
  Optimizer opt = make(config(OptimizerConfig::Kind::kAdagrad, 0.1));
  Matrix x = mat({{1}, {2}, {3}});
  auto slots = opt.make_slots(3, 1);
  ASSERT_TRUE(opt.apply_sparse(x, slots, {1, 1}, mat({{0.25f}, {0.25f}}), 0).ok());  // summed: 0.5
  const double a = 0.1 + 0.25;
  expect_matrix_near(slots[0], mat({{0.1f}, {float(a)}, {0.1f}}));
  expect_matrix_near(x, mat({{1}, {float(2 - 0.1 * 0.5 / (std::sqrt(a) + 1e-7))}, {3}}));
}

// ---------------------------------------------------------------- RMSprop

struct RmsElement {
  double x, ms = 0, mom = 0, mg = 0;
};

TEST(RmspropTest, DensePlain) {
  auto c = config(OptimizerConfig::Kind::kRmsprop, 0.01);  // rho 0.9, eps 1e-7
  Optimizer opt = make(c);
  Matrix x = mat({{1.0f}});
  auto slots = opt.make_slots(1, 1);
  RmsElement e{1.0};
  for (int step = 0; step < 3; ++step) {
    const double g = step == 1 ? -0.5 : 0.2;
    ASSERT_TRUE(opt.apply_dense(x, slots, mat({{float(g)}}), step).ok());
    // ms = rho*ms + (1-rho)*g^2; x -= lr*g / (sqrt(ms) + eps)
    e.ms = 0.9 * e.ms + 0.1 * g * g;
    e.x -= 0.01 * g / (std::sqrt(e.ms) + 1e-7);
    EXPECT_NEAR(slots[0](0, 0), e.ms, 1e-7) << step;
    EXPECT_NEAR(x(0, 0), e.x, 1e-6) << step;
  }
  // First step: ms = 0.004, x = 1 - 0.01*0.2/sqrt(0.004) = 0.968377...
  EXPECT_NEAR(1.0 - 0.01 * 0.2 / std::sqrt(0.004), 0.9683772, 1e-6);
}

TEST(RmspropTest, DenseWithMomentum) {
  auto c = config(OptimizerConfig::Kind::kRmsprop, 0.01);
  c.momentum = 0.5;
  Optimizer opt = make(c);
  Matrix x = mat({{1.0f}});
  auto slots = opt.make_slots(1, 1);
  RmsElement e{1.0};
  for (int step = 0; step < 3; ++step) {
    const double g = step == 1 ? -0.5 : 0.2;
    ASSERT_TRUE(opt.apply_dense(x, slots, mat({{float(g)}}), step).ok());
    // mom = momentum*mom + lr*g/sqrt(ms + eps); x -= mom
    e.ms = 0.9 * e.ms + 0.1 * g * g;
    e.mom = 0.5 * e.mom + 0.01 * g / std::sqrt(e.ms + 1e-7);
    e.x -= e.mom;
    EXPECT_NEAR(slots[1](0, 0), e.mom, 1e-6) << step;
    EXPECT_NEAR(x(0, 0), e.x, 1e-6) << step;
  }
}

TEST(RmspropTest, DenseCentered) {
  auto c = config(OptimizerConfig::Kind::kRmsprop, 0.01);
  c.centered = true;
  Optimizer opt = make(c);
  Matrix x = mat({{1.0f}});
  auto slots = opt.make_slots(1, 1);
  ASSERT_EQ(slots.size(), 2u);  // rms, mg
  RmsElement e{1.0};
  for (int step = 0; step < 3; ++step) {
    const double g = step == 1 ? -0.5 : 0.2;
    ASSERT_TRUE(opt.apply_dense(x, slots, mat({{float(g)}}), step).ok());
    // mg = rho*mg + (1-rho)*g; x -= lr*g / (sqrt(ms - mg^2) + eps)
    e.ms = 0.9 * e.ms + 0.1 * g * g;
    e.mg = 0.9 * e.mg + 0.1 * g;
    e.x -= 0.01 * g / (std::sqrt(e.ms - e.mg * e.mg) + 1e-7);
    EXPECT_NEAR(slots[1](0, 0), e.mg, 1e-7) << step;
    EXPECT_NEAR(x(0, 0), e.x, 1e-5) << step;
  }
}

TEST(RmspropTest, DenseCenteredWithMomentum) {
  auto c = config(OptimizerConfig::Kind::kRmsprop, 0.01);
  c.centered = true;
  c.momentum = 0.5;
  Optimizer opt = make(c);
  Matrix x = mat({{1.0f}});
  auto slots = opt.make_slots(1, 1);
  ASSERT_EQ(slots.size(), 3u);  // rms, momentum, mg
  RmsElement e{1.0};
  for (int step = 0; step < 3; ++step) {
    const double g = step == 1 ? -0.5 : 0.2;
    ASSERT_TRUE(opt.apply_dense(x, slots, mat({{float(g)}}), step).ok());
    // mom = momentum*mom + lr*g / sqrt(ms - mg^2 + eps); x -= mom
    e.ms = 0.9 * e.ms + 0.1 * g * g;
    e.mg = 0.9 * e.mg + 0.1 * g;
    e.mom = 0.5 * e.mom + 0.01 * g / std::sqrt(e.ms - e.mg * e.mg + 1e-7);
    e.x -= e.mom;
    EXPECT_NEAR(slots[1](0, 0), e.mom, 1e-5) << step;
    EXPECT_NEAR(slots[2](0, 0), e.mg, 1e-7) << step;
    EXPECT_NEAR(x(0, 0), e.x, 1e-5) << step;
  }
}

TEST(RmspropTest, SparseTouchesOnlyGivenRowsInEveryVariant) {
  for (bool centered : {false, true}) {
    for (double momentum : {0.0, 0.5}) {
      SCOPED_TRACE(testing::Message() << "centered=" << centered << " momentum=" << momentum);
      auto c = config(OptimizerConfig::Kind::kRmsprop, 0.01);
      c.centered = centered;
      c.momentum = momentum;
      Optimizer opt = make(c);
      Matrix x = mat({{1}, {2}, {3}});
      auto slots = opt.make_slots(3, 1);
      Matrix dense_x = mat({{2}});
      auto dense_slots = opt.make_slots(1, 1);
      for (int step = 0; step < 2; ++step) {
        // Duplicate ids 1,1 sum to the gradient a one-row dense apply gets.
        ASSERT_TRUE(opt.apply_sparse(x, slots, {1, 1}, mat({{0.1f}, {0.2f}}), step).ok());
        ASSERT_TRUE(opt.apply_dense(dense_x, dense_slots, mat({{0.3f}}), step).ok());
      }
      EXPECT_NEAR(x(1, 0), dense_x(0, 0), 1e-6);
      EXPECT_EQ(x(0, 0), 1.0f);
      EXPECT_EQ(x(2, 0), 3.0f);
      for (std::size_t k = 0; k < slots.size(); ++k) {
        EXPECT_NEAR(slots[k](1, 0), dense_slots[k](0, 0), 1e-6);
        EXPECT_EQ(slots[k](0, 0), 0.0f) << "untouched rows keep their slots";
      }
    }
  }
}

// ---------------------------------------------------------------- Adam

struct AdamElement {
  double x, m = 0, v = 0;
  // Keras: t = step + 1; alpha = lr*sqrt(1-b2^t)/(1-b1^t); x -= alpha*m/(sqrt(v)+eps)
  void step(double g, int t, double lr = 0.1, double b1 = 0.9, double b2 = 0.999, double eps = 1e-7) {
    m = b1 * m + (1 - b1) * g;
    v = b2 * v + (1 - b2) * g * g;
    x -= lr * std::sqrt(1 - std::pow(b2, t)) / (1 - std::pow(b1, t)) * m / (std::sqrt(v) + eps);
  }
};

TEST(AdamTest, DenseThreeSteps) {
  Optimizer opt = make(config(OptimizerConfig::Kind::kAdam, 0.1));
  Matrix x = mat({{1.0f, -1.0f}});
  auto slots = opt.make_slots(1, 2);
  AdamElement a{1.0}, b{-1.0};
  const double grads[3][2] = {{0.5, -2.0}, {0.1, 1.0}, {-0.3, 0.0}};
  for (int step = 0; step < 3; ++step) {
    ASSERT_TRUE(opt.apply_dense(x, slots, mat({{float(grads[step][0]), float(grads[step][1])}}), step).ok());
    a.step(grads[step][0], step + 1);
    b.step(grads[step][1], step + 1);
    EXPECT_NEAR(slots[0](0, 0), a.m, 1e-6);
    EXPECT_NEAR(slots[1](0, 1), b.v, 1e-6);
    EXPECT_NEAR(x(0, 0), a.x, 1e-5) << step;
    EXPECT_NEAR(x(0, 1), b.x, 1e-5) << step;
    if (step == 0) {
      // Bias correction makes Adam's first step about lr * sign(g).
      EXPECT_NEAR(x(0, 0), 0.9, 1e-5);
      EXPECT_NEAR(x(0, 1), -0.9, 1e-5);
    }
  }
}

TEST(AdamTest, SparseFollowsKerasMomentsOfAllRowsDecay) {
  Optimizer opt = make(config(OptimizerConfig::Kind::kAdam, 0.1));
  Matrix x = mat({{1}, {2}, {3}});
  auto slots = opt.make_slots(3, 1);
  AdamElement r0{1}, r1{2}, r2{3};
  // Step 0 touches row 0 (twice: 0.2 + 0.3) and row 2; step 1 touches only row 2.
  ASSERT_TRUE(opt.apply_sparse(x, slots, {0, 2, 0}, mat({{0.2f}, {1.0f}, {0.3f}}), 0).ok());
  r0.step(0.5, 1);
  r1.step(0.0, 1);
  r2.step(1.0, 1);
  EXPECT_NEAR(x(0, 0), r0.x, 1e-5);
  EXPECT_EQ(x(1, 0), 2.0f) << "a row that never had a gradient has zero moments and stays";
  EXPECT_NEAR(x(2, 0), r2.x, 1e-5);
  ASSERT_TRUE(opt.apply_sparse(x, slots, {2}, mat({{-1.0f}}), 1).ok());
  r0.step(0.0, 2);  // untouched: its moments decay and its value still moves
  r2.step(-1.0, 2);
  EXPECT_NEAR(slots[0](0, 0), r0.m, 1e-6);
  EXPECT_NEAR(x(0, 0), r0.x, 1e-5);
  EXPECT_LT(x(0, 0), 0.9f - 0.01f) << "Keras's sparse Adam moves untouched rows";
  EXPECT_NEAR(x(2, 0), r2.x, 1e-5);
}

TEST(AdamTest, LazySparseTouchesOnlyGivenRows) {
  auto c = config(OptimizerConfig::Kind::kAdam, 0.1);
  c.lazy_adam = true;
  Optimizer opt = make(c);
  Matrix x = mat({{1}, {2}, {3}});
  auto slots = opt.make_slots(3, 1);
  AdamElement r0{1}, r2{3};
  ASSERT_TRUE(opt.apply_sparse(x, slots, {0, 2}, mat({{0.5f}, {1.0f}}), 0).ok());
  r0.step(0.5, 1);
  r2.step(1.0, 1);
  ASSERT_TRUE(opt.apply_sparse(x, slots, {2}, mat({{-1.0f}}), 1).ok());
  r2.step(-1.0, 2);  // the step (bias correction) is the shard's, even for a row's first update
  EXPECT_NEAR(x(0, 0), r0.x, 1e-5);
  EXPECT_NEAR(slots[0](0, 0), r0.m, 1e-7) << "untouched row keeps its moments";
  EXPECT_EQ(x(1, 0), 2.0f);
  EXPECT_NEAR(x(2, 0), r2.x, 1e-5);
  EXPECT_NEAR(slots[1](2, 0), r2.v, 1e-7);
}

}  // namespace
}  // namespace twinps
