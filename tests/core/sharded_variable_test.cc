#include "tests/core/matrix_literal.h"
#include "core/variables/sharded_variable.h"

#include <algorithm>
#include <numeric>
#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/variables/placement.h"

namespace twinps {
namespace {

using testutil::mat;

using ::testing::HasSubstr;
using Ints = std::vector<std::int64_t>;

std::string message(const Status& s) { return std::string(s.message()); }

// A layout as the coordinator would produce it: `shards` div shards of `shape`.
VariableLayout make_layout(const std::string& name, const Shape& shape, std::int64_t shards, int num_ps = 2) {
  VariablePlacer placer(num_ps, *FixedShardsPartitioner::create(shards));
  return *placer.create(name, shape);
}

// Row r of the result is filled with r * cols + 1, r * cols + 2, ...: the
// (5,2) table is [[1,2],[3,4],[5,6],[7,8],[9,10]].
Matrix counting(std::int64_t rows, std::int64_t cols) {
  Matrix m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = static_cast<float>(i + 1);
  return m;
}

// --- validate_layout ---------------------------------------------------------

TEST(ValidateLayoutTest, AcceptsPlacerLayouts) {
  EXPECT_TRUE(validate_layout(make_layout("v", {13}, 5)).ok());
  EXPECT_TRUE(validate_layout(make_layout("v", {}, 1)).ok());
  EXPECT_TRUE(validate_layout(make_layout("v", {0, 3}, 2)).ok());
}

TEST(ValidateLayoutTest, AcceptsUnevenRangesAndRoutesThem) {
  // An automatic placement's split: contiguous, not div.
  VariableLayout v = make_layout("emb", {9, 20}, 3);
  v.shards[0].rows = 1;
  v.shards[1].row_offset = 1;
  v.shards[1].rows = 2;
  v.shards[2].row_offset = 3;
  v.shards[2].rows = 6;
  ASSERT_TRUE(validate_layout(v).ok()) << validate_layout(v);
  EXPECT_EQ(*locate_row(v, 0), (RowLocation{0, 0}));
  EXPECT_EQ(*locate_row(v, 2), (RowLocation{1, 1}));
  EXPECT_EQ(*locate_row(v, 3), (RowLocation{2, 0}));
  EXPECT_EQ(*locate_row(v, 8), (RowLocation{2, 5}));
  auto plan = plan_lookup(v, {8, 0, 2, 8});
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->gathers.size(), 3u);
  EXPECT_EQ(plan->gathers[2].local_rows, (RowIds{5}));
}

TEST(ValidateLayoutTest, RejectsLayoutsThatLeaveRowsOutOrHaveEmptyShards) {
  VariableLayout v = make_layout("emb", {9, 20}, 2);
  v.shards[1].rows = 3;
  Status s = validate_layout(v);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(message(s), HasSubstr("variable \"emb\": shards have rows [5, 3] (8 in all), but the variable has 9 rows"));

  VariableLayout empty = make_layout("emb", {9, 20}, 2);
  empty.shards[0].rows = 0;
  empty.shards[1].row_offset = 0;
  empty.shards[1].rows = 9;
  EXPECT_THAT(message(validate_layout(empty)), HasSubstr("shard 0 has no rows"));

  VariableLayout gap = make_layout("emb", {9, 20}, 2);
  gap.shards[1].row_offset = 6;
  EXPECT_THAT(message(validate_layout(gap)), HasSubstr("shard 1 starts at row 6; expected 5"));

  VariableLayout none = make_layout("emb", {9, 20}, 2);
  none.shards.clear();
  EXPECT_THAT(message(validate_layout(none)), HasSubstr("the layout has no shards"));
}

// --- locate_row (spec V9) ----------------------------------------------------

TEST(LocateRowTest, NineRowsInTwoShards) {
  VariableLayout v = make_layout("emb", {9, 20}, 2);  // [5, 4]
  EXPECT_EQ(*locate_row(v, 4), (RowLocation{0, 4}));
  EXPECT_EQ(*locate_row(v, 5), (RowLocation{1, 0}));
  EXPECT_EQ(*locate_row(v, 8), (RowLocation{1, 3}));
  EXPECT_EQ(*locate_row(v, 0), (RowLocation{0, 0}));
}

TEST(LocateRowTest, AgreesWithShardOffsetsForEverySplit) {
  for (std::int64_t n = 1; n <= 30; ++n) {
    for (std::int64_t k = 1; k <= n; ++k) {
      VariableLayout v = make_layout("v", {n}, k);
      for (std::int64_t g = 0; g < n; ++g) {
        auto loc = locate_row(v, g);
        ASSERT_TRUE(loc.ok()) << loc.status();
        const ShardPlacement& s = v.shards[loc->shard];
        ASSERT_GE(g, s.row_offset) << "n=" << n << " k=" << k << " g=" << g;
        ASSERT_LT(g, s.row_offset + s.rows) << "n=" << n << " k=" << k << " g=" << g;
        ASSERT_EQ(loc->local_row, g - s.row_offset);
      }
    }
  }
}

TEST(LocateRowTest, OutOfRangeIdsNameTheVariableAndTheId) {
  VariableLayout v = make_layout("emb", {9, 20}, 2);
  auto past = locate_row(v, 9);
  EXPECT_EQ(past.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(past.status().message(), "variable \"emb\": row id 9 is out of range: the variable has 9 rows (0..8)");
  auto negative = locate_row(v, -1);
  EXPECT_EQ(negative.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(negative.status().message(), "variable \"emb\": row id -1 is negative");
}

// --- Embedding lookup (spec V10) ---------------------------------------------

TEST(EmbeddingLookupTest, OneGatherPerTouchedShard) {
  // CCT testEmbeddingLookup: 3 shards of a (5,2) table; ids [0,3,4].
  VariableLayout v = make_layout("table", {5, 2}, 3);
  ASSERT_EQ(v.shards.size(), 3u);
  std::vector<Matrix> shards = *split_dense(v, counting(5, 2));

  int gathers = 0;
  auto result = embedding_lookup(v, {0, 3, 4}, [&](const ShardGather& g) -> StatusOr<Matrix> {
    ++gathers;
    return gather_rows(shards[g.shard], g.local_rows);
  });
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(gathers, 3);
  EXPECT_EQ(*result, mat({{1, 2}, {7, 8}, {9, 10}}));
}

TEST(EmbeddingLookupTest, PlanAsksEachShardOnceForEachRowOnce) {
  VariableLayout v = make_layout("table", {5, 2}, 3);  // rows [2, 2, 1]
  auto plan = plan_lookup(v, {3, 0, 3, 1, 0});
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->gathers.size(), 2u);  // shard 2 is not touched
  EXPECT_EQ(plan->gathers[0].shard, 0u);
  EXPECT_EQ(plan->gathers[0].local_rows, (RowIds{0, 1}));
  EXPECT_EQ(plan->gathers[1].shard, 1u);
  EXPECT_EQ(plan->gathers[1].local_rows, (RowIds{1}));

  std::vector<Matrix> shards = *split_dense(v, counting(5, 2));
  std::vector<Matrix> gathered;
  for (const auto& g : plan->gathers) gathered.push_back(*gather_rows(shards[g.shard], g.local_rows));
  auto result = assemble(*plan, gathered);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(*result, mat({{7, 8}, {1, 2}, {7, 8}, {3, 4}, {1, 2}}));
}

TEST(EmbeddingLookupTest, TutorialVocabularyOfNine) {
  VariableLayout v = make_layout("embedding", {9, 20}, 2);
  Matrix table = counting(9, 20);
  std::vector<Matrix> shards = *split_dense(v, table);
  RowIds ids = {8, 0, 5, 4, 5};
  auto result = embedding_lookup(v, ids, [&](const ShardGather& g) { return gather_rows(shards[g.shard], g.local_rows); });
  ASSERT_TRUE(result.ok()) << result.status();
  for (std::size_t i = 0; i < ids.size(); ++i)
    EXPECT_EQ(result->row(static_cast<Eigen::Index>(i)), table.row(ids[i])) << "id " << ids[i];
}

TEST(EmbeddingLookupTest, NoIdsNoGathers) {
  VariableLayout v = make_layout("table", {5, 2}, 3);
  auto plan = plan_lookup(v, {});
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->gathers.empty());
  auto result = assemble(*plan, {});
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->rows(), 0);
  EXPECT_EQ(result->cols(), 2);
}

