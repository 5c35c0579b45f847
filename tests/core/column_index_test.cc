// ColumnIndex: the TFRecord decoder's lookup of feature names. Every name a
// record holds is looked up, so a wrong answer would read a feature into the
// wrong column or drop a column silently.
#include "core/data/column_index.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

namespace twinps::data {
namespace {

constexpr std::size_t kNot = ColumnIndex::kNotAColumn;

TEST(ColumnIndexTest, FindsColumnsAndTurnsOtherNamesAway) {
  // Lengths around the loads' boundaries (3/4, 7/8, 16/17) and names that
  // differ only in a byte the two end loads do not cover.
  const std::vector<std::string> names = {"",  "a", "C26", "label", "abcdefgh", "0123456789abcdef",
                                          "feature_aaaaaaaa_x_bbbbbbbb", std::string("n\0ul", 4)};
  ColumnIndex index(names);
  for (std::size_t c = 0; c < names.size(); ++c) EXPECT_EQ(index.find(names[c]), c) << names[c];
  for (const std::string other : {"b", "C25", "C2", "labe", "labels", "abcdefgi", "0123456789abcdeg",
                                  "feature_aaaaaaaa_y_bbbbbbbb", "feature_aaaaaaaa_x_bbbbbbbc", "n"})
    EXPECT_EQ(index.find(other), kNot) << other;
  EXPECT_EQ(index.find(std::string("n\0um", 4)), kNot);
}

TEST(ColumnIndexTest, ARepeatedNameIsItsFirstColumn) {
  ColumnIndex index({"x", "y", "x"});
  EXPECT_EQ(index.find("x"), 0u);
  EXPECT_EQ(index.find("y"), 1u);
}

TEST(ColumnIndexTest, ByPositionAnswersForTheNameNotForThePosition) {
  ColumnIndex index({"label", "C26"});
  // A first record: "label", "I1", "C26".
  EXPECT_EQ(index.find("label", 0), 0u);
  EXPECT_EQ(index.find("I1", 1), kNot);
  EXPECT_EQ(index.find("C26", 2), 1u);
  // The next: at positions 0 and 2, names as long as the last record's there,
  // one byte apart; the columns elsewhere.
  EXPECT_EQ(index.find("labem", 0), kNot);
  EXPECT_EQ(index.find("C26", 1), 1u);
  EXPECT_EQ(index.find("C25", 2), kNot);
  EXPECT_EQ(index.find("label", 3), 0u);
  // And back.
  EXPECT_EQ(index.find("label", 0), 0u);
  EXPECT_EQ(index.find("I1", 1), kNot);
  EXPECT_EQ(index.find("C26", 2), 1u);
}

// Names drawn from a small alphabet (so that near misses are common), of
// every length up to 40, looked up at random positions: the same answers as
// a std::map.
TEST(ColumnIndexTest, AgreesWithAMapOnRandomNames) {
  std::mt19937 random(7);
  auto draw = [&] {
    std::string s(random() % 41, 'a');
    for (char& ch : s) ch = "ab\0"[random() % 3];
    return s;
  };
  std::vector<std::string> names;
  std::map<std::string, std::size_t> reference;
  for (std::size_t c = 0; c < 64; ++c) {
    names.push_back(draw());
    reference.emplace(names.back(), c);  // keeps the first column of a repeated name
  }
  ColumnIndex index(names);
  for (int i = 0; i < 20000; ++i) {
    // Half the lookups are columns, so both answers are exercised.
    const std::string name = i % 2 ? names[random() % names.size()] : draw();
    const auto it = reference.find(name);
    const std::size_t want = it == reference.end() ? kNot : it->second;
    ASSERT_EQ(index.find(name), want) << i;
    ASSERT_EQ(index.find(name, random() % 8), want) << i;
  }
}

}  // namespace
}  // namespace twinps::data
