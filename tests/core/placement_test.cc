#include "core/variables/placement.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace twinps {
namespace {

using ::testing::HasSubstr;
using Ints = std::vector<std::int64_t>;

PartitionerPtr fixed(std::int64_t n) { return *FixedShardsPartitioner::create(n); }

std::vector<int> ps_of(const VariableLayout& v) {
  std::vector<int> out;
  for (const auto& s : v.shards) out.push_back(s.ps);
  return out;
}
Ints rows_of(const VariableLayout& v) {
  Ints out;
  for (const auto& s : v.shards) out.push_back(s.rows);
  return out;
}
std::string message(const Status& s) { return std::string(s.message()); }

TEST(VariablePlacerTest, RoundRobinOverThreePs) {
  // PSST testVariablePlacement: v2 -> ps0, v3 -> ps1, v4 -> ps2, v5 -> ps0.
  VariablePlacer placer(3);
  std::vector<int> placed;
  for (const char* name : {"v2", "v3", "v4", "v5"}) {
    auto v = placer.create(name, {});
    ASSERT_TRUE(v.ok()) << v.status();
    ASSERT_EQ(v->shards.size(), 1u);
    placed.push_back(v->shards[0].ps);
  }
  EXPECT_EQ(placed, (std::vector<int>{0, 1, 2, 0}));
}

TEST(VariablePlacerTest, ShardsConsumeTheSameCounter) {
  // Spec V6: scalar a -> ps0; b with 2 shards -> part_0 ps1, part_1 ps2; c -> ps0.
  VariablePlacer placer(3, fixed(2));
  auto a = placer.create("a", {});
  auto b = placer.create("b", {4, 3});
  auto c = placer.create("c", {});
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(ps_of(*a), (std::vector<int>{0}));
  EXPECT_EQ(ps_of(*b), (std::vector<int>{1, 2}));
  EXPECT_EQ(ps_of(*c), (std::vector<int>{0}));
  EXPECT_EQ(b->shard_name(0), "b/part_0");
  EXPECT_EQ(b->shard_name(1), "b/part_1");
  EXPECT_EQ(a->shard_name(0), "a");
  // Shard ids run through the whole model in creation order.
  EXPECT_EQ(a->shards[0].id, 0u);
  EXPECT_EQ(b->shards[0].id, 1u);
  EXPECT_EQ(b->shards[1].id, 2u);
  EXPECT_EQ(c->shards[0].id, 3u);
  EXPECT_EQ(placer.num_shards(), 4u);
}

TEST(VariablePlacerTest, TutorialEmbeddingOfNineRows) {
  VariablePlacer placer(2, fixed(2));
  auto v = placer.create("embedding", {9, 20});
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_EQ(v->shards.size(), 2u);
  EXPECT_EQ(rows_of(*v), (Ints{5, 4}));  // shards (5,20) and (4,20)
  EXPECT_EQ(ps_of(*v), (std::vector<int>{0, 1}));
  EXPECT_EQ(v->shards[1].row_offset, 5);
  EXPECT_EQ(v->cols(), 20);
}

TEST(VariablePlacerTest, TutorialEmbeddingOfEightRows) {
  VariablePlacer placer(2, fixed(2));
  auto v = placer.create("embedding", {8, 20});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(rows_of(*v), (Ints{4, 4}));
  EXPECT_EQ(ps_of(*v), (std::vector<int>{0, 1}));
}

TEST(VariablePlacerTest, FourShardsOverTwoPsAlternate) {
  // PSST: a (10,) variable in 4 shards with 2 ps -> [3,3,2,2] on ps0,ps1,ps0,ps1.
  VariablePlacer placer(2, fixed(4));
  auto v = placer.create("v", {10});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(rows_of(*v), (Ints{3, 3, 2, 2}));
  EXPECT_EQ(ps_of(*v), (std::vector<int>{0, 1, 0, 1}));
  Ints offsets;
  for (const auto& s : v->shards) offsets.push_back(s.row_offset);
  EXPECT_EQ(offsets, (Ints{0, 3, 6, 8}));
}

TEST(VariablePlacerTest, ThirteenRowsInFiveShards) {
  VariablePlacer placer(5, fixed(5));
  auto v = placer.create("v", {13});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(rows_of(*v), (Ints{3, 3, 3, 2, 2}));
}

TEST(VariablePlacerTest, PartitionOfOneIsAnOrdinaryVariable) {
  VariablePlacer placer(2, *MinSizePartitioner::create(256 << 10, 8));
  auto v = placer.create("dense/kernel", {1000, 64});  // 256000 B < 256 KiB
  ASSERT_TRUE(v.ok());
  ASSERT_EQ(v->shards.size(), 1u);
  EXPECT_EQ(v->shard_name(0), "dense/kernel");
  EXPECT_EQ(v->shards[0].rows, 1000);
}

TEST(VariablePlacerTest, ScalarsAndEmptyVariablesAreNeverPartitioned) {
  int calls = 0;
  VariablePlacer placer(2, make_function_partitioner(
                               [&](const Shape&, std::int64_t) {
                                 ++calls;
                                 return Ints{2, 1};
                               },
                               "two"));
  auto scalar = placer.create("step", {}, VariableKind::kCounter, 8);
  auto empty = placer.create("empty", {0, 4});
  ASSERT_TRUE(scalar.ok() && empty.ok());
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(scalar->shards.size(), 1u);
  EXPECT_EQ(scalar->shards[0].rows, 1);
  EXPECT_EQ(scalar->kind, VariableKind::kCounter);
  ASSERT_EQ(empty->shards.size(), 1u);
  EXPECT_EQ(empty->shards[0].rows, 0);
}

TEST(VariablePlacerTest, PartitionerSeesShapeAndElementBytes) {
  Shape seen_shape;
  std::int64_t seen_bytes = -1;
  VariablePlacer placer(1, make_function_partitioner(
                               [&](const Shape& s, std::int64_t b) {
                                 seen_shape = s;
                                 seen_bytes = b;
                                 return Ints{1, 1, 1};
                               },
                               "spy"));
  ASSERT_TRUE(placer.create("w", {4, 3, 2}, VariableKind::kTrainable, 8).ok());
  EXPECT_EQ(seen_shape, (Shape{4, 3, 2}));
  EXPECT_EQ(seen_bytes, 8);
}

class InvalidPartitionTest : public ::testing::TestWithParam<Ints> {};

TEST_P(InvalidPartitionTest, IsRejectedAndConsumesNothing) {
  // PSST testInvalidPartitioner: [], [0,1,1] and [2,2,1] all fail.
  const Ints result = GetParam();
  VariablePlacer placer(3, make_function_partitioner([=](const Shape&, std::int64_t) { return result; }, "bad"));
  auto v = placer.create("v", {4, 3});
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(message(v.status()), HasSubstr("variable \"v\": bad returned ["));
  EXPECT_THAT(message(v.status()), HasSubstr("a partitioner must return [n, 1, ...] with n >= 1"));
  EXPECT_TRUE(placer.variables().empty());
  EXPECT_EQ(placer.next_ps(), 0);
  EXPECT_EQ(placer.num_shards(), 0u);
  EXPECT_EQ(placer.find("v"), nullptr);
}

INSTANTIATE_TEST_SUITE_P(V3, InvalidPartitionTest,
                         ::testing::Values(Ints{}, Ints{0, 1, 1}, Ints{2, 2, 1}, Ints{-1, 1}, Ints{3, 1, 0}),
                         [](const auto& info) {
                           std::string name = "Result";
                           for (auto x : info.param) name += x < 0 ? "_minus" + std::to_string(-x) : "_" + std::to_string(x);
                           return info.param.empty() ? std::string("Empty") : name;
                         });

TEST(VariablePlacerTest, AbsurdShardCountsAreRejected) {
  VariablePlacer placer(2, *MaxSizePartitioner::create(4));
  auto v = placer.create("huge", {std::int64_t{1} << 20, 1});
  EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(message(v.status()), HasSubstr("at most 65536 are supported"));
}

TEST(VariablePlacerTest, ColocateWithUsesTheSamePsAndSkipsTheCounter) {
  VariablePlacer placer(3, fixed(2));
  ASSERT_TRUE(placer.create("a", {}).ok());                // ps0
  ASSERT_TRUE(placer.create("b", {}).ok());                // ps1
  auto slot = placer.colocate_with("a", "a/momentum", {10, 4});
  ASSERT_TRUE(slot.ok()) << slot.status();
  EXPECT_EQ(ps_of(*slot), (std::vector<int>{0}));
  EXPECT_EQ(slot->shards.size(), 1u);  // never partitioned, though Fixed(2) applies to create()
  EXPECT_EQ(slot->shards[0].rows, 10);
  EXPECT_EQ(slot->shards[0].id, 2u);
  auto c = placer.create("c", {});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(ps_of(*c), (std::vector<int>{2}));  // the counter did not move for the slot
}

TEST(VariablePlacerTest, ColocateWithAShardOfAShardedVariable) {
  VariablePlacer placer(3, fixed(2));
  ASSERT_TRUE(placer.create("emb", {9, 4}).ok());  // part_0 ps0, part_1 ps1
  auto slot = placer.colocate_with("emb/part_1", "emb/part_1/accumulator", {4, 4});
  ASSERT_TRUE(slot.ok()) << slot.status();
  EXPECT_EQ(ps_of(*slot), (std::vector<int>{1}));

  auto whole = placer.colocate_with("emb", "x", {});
  EXPECT_EQ(whole.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(message(whole.status()), HasSubstr("it is sharded over 2 shards; name one of them, e.g. \"emb/part_0\""));
  auto missing = placer.colocate_with("nope", "y", {});
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(message(missing.status()), HasSubstr("cannot colocate with \"nope\": no such variable or shard"));
}

TEST(VariablePlacerTest, DuplicateNamesAreRejected) {
  VariablePlacer placer(2, fixed(2));
  ASSERT_TRUE(placer.create("w", {4}).ok());
  auto again = placer.create("w", {4});
  EXPECT_EQ(again.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(message(again.status()), HasSubstr("variable \"w\": the name is already used by variable \"w\""));
  auto colocated = placer.colocate_with("w/part_0", "w", {});
  EXPECT_EQ(colocated.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(placer.variables().size(), 1u);
}

TEST(VariablePlacerTest, VariableAndShardNamesCannotCollide) {
  VariablePlacer placer(2, fixed(2));
  ASSERT_TRUE(placer.create("emb", {4, 2}).ok());
  auto shadow = placer.create("emb/part_1", {});
  EXPECT_EQ(shadow.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(message(shadow.status()), HasSubstr("already used by shard 1 of variable \"emb\""));

  ASSERT_TRUE(placer.create("t/part_0", {}).ok());
  auto sharded = placer.create("t", {4, 2});
  EXPECT_EQ(sharded.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(message(sharded.status()),
              HasSubstr("its shard name \"t/part_0\" is already used by variable \"t/part_0\""));
}

TEST(VariablePlacerTest, BadInputIsInvalidArgument) {
  VariablePlacer placer(2);
  auto unnamed = placer.create("", {3});
  EXPECT_EQ(unnamed.status().code(), StatusCode::kInvalidArgument);
  auto negative = placer.create("w", {3, -1});
  EXPECT_EQ(negative.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(message(negative.status()), HasSubstr("variable \"w\": shape (3,-1) has a negative dimension"));
  auto overflow = placer.create("big", {std::int64_t{1} << 40, std::int64_t{1} << 40});
  EXPECT_EQ(overflow.status().code(), StatusCode::kInvalidArgument);
  auto bytes = placer.create("w", {3}, VariableKind::kTrainable, -4);
  EXPECT_EQ(bytes.status().code(), StatusCode::kInvalidArgument);

  VariablePlacer no_ps(0);
  auto v = no_ps.create("w", {3});
  EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(message(v.status()), HasSubstr("0 parameter servers"));
}

TEST(VariablePlacerTest, VariablesInCreationOrderAndFind) {
  VariablePlacer placer(2, fixed(2));
  ASSERT_TRUE(placer.create("b", {6, 2}).ok());
  ASSERT_TRUE(placer.create("a", {}).ok());
  ASSERT_TRUE(placer.colocate_with("a", "a/slot", {}).ok());
  ASSERT_EQ(placer.variables().size(), 3u);
  EXPECT_EQ(placer.variables()[0].name, "b");
  EXPECT_EQ(placer.variables()[1].name, "a");
  EXPECT_EQ(placer.variables()[2].name, "a/slot");
  ASSERT_NE(placer.find("b"), nullptr);
  EXPECT_EQ(placer.find("b")->shards.size(), 2u);
  EXPECT_EQ(placer.find("b/part_0"), nullptr);  // a shard, not a variable
  EXPECT_EQ(placer.find("c"), nullptr);
}

}  // namespace
}  // namespace twinps
