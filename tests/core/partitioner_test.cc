#include "core/variables/partitioner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace twinps {
namespace {

using ::testing::HasSubstr;
using Ints = std::vector<std::int64_t>;

PartitionerPtr fixed(std::int64_t n) { return *FixedShardsPartitioner::create(n); }
PartitionerPtr min_size(std::int64_t bytes, std::int64_t max_shards) { return *MinSizePartitioner::create(bytes, max_shards); }
PartitionerPtr max_size(std::int64_t bytes, std::optional<std::int64_t> max_shards = std::nullopt) {
  return *MaxSizePartitioner::create(bytes, max_shards);
}

constexpr std::int64_t KiB = 1024;
constexpr std::int64_t MiB = 1024 * KiB;

// One row of the worked table in spec V6.
struct TableRow {
  const char* name;
  std::function<PartitionerPtr()> partitioner;
  Shape shape;
  std::int64_t element_bytes;
  Ints partition;  // what the partitioner returns
  Ints split;      // rows per shard of the div split
};

class WorkedTableTest : public ::testing::TestWithParam<TableRow> {};

TEST_P(WorkedTableTest, PartitionerResultAndDivSplit) {
  const TableRow& row = GetParam();
  PartitionerPtr p = row.partitioner();
  Ints parts = p->partition(row.shape, row.element_bytes);
  EXPECT_EQ(parts, row.partition) << p->describe() << " on " << shape_string(row.shape);
  ASSERT_FALSE(parts.empty());
  EXPECT_EQ(div_split(row.shape[0], parts[0]), row.split);
}

Ints times(std::int64_t n, std::int64_t value) { return Ints(static_cast<std::size_t>(n), value); }

const TableRow kWorkedTable[] = {
    {"Fixed2_9x20", [] { return fixed(2); }, {9, 20}, 4, {2, 1}, {5, 4}},
    {"Fixed2_5x2", [] { return fixed(2); }, {5, 2}, 8, {2, 1}, {3, 2}},
    {"Fixed2_6x1", [] { return fixed(2); }, {6, 1}, 8, {2, 1}, {3, 3}},
    {"Fixed3_5x2", [] { return fixed(3); }, {5, 2}, 4, {3, 1}, {2, 2, 1}},
    {"Fixed4_10", [] { return fixed(4); }, {10}, 4, {4}, {3, 3, 2, 2}},
    {"Fixed4_3_MoreShardsThanRows", [] { return fixed(4); }, {3}, 4, {3}, {1, 1, 1}},
    {"Fixed2_10x3", [] { return fixed(2); }, {10, 3}, 4, {2, 1}, {5, 5}},
    {"MinSize4B_Max2_6x1", [] { return min_size(4, 2); }, {6, 1}, 4, {2, 1}, {3, 3}},
    {"MinSize4B_Max10_6x1", [] { return min_size(4, 10); }, {6, 1}, 4, {6, 1}, times(6, 1)},
    {"MinSize256KiB_Max2_1024x1024", [] { return min_size(256 * KiB, 2); }, {1024, 1024}, 4, {2, 1}, {512, 512}},
    {"MinSize256KiB_Max16_1024x1024", [] { return min_size(256 * KiB, 16); }, {1024, 1024}, 4, {16, 1}, times(16, 64)},
    {"MinSize256KiB_Max8_1000x64_NotSharded", [] { return min_size(256 * KiB, 8); }, {1000, 64}, 4, {1, 1}, {1000}},
    {"MinSize64MiB_Max2_10_NotSharded", [] { return min_size(64 * MiB, 2); }, {10}, 8, {1}, {10}},
    {"MaxSize4B_6x1", [] { return max_size(4); }, {6, 1}, 4, {6, 1}, times(6, 1)},
    {"MaxSize4B_Max2_6x1", [] { return max_size(4, 2); }, {6, 1}, 4, {2, 1}, {3, 3}},
    {"MaxSize1024B_6x1_NotSharded", [] { return max_size(1024); }, {6, 1}, 4, {1, 1}, {6}},
    {"MaxSize200B_9x20", [] { return max_size(200); }, {9, 20}, 4, {5, 1}, {2, 2, 2, 2, 1}},
    {"MaxSize100B_9x20", [] { return max_size(100); }, {9, 20}, 4, {9, 1}, times(9, 1)},
};

INSTANTIATE_TEST_SUITE_P(V6, WorkedTableTest, ::testing::ValuesIn(kWorkedTable),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(DivSplitTest, ThirteenRowsInFiveShards) {
  // The PSS docstring example: [[0,1,2],[3,4,5],[6,7,8],[9,10],[11,12]].
  EXPECT_EQ(div_split(13, 5), (Ints{3, 3, 3, 2, 2}));
}

TEST(DivSplitTest, EdgeCases) {
  EXPECT_EQ(div_split(7, 1), (Ints{7}));
  EXPECT_EQ(div_split(1, 5), (Ints{1}));
  EXPECT_EQ(div_split(0, 3), (Ints{0}));  // one empty shard
  EXPECT_EQ(div_split(-1, 2), Ints{});
  EXPECT_EQ(div_split(5, 0), Ints{});
}

TEST(DivSplitTest, SizesSumToRowsAndDifferByAtMostOne) {
  for (std::int64_t rows = 1; rows <= 40; ++rows) {
    for (std::int64_t parts = 1; parts <= 45; ++parts) {
      Ints sizes = div_split(rows, parts);
      ASSERT_EQ(static_cast<std::int64_t>(sizes.size()), std::min(rows, parts));
      std::int64_t sum = 0;
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        sum += sizes[i];
        if (i > 0) {
          EXPECT_TRUE(sizes[i] == sizes[i - 1] || sizes[i] == sizes[i - 1] - 1);
        }
      }
      EXPECT_EQ(sum, rows);
    }
  }
}

TEST(PartitionerTest, ScalarsHaveNoAxisToSplit) {
  EXPECT_EQ(fixed(3)->partition({}, 4), Ints{});
  EXPECT_EQ(min_size(4, 3)->partition({}, 4), Ints{});
  EXPECT_EQ(max_size(4)->partition({}, 4), Ints{});
}

TEST(PartitionerTest, MinSizeDefaultsAre256KiBAndOneShard) {
  auto p = MinSizePartitioner::create();
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)->partition({1024, 1024}, 4), (Ints{1, 1}));
  EXPECT_EQ((*p)->describe(), "MinSizePartitioner(min_shard_bytes=262144, max_shards=1, bytes_per_string=16)");
}

