// The splits the coordinator hands train closures under exactly-once
// visitation (core/coordinator/epoch_splits.h): every example of an epoch in
// exactly one split, epochs one after another.
#include "core/coordinator/epoch_splits.h"

#include <gtest/gtest.h>

#include <vector>

namespace twinps {
namespace {

TEST(EpochSplitsTest, EveryExampleOfAnEpochIsInExactlyOneSplit) {
  EpochSplits splits(/*examples=*/10, /*split_size=*/4);
  EXPECT_EQ(splits.splits_per_epoch(), 3);
  for (std::int64_t epoch = 0; epoch < 2; ++epoch) {
    std::vector<int> covered(10, 0);
    for (std::int64_t i = 0; i < 3; ++i) {
      const Split s = splits.next();
      EXPECT_EQ(s.epoch, epoch);
      EXPECT_EQ(s.index, i);
      for (std::int64_t id = s.begin; id < s.end; ++id) ++covered[static_cast<std::size_t>(id)];
    }
    EXPECT_EQ(covered, std::vector<int>(10, 1)) << "epoch " << epoch;
  }
  EXPECT_EQ(splits.handed_out(), 6);
}

TEST(EpochSplitsTest, TheLastSplitOfAnEpochIsShorter) {
  EpochSplits splits(10, 4);
  splits.next();
  splits.next();
  const Split last = splits.next();
  EXPECT_EQ(last.begin, 8);
  EXPECT_EQ(last.end, 10);
  const Split next_epoch = splits.next();
  EXPECT_EQ(next_epoch.epoch, 1);
  EXPECT_EQ(next_epoch.begin, 0);
  EXPECT_EQ(next_epoch.end, 4);
}

}  // namespace
}  // namespace twinps