TEST(EmbeddingLookupTest, BadIdsAndBadGathersAreErrors) {
  VariableLayout v = make_layout("table", {5, 2}, 3);
  auto plan = plan_lookup(v, {0, 5});
  EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(message(plan.status()), HasSubstr("variable \"table\": row id 5 is out of range"));

  auto good = plan_lookup(v, {0, 3});
  ASSERT_TRUE(good.ok());
  auto too_few = assemble(*good, {Matrix::Zero(1, 2)});
  EXPECT_EQ(too_few.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(message(too_few.status()), HasSubstr("got 1 gathered matrices for 2 gathers"));
  auto wrong_shape = assemble(*good, {Matrix::Zero(1, 2), Matrix::Zero(2, 2)});
  EXPECT_EQ(wrong_shape.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(message(wrong_shape.status()), HasSubstr("the gather from shard 1 returned 2x2; expected 1x2"));

  auto failed = embedding_lookup(v, {0}, [](const ShardGather&) -> StatusOr<Matrix> {
    return absl::UnavailableError("ps:0 is down");
  });
  EXPECT_EQ(failed.status().code(), StatusCode::kUnavailable);

  EXPECT_EQ(gather_rows(Matrix::Zero(2, 2), {2}).status().code(), StatusCode::kInvalidArgument);
}

// --- split_sparse ------------------------------------------------------------

TEST(SplitSparseTest, RoutesRowsAndSumsDuplicates) {
  VariableLayout v = make_layout("emb", {5, 2}, 3);  // rows [2, 2, 1]
  RowIds rows = {3, 0, 3, 4, 1, 0};
  Matrix values = mat({{1, 1}, {2, 2}, {10, 10}, {5, 5}, {7, 7}, {100, 100}});
  auto split = split_sparse(v, rows, values);
  ASSERT_TRUE(split.ok()) << split.status();
  ASSERT_EQ(split->size(), 3u);

  EXPECT_EQ((*split)[0].shard, 0u);
  EXPECT_EQ((*split)[0].update.rows, (RowIds{0, 1}));
  EXPECT_EQ((*split)[0].update.values, mat({{102, 102}, {7, 7}}));

  EXPECT_EQ((*split)[1].shard, 1u);
  EXPECT_EQ((*split)[1].update.rows, (RowIds{1}));  // global 3 = shard 1, local 1
  EXPECT_EQ((*split)[1].update.values, mat({{11, 11}}));

  EXPECT_EQ((*split)[2].shard, 2u);
  EXPECT_EQ((*split)[2].update.rows, (RowIds{0}));
  EXPECT_EQ((*split)[2].update.values, mat({{5, 5}}));
}

TEST(SplitSparseTest, UntouchedShardsAreLeftOut) {
  VariableLayout v = make_layout("emb", {9, 20}, 2);
  Matrix values = Matrix::Ones(2, 20);
  auto split = split_sparse(v, {8, 6}, values);
  ASSERT_TRUE(split.ok());
  ASSERT_EQ(split->size(), 1u);
  EXPECT_EQ((*split)[0].shard, 1u);
  EXPECT_EQ((*split)[0].update.rows, (RowIds{1, 3}));

  auto none = split_sparse(v, {}, Matrix());
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

// An embedding's plan hands ParameterClient ascending distinct ids, which
// plan_lookup and split_sparse route in one pass without a sort: the result
// must be what the same ids in any order, repeated, give.
TEST(SplitSparseTest, AscendingDistinctIdsGiveWhatAnyOrderGives) {
  VariableLayout uneven = make_layout("emb", {50, 3}, 3);  // an automatic placement's ranges
  uneven.shards[0].rows = 7;
  uneven.shards[1].row_offset = 7;
  uneven.shards[1].rows = 30;
  uneven.shards[2].row_offset = 37;
  uneven.shards[2].rows = 13;
  std::mt19937 random(3);
  for (const VariableLayout& v : {make_layout("emb", {50, 3}, 4), uneven}) {
    SCOPED_TRACE(v.shards.size());
    RowIds ascending;
    for (std::int64_t id = 0; id < 50; ++id)
      if (random() % 3 == 0) ascending.push_back(id);
    RowIds any_order = ascending;
    any_order.insert(any_order.end(), ascending.begin(), ascending.begin() + 3);  // repeats
    std::shuffle(any_order.begin(), any_order.end(), random);

    const Matrix table = counting(50, 3);
    auto gather = [&](const VariableLayout& layout) {
      return [&](const ShardGather& g) -> StatusOr<Matrix> {
        RowIds global;
        for (std::int64_t r : g.local_rows) global.push_back(layout.shards[g.shard].row_offset + r);
        return gather_rows(table, global);
      };
    };
    auto fast = embedding_lookup(v, ascending, gather(v));
    ASSERT_TRUE(fast.ok()) << fast.status();
    EXPECT_EQ(*fast, *gather_rows(table, ascending));
    auto slow = embedding_lookup(v, any_order, gather(v));
    ASSERT_TRUE(slow.ok()) << slow.status();
    EXPECT_EQ(*slow, *gather_rows(table, any_order));
    EXPECT_EQ(plan_lookup(v, ascending)->gathers.size(), plan_lookup(v, any_order)->gathers.size());

    // The same gradient rows, ascending and shuffled: the same updates.
    Matrix values(static_cast<Eigen::Index>(ascending.size()), 3);
    for (Eigen::Index i = 0; i < values.rows(); ++i) values.row(i).setConstant(static_cast<float>(ascending[static_cast<std::size_t>(i)]));
    std::vector<std::size_t> order(ascending.size());
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), random);
    RowIds shuffled;
    Matrix shuffled_values(values.rows(), 3);
    for (std::size_t i = 0; i < order.size(); ++i) {
      shuffled.push_back(ascending[order[i]]);
      shuffled_values.row(static_cast<Eigen::Index>(i)) = values.row(static_cast<Eigen::Index>(order[i]));
    }
    auto in_order = split_sparse(v, ascending, values);
    auto out_of_order = split_sparse(v, shuffled, shuffled_values);
    ASSERT_TRUE(in_order.ok() && out_of_order.ok());
    ASSERT_EQ(in_order->size(), out_of_order->size());
    for (std::size_t i = 0; i < in_order->size(); ++i) {
      EXPECT_EQ((*in_order)[i].shard, (*out_of_order)[i].shard);
      EXPECT_EQ((*in_order)[i].update.rows, (*out_of_order)[i].update.rows);
      EXPECT_EQ((*in_order)[i].update.values, (*out_of_order)[i].update.values);
    }
  }
}

TEST(SplitSparseTest, MismatchesAreErrors) {
  VariableLayout v = make_layout("emb", {9, 20}, 2);
  auto count = split_sparse(v, {1, 2}, Matrix::Ones(3, 20));
  EXPECT_EQ(count.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(message(count.status()), HasSubstr("variable \"emb\": 2 row ids but 3 rows of values"));
  auto cols = split_sparse(v, {1}, Matrix::Ones(1, 19));
  EXPECT_EQ(cols.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(message(cols.status()), HasSubstr("values have 19 columns; the variable has 20"));
  auto range = split_sparse(v, {1, 9}, Matrix::Ones(2, 20));
  EXPECT_EQ(range.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(message(range.status()), HasSubstr("row id 9 is out of range"));
}

// --- Dense values and row slices ---------------------------------------------

TEST(DenseTest, ThirteenRowsInFiveShards) {
  VariableLayout v = make_layout("v", {13}, 5);
  Matrix full(13, 1);
  for (int i = 0; i < 13; ++i) full(i, 0) = static_cast<float>(i);
  auto shards = split_dense(v, full);
  ASSERT_TRUE(shards.ok()) << shards.status();
  std::vector<std::vector<float>> got;
  for (const Matrix& m : *shards) got.emplace_back(m.data(), m.data() + m.size());
  EXPECT_EQ(got, (std::vector<std::vector<float>>{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {9, 10}, {11, 12}}));
  auto back = concat_shards(v, *shards);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, full);
}

TEST(DenseTest, PsstBasicSplitOfFiveByTwo) {
  // PSST testBasic: a (5,2) value 0..9 in 2 shards is [[0,1],[2,3],[4,5]] and [[6,7],[8,9]].
  VariableLayout v = make_layout("v", {5, 2}, 2);
  Matrix full = counting(5, 2).array() - 1;
  auto shards = split_dense(v, full);
  ASSERT_TRUE(shards.ok());
  EXPECT_EQ((*shards)[0], mat({{0, 1}, {2, 3}, {4, 5}}));
  EXPECT_EQ((*shards)[1], mat({{6, 7}, {8, 9}}));
}

TEST(DenseTest, ShapeMismatchesAreErrors) {
  VariableLayout v = make_layout("w", {5, 2}, 2);
  auto wrong = split_dense(v, Matrix::Zero(5, 3));
  EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(message(wrong.status()), HasSubstr("variable \"w\": the value is 5x3; the variable is 5x2"));
  auto count = concat_shards(v, {Matrix::Zero(3, 2)});
  EXPECT_EQ(count.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(message(count.status()), HasSubstr("got 1 shard values for 2 shards"));
  auto shape = concat_shards(v, {Matrix::Zero(3, 2), Matrix::Zero(3, 2)});
  EXPECT_EQ(shape.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(message(shape.status()), HasSubstr("the value of shard 1 is 3x2; expected 2x2"));
}

// A one-shard variable's block is the variable: given up by the caller (a
// worker's pull), it is moved, not copied; a block of the wrong shape is
// still an error.
TEST(DenseTest, AOneShardBlockGivenUpIsMovedNotCopied) {
  VariableLayout v = make_layout("w", {5, 2}, 1);
  std::vector<Matrix> blocks{counting(5, 2)};
  const float* storage = blocks[0].data();
  auto whole = concat_shards(v, std::move(blocks));
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(*whole, counting(5, 2));
  EXPECT_EQ(whole->data(), storage);

  auto wrong = concat_shards(v, std::vector<Matrix>{Matrix::Zero(4, 2)});
  EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(message(wrong.status()), HasSubstr("the value of shard 0 is 4x2; expected 5x2"));
}

TEST(RowSliceTest, SliceAcrossAShardBoundary) {
  VariableLayout v = make_layout("emb", {9, 2}, 2);  // [5, 4]
  auto slices = plan_row_slice(v, 3, 7);
  ASSERT_TRUE(slices.ok()) << slices.status();
  EXPECT_EQ(*slices, (std::vector<ShardSlice>{{0, 3, 5}, {1, 0, 2}}));

  Matrix full = counting(9, 2);
  std::vector<Matrix> shards = *split_dense(v, full);
  std::vector<Matrix> pieces;
  for (const ShardSlice& s : *slices) pieces.emplace_back(shards[s.shard].middleRows(s.begin, s.end - s.begin));
  auto result = assemble_row_slice(v, *slices, pieces);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(*result, full.middleRows(3, 4));
}

TEST(RowSliceTest, SliceWithinOneShardAndEmptySlice) {
  VariableLayout v = make_layout("emb", {9, 2}, 2);
  EXPECT_EQ(*plan_row_slice(v, 6, 9), (std::vector<ShardSlice>{{1, 1, 4}}));
  EXPECT_EQ(*plan_row_slice(v, 0, 9), (std::vector<ShardSlice>{{0, 0, 5}, {1, 0, 4}}));
  auto empty = plan_row_slice(v, 4, 4);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
  auto result = assemble_row_slice(v, {}, {});
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->rows(), 0);
}

TEST(RowSliceTest, BoundsAreCheckedNotClamped) {
  VariableLayout v = make_layout("emb", {9, 2}, 2);
  for (auto [b, e] : std::vector<std::pair<std::int64_t, std::int64_t>>{{-1, 3}, {5, 4}, {0, 10}}) {
    auto s = plan_row_slice(v, b, e);
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << b << ":" << e;
    EXPECT_THAT(message(s.status()), HasSubstr("is not within [0:9]"));
  }
  auto slices = *plan_row_slice(v, 3, 7);
  auto wrong = assemble_row_slice(v, slices, {Matrix::Zero(2, 2), Matrix::Zero(3, 2)});
  EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(message(wrong.status()), HasSubstr("piece 1 (shard 1) is 3x2; expected 2x2"));
}

TEST(ScalarTest, AScalarIsOneRowOfOneColumn) {
  VariableLayout v = make_layout("step", {}, 1);
  EXPECT_EQ(*locate_row(v, 0), (RowLocation{0, 0}));
  Matrix value = Matrix::Constant(1, 1, 7.0f);
  auto shards = split_dense(v, value);
  ASSERT_TRUE(shards.ok());
  EXPECT_EQ(*concat_shards(v, *shards), value);
}

}  // namespace
}  // namespace twinps