TEST(PartitionerTest, StringsAreSizedByBytesPerString) {
  // 100 strings of 16 bytes; 320 B per shard holds 20 -> 5 shards.
  auto max = MaxSizePartitioner::create(320);
  ASSERT_TRUE(max.ok());
  EXPECT_EQ((*max)->partition({100}, kStringElementBytes), (Ints{5}));
  // Counted as 32 bytes each, a shard holds 10 -> 10 shards.
  auto max32 = MaxSizePartitioner::create(320, std::nullopt, 32);
  EXPECT_EQ((*max32)->partition({100}, kStringElementBytes), (Ints{10}));
  // ceil(1600 / 100) = 16 shards wanted, capped by max_shards = 10.
  auto min = MinSizePartitioner::create(100, 10);
  EXPECT_EQ((*min)->partition({100}, kStringElementBytes), (Ints{10}));
}

TEST(PartitionerTest, HugeShapesDoNotOverflow) {
  const std::int64_t big = std::int64_t{1} << 40;
  EXPECT_EQ(min_size(1, 8)->partition({big, big}, 8), (Ints{8, 1}));
  EXPECT_EQ(max_size(1)->partition({4, big, big}, 8), (Ints{4, 1, 1}));
}

TEST(PartitionerTest, EmptyRowsOrNoRowsGiveOneShard) {
  EXPECT_EQ(max_size(4)->partition({0, 5}, 4), (Ints{1, 1}));
  EXPECT_EQ(max_size(4)->partition({5, 0}, 4), (Ints{1, 1}));
  EXPECT_EQ(min_size(4, 4)->partition({0, 5}, 4), (Ints{1, 1}));
}

TEST(PartitionerTest, FunctionPartitioner) {
  PartitionerPtr p = make_function_partitioner([](const Shape& s, std::int64_t) { return Ints{s[0], 1}; }, "rows");
  EXPECT_EQ(p->partition({3, 2}, 4), (Ints{3, 1}));
  EXPECT_EQ(p->describe(), "rows");
}

struct BadArgs {
  const char* name;
  std::function<Status()> create;
  const char* expected;
};

class PartitionerArgumentTest : public ::testing::TestWithParam<BadArgs> {};

TEST_P(PartitionerArgumentTest, EveryArgumentMustBeAtLeastOne) {
  Status s = GetParam().create();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr(GetParam().expected));
}

const BadArgs kBadArgs[] = {
    {"FixedZero", [] { return FixedShardsPartitioner::create(0).status(); },
     "FixedShardsPartitioner: num_shards must be >= 1, got 0"},
    {"FixedNegative", [] { return FixedShardsPartitioner::create(-2).status(); }, "num_shards must be >= 1, got -2"},
    {"MinSizeBytes", [] { return MinSizePartitioner::create(0).status(); },
     "MinSizePartitioner: min_shard_bytes must be >= 1"},
    {"MinSizeMaxShards", [] { return MinSizePartitioner::create(1024, 0).status(); },
     "MinSizePartitioner: max_shards must be >= 1"},
    {"MinSizeBytesPerString", [] { return MinSizePartitioner::create(1024, 2, 0).status(); },
     "MinSizePartitioner: bytes_per_string must be >= 1"},
    {"MaxSizeBytes", [] { return MaxSizePartitioner::create(0).status(); },
     "MaxSizePartitioner: max_shard_bytes must be >= 1"},
    {"MaxSizeMaxShards", [] { return MaxSizePartitioner::create(1024, 0).status(); },
     "MaxSizePartitioner: max_shards must be >= 1"},
    {"MaxSizeBytesPerString", [] { return MaxSizePartitioner::create(1024, std::nullopt, -1).status(); },
     "MaxSizePartitioner: bytes_per_string must be >= 1"},
};

INSTANTIATE_TEST_SUITE_P(Cases, PartitionerArgumentTest, ::testing::ValuesIn(kBadArgs),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace twinps
