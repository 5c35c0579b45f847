#include "core/variables/auto_placement.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/variables/partitioner.h"

namespace twinps {
namespace {

using ::testing::HasSubstr;

VariableDemand embedding(std::int64_t rows, std::int64_t cols, std::int64_t shards, std::int64_t per_step,
                         double zipf = 0) {
  VariableDemand d;
  d.name = "embedding";
  d.shape = {rows, cols};
  d.shards = shards;
  d.rows_per_step = per_step;
  d.zipf_exponent = zipf;
  return d;
}
VariableDemand scalar(const std::string& name, bool pulled, bool updated) {
  VariableDemand d;
  d.name = name;
  d.pulled = pulled;
  d.updated = updated;
  return d;
}
double max_of(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }

TEST(ExpectedDistinctRowsTest, UniformDrawsMatchTheClosedForm) {
  // n rows, d uniform draws: n (1 - (1 - 1/n)^d) distinct, ~632.3 for n = d = 1000.
  EXPECT_NEAR(expected_distinct_rows_in(1000, 0, 1000, 0, 1000), 1000 * (1 - std::pow(1 - 1e-3, 1000)), 1e-6);
  // A quarter of the rows holds a quarter of them.
  EXPECT_NEAR(expected_distinct_rows_in(1000, 0, 1000, 0, 250), 250 * (1 - std::pow(1 - 1e-3, 1000)), 1e-6);
}

TEST(ExpectedDistinctRowsTest, AddsUpOverRangesAndNeverExceedsTheDraws) {
  const double whole = expected_distinct_rows_in(100000, 1.1, 512, 0, 100000);
  const double parts = expected_distinct_rows_in(100000, 1.1, 512, 0, 37) +
                       expected_distinct_rows_in(100000, 1.1, 512, 37, 5000) +
                       expected_distinct_rows_in(100000, 1.1, 512, 5000, 100000);
  EXPECT_NEAR(whole, parts, 1e-6 * whole);
  EXPECT_LT(whole, 512);
  // Skewed draws repeat rows: far fewer distinct than uniform ones.
  EXPECT_LT(whole, 0.75 * expected_distinct_rows_in(100000, 0, 512, 0, 100000));
}

TEST(AutoPlacementTest, AUniformEmbeddingKeepsTheDivLayout) {
  auto plan = plan_auto_placement({embedding(1000, 8, 4, 64)}, 4);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ((*plan)[0].shard_rows, div_split(1000, 4));
  // One shard per ps.
  std::vector<int> ps = (*plan)[0].shard_ps;
  std::sort(ps.begin(), ps.end());
  EXPECT_EQ(ps, (std::vector<int>{0, 1, 2, 3}));
}

TEST(AutoPlacementTest, ASkewedEmbeddingIsSplitByWorkNotByRows) {
  // The unbalanced_shards scenario's embedding: 512 lookups per step, zipf 1.1.
  auto plan = plan_auto_placement({embedding(100000, 32, 4, 512, 1.1)}, 4);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const auto& p = (*plan)[0];
  ASSERT_EQ(p.shard_rows.size(), 4u);
  EXPECT_EQ(std::accumulate(p.shard_rows.begin(), p.shard_rows.end(), std::int64_t{0}), 100000);
  // The popular head is a small shard, the tail a large one.
  EXPECT_LT(p.shard_rows.front(), p.shard_rows.back() / 10);
  // Each shard's expected work is within 10 % of the others'.
  EXPECT_LT(max_of(p.shard_work_us), 1.1 * *std::min_element(p.shard_work_us.begin(), p.shard_work_us.end()));
  // Round-robin's equal row ranges: the first shard does most of the work.
  const double head = expected_distinct_rows_in(100000, 1.1, 512, 0, 25000);
  const double tail = expected_distinct_rows_in(100000, 1.1, 512, 75000, 100000);
  EXPECT_GT(head, 3 * tail);
}

TEST(AutoPlacementTest, HotScalarsGoToDifferentPsAndTheBusiestDoesLessThanRoundRobins) {
  // The hotspot scenario: an embedding sharded over 4 ps with one lookup per
  // step, a learning rate every step reads, global_step (used only when
  // hot), the iterations counter every step adds to, the flag (read only by
  // infinite steps, which this scenario has none of).
  const std::vector<VariableDemand> model{embedding(100000, 16, 4, 1), scalar("learning_rate", true, false),
                                          [] {
                                            VariableDemand d = scalar("global_step", true, true);
                                            d.per_step = false;
                                            return d;
                                          }(),
                                          scalar("iterations", false, true), [] {
                                            VariableDemand d = scalar("do_infinite_step", true, false);
                                            d.per_step = false;
                                            return d;
                                          }()};
  PsWorkPrices prices;
  prices.per_request_us = 500;
  auto plan = plan_auto_placement(model, 4, prices);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const int lr = (*plan)[1].shard_ps[0], iterations = (*plan)[3].shard_ps[0];
  EXPECT_NE(lr, iterations);
  // Round-robin in creation order: the shards on ps 0..3, learning_rate on
  // ps 0, global_step on 1, iterations on 2, the flag on 3.
  std::vector<VariablePlan> round_robin = *plan;
  for (std::size_t s = 0; s < 4; ++s) round_robin[0].shard_ps[s] = static_cast<int>(s);
  round_robin[1].shard_ps = {0};
  round_robin[2].shard_ps = {1};
  round_robin[3].shard_ps = {2};
  round_robin[4].shard_ps = {3};
  EXPECT_LT(max_of(work_per_ps(*plan, 4)), 0.85 * max_of(work_per_ps(round_robin, 4)));
}

TEST(AutoPlacementTest, AVariableAboveAFairShareIsShardedFurther) {
  // One dense 1000 x 1000 variable read and updated by every step dwarfs the
  // counter: it is split over the three ps though its partitioner asked for one.
  VariableDemand big;
  big.name = "dense";
  big.shape = {1000, 1000};
  auto plan = plan_auto_placement({big, scalar("iterations", false, true)}, 3);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ((*plan)[0].shard_rows, div_split(1000, 3));
  std::vector<int> ps = (*plan)[0].shard_ps;
  std::sort(ps.begin(), ps.end());
  EXPECT_EQ(ps, (std::vector<int>{0, 1, 2}));
}

TEST(AutoPlacementTest, TheSamePlanEveryTime) {
  const std::vector<VariableDemand> model{embedding(5000, 8, 3, 100, 0.8), scalar("a", true, true),
                                          scalar("b", true, true), scalar("c", true, false)};
  auto first = plan_auto_placement(model, 2);
  auto second = plan_auto_placement(model, 2);
  ASSERT_TRUE(first.ok() && second.ok());
  for (std::size_t i = 0; i < model.size(); ++i) {
    EXPECT_EQ((*first)[i].shard_rows, (*second)[i].shard_rows);
    EXPECT_EQ((*first)[i].shard_ps, (*second)[i].shard_ps);
  }
}

TEST(AutoPlacementTest, BadInputNamesTheProblem) {
  EXPECT_THAT(std::string(plan_auto_placement({scalar("a", true, true)}, 0).status().message()),
              HasSubstr("at least one parameter server"));
  VariableDemand no_shards = embedding(10, 2, 0, 1);
  EXPECT_THAT(std::string(plan_auto_placement({no_shards}, 2).status().message()),
              HasSubstr("\"embedding\": shards must be >= 1"));
  VariableDemand negative = embedding(10, 2, 1, -1);
  EXPECT_THAT(std::string(plan_auto_placement({negative}, 2).status().message()), HasSubstr("rows_per_step"));
}

}  // namespace
}  // namespace twinps
