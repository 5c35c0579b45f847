// The ctr click-log generator: deterministic bytes, the declared schema and
// vocabularies, Zipf-distributed ids, and a hidden model whose test AUC a
// learner trained on the train split can approach (the ctr example's bound).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "core/data/ctr_generator.h"
#include "core/data/file_dataset.h"
#include "core/data/zipf.h"
#include "tests/core/data_test_util.h"

namespace twinps::data {
namespace {

using testing::ScratchDir;

TEST(ZipfSamplerTest, MatchesTheZipfLaw) {
  for (double s : {0.8, 1.0, 1.1, 1.5}) {
    constexpr int kN = 10, kDraws = 200000;
    ZipfSampler zipf(kN, s);
    RandomStream random(3);
    std::vector<int> counts(kN + 1, 0);
    for (int i = 0; i < kDraws; ++i) {
      const auto k = zipf.sample(random);
      ASSERT_GE(k, 1);
      ASSERT_LE(k, kN);
      ++counts[static_cast<std::size_t>(k)];
    }
    double norm = 0;
    for (int k = 1; k <= kN; ++k) norm += std::pow(k, -s);
    for (int k = 1; k <= kN; ++k) {
      const double p = std::pow(k, -s) / norm;
      const double sigma = std::sqrt(kDraws * p * (1 - p));
      EXPECT_NEAR(counts[static_cast<std::size_t>(k)], kDraws * p, 5 * sigma) << "s=" << s << " k=" << k;
    }
  }
  // Large n: draws stay in range, and rank 1's share is 1/H(n, s).
  ZipfSampler big(1000000, 1.1);
  RandomStream random(4);
  int ones = 0;
  for (int i = 0; i < 100000; ++i) {
    const auto k = big.sample(random);
    ASSERT_GE(k, 1);
    ASSERT_LE(k, 1000000);
    ones += k == 1;
  }
  double h = 0;
  for (int k = 1; k <= 1000000; ++k) h += std::pow(k, -1.1);
  EXPECT_NEAR(ones / 100000.0, 1.0 / h, 0.005);
}

TEST(RocAucTest, CountsPairsWithTiesAsHalf) {
  EXPECT_DOUBLE_EQ(roc_auc({0.1, 0.4, 0.35, 0.8}, {0, 0, 1, 1}), 0.75);
  EXPECT_DOUBLE_EQ(roc_auc({0.5, 0.5, 0.5}, {0, 1, 1}), 0.5);
  EXPECT_DOUBLE_EQ(roc_auc({1, 2, 3}, {0, 1, 1}), 1.0);
}

CtrOptions small_options() {
  CtrOptions o;
  o.examples = 20000;
  o.train_files = 3;
  o.max_vocabulary = 10000;
  o.seed = 9;
  return o;
}

// The train split generate_ctr wrote into `dir`, read back in batches of
// 1,000 by the file dataset training uses (at most 100 batches).
std::vector<RecordBatch> read_train_split(const ScratchDir& dir) {
  FileDatasetSpec spec;
  spec.add_patterns(dir.file("train-*.tfrecord"));
  set_columns(ctr_schema(), spec);
  spec.set_batch_size(1000);
  auto ds = FileDataset::create(spec, 0, 1);
  if (!ds.ok()) {
    ADD_FAILURE() << ds.status();
    return {};
  }
  auto it = (*ds)->make_iterator(RandomStream(1));
  std::vector<RecordBatch> batches;
  for (int guard = 0; guard < 100; ++guard) {
    auto b = it->next();
    if (!b.ok()) break;
    batches.push_back(std::move(*b));
  }
  return batches;
}

TEST(CtrGeneratorTest, SameSeedSameBytesAndTheDeclaredFiles) {
  ScratchDir a("a"), b("b"), c("c");
  auto sa = generate_ctr(a.path().string(), small_options());
  ASSERT_TRUE(sa.ok()) << sa.status();
  auto sb = generate_ctr(b.path().string(), small_options());
  ASSERT_TRUE(sb.ok());
  CtrOptions other = small_options();
  other.seed = 10;
  ASSERT_TRUE(generate_ctr(c.path().string(), other).ok());
  EXPECT_THAT(sa->train_files, ::testing::ElementsAre("train-00000-of-00003.tfrecord", "train-00001-of-00003.tfrecord",
                                                      "train-00002-of-00003.tfrecord"));
  for (const auto& f : sa->train_files) {
    EXPECT_TRUE(a.read(f) == b.read(f)) << f << " differs between runs with the same seed";
    EXPECT_FALSE(a.read(f) == c.read(f)) << f << " is the same under another seed";
  }
  EXPECT_EQ(a.read("hidden_model.json"), b.read("hidden_model.json"));
  EXPECT_EQ(sa->train_examples, 18000);
  EXPECT_EQ(sa->test_examples, 2000);
  auto json = nlohmann::json::parse(a.read("hidden_model.json"));
  EXPECT_DOUBLE_EQ(json["hidden_test_auc"].get<double>(), sa->hidden_test_auc);
  EXPECT_GT(sa->hidden_test_auc, 0.75);
  EXPECT_LT(sa->hidden_test_auc, 0.9);
  EXPECT_GT(sa->train_positive_rate, 0.15);
  EXPECT_LT(sa->train_positive_rate, 0.4);

  CtrOptions bad = small_options();
  bad.examples = 1;
  EXPECT_EQ(generate_ctr(a.path().string(), bad).status().code(), StatusCode::kInvalidArgument);
}

TEST(CtrGeneratorTest, RecordsFollowTheSchemaWithZipfIds) {
  ScratchDir dir;
  auto summary = generate_ctr(dir.path().string(), small_options());
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(summary->vocabulary_sizes.front(), 10);
  EXPECT_EQ(summary->vocabulary_sizes.back(), 10000);
  const std::vector<RecordBatch> batches = read_train_split(dir);
  std::map<std::int64_t, int> c26;
  std::int64_t n = 0;
  for (const RecordBatch& b : batches) {
    n += b.size;
    ASSERT_EQ(b.columns.size(), 40u);
    for (std::size_t k = 0; k < 26; ++k)
      for (auto id : b.columns[14 + k].ints) {
        ASSERT_GE(id, 0);
        ASSERT_LT(id, summary->vocabulary_sizes[k]);
      }
    for (auto id : b.columns[39].ints) ++c26[id];
    for (auto label : b.columns[0].ints) ASSERT_TRUE(label == 0 || label == 1);
  }
  EXPECT_EQ(n, 18000);
  // The commonest id of column C26 (vocabulary 10^4, exponent 1.1) has share 1/H(10^4, 1.1) ~ 0.12.
  int top = 0;
  for (const auto& [id, count] : c26) top = std::max(top, count);
  double h = 0;
  for (int k = 1; k <= 10000; ++k) h += std::pow(k, -1.1);
  EXPECT_NEAR(top / 18000.0, 1.0 / h, 0.01);
}

TEST(CtrGeneratorTest, ExponentZeroDrawsUniformIds) {
  ScratchDir dir;
  CtrOptions o = small_options();
  o.zipf_exponent = 0;
  auto summary = generate_ctr(dir.path().string(), o);
  ASSERT_TRUE(summary.ok()) << summary.status();
  std::map<std::int64_t, int> c1, c26;
  std::int64_t n = 0;
  for (const RecordBatch& b : read_train_split(dir)) {
    n += b.size;
    for (auto id : b.columns[14].ints) ++c1[id];
    for (auto id : b.columns[39].ints) ++c26[id];
  }
  ASSERT_EQ(n, 18000);
  // The 10 ids of column C1: each about a tenth (binomial sd 0.0022 at 18,000 draws).
  ASSERT_EQ(c1.size(), 10u);
  for (const auto& [id, count] : c1) EXPECT_NEAR(count / 18000.0, 0.1, 0.012) << "id " << id;
  // The 10^4 ids of column C26: 18,000 uniform draws hit about 83 % of them, and no id
  // is common (a Zipf law at 1.1 gives its top id 12 %).
  EXPECT_NEAR(c26.size() / 10000.0, 1 - std::exp(-1.8), 0.02);
  int top = 0;
  for (const auto& [id, count] : c26) top = std::max(top, count);
  EXPECT_LT(top, 20);

  o.zipf_exponent = -1;
  EXPECT_EQ(generate_ctr(dir.path().string(), o).status().code(), StatusCode::kInvalidArgument);
}

// A logistic regression with one weight per (feature, id) and per dense
// feature, trained by Adagrad for one pass over the train split: what a
// wide model learns. It must come close to the hidden model's AUC.
double learned_test_auc(const ScratchDir& dir, const CtrSummary& summary) {
  FileDatasetSpec spec;
  set_columns(ctr_schema(), spec);
  spec.set_batch_size(256);
  spec.set_shuffle_files(false);
  std::vector<std::vector<double>> w(26), g(26);
  for (std::size_t k = 0; k < 26; ++k) {
    w[k].assign(static_cast<std::size_t>(summary.vocabulary_sizes[k]), 0.0);
    g[k].assign(static_cast<std::size_t>(summary.vocabulary_sizes[k]), 1e-6);
  }
  std::vector<double> a(13, 0.0), ga(13, 1e-6);
  double bias = 0, gb = 1e-6;
  constexpr double kRate = 0.05;
  auto logit_of = [&](const RecordBatch& b, std::size_t i) {
    double z = bias;
    for (std::size_t j = 0; j < 13; ++j) z += a[j] * b.columns[1 + j].floats[i];
    for (std::size_t k = 0; k < 26; ++k) z += w[k][static_cast<std::size_t>(b.columns[14 + k].ints[i])];
    return z;
  };
  spec.add_patterns(dir.file("train-*.tfrecord"));
  auto train = (*FileDataset::create(spec, 0, 1))->make_iterator(RandomStream(1));
  for (int guard = 0; guard < 100000; ++guard) {
    auto b = train->next();
    if (!b.ok()) break;
    for (std::size_t i = 0; i < static_cast<std::size_t>(b->size); ++i) {
      const double p = 1 / (1 + std::exp(-logit_of(*b, i)));
      const double err = p - static_cast<double>(b->columns[0].ints[i]);
      gb += err * err;
      bias -= kRate * err / std::sqrt(gb);
      for (std::size_t j = 0; j < 13; ++j) {
        const double gj = err * b->columns[1 + j].floats[i];
        ga[j] += gj * gj;
        a[j] -= kRate * gj / std::sqrt(ga[j]);
      }
      for (std::size_t k = 0; k < 26; ++k) {
        const auto id = static_cast<std::size_t>(b->columns[14 + k].ints[i]);
        g[k][id] += err * err;
        w[k][id] -= kRate * err / std::sqrt(g[k][id]);
      }
    }
  }
  spec.clear_patterns();
  spec.add_patterns(dir.file("test-*.tfrecord"));
  auto test = (*FileDataset::create(spec, 0, 1))->make_iterator(RandomStream(1));
  std::vector<double> scores;
  std::vector<int> labels;
  for (int guard = 0; guard < 100000; ++guard) {
    auto b = test->next();
    if (!b.ok()) break;
    for (std::size_t i = 0; i < static_cast<std::size_t>(b->size); ++i) {
      scores.push_back(logit_of(*b, i));
      labels.push_back(static_cast<int>(b->columns[0].ints[i]));
    }
  }
  return roc_auc(scores, labels);
}

TEST(CtrGeneratorTest, AWideModelApproachesTheHiddenAuc) {
  ScratchDir dir;
  CtrOptions o = small_options();
  o.examples = 200000;
  o.max_vocabulary = 100000;
  auto summary = generate_ctr(dir.path().string(), o);
  ASSERT_TRUE(summary.ok());
  const double learned = learned_test_auc(dir, *summary);
  // Shortened: 180k training examples, one pass (gap about 0.012 here). At
  // the default size (1M examples, vocabularies to 10^6) the same learner
  // comes within 0.007-0.009: the ctr example's bound is 0.01.
  EXPECT_GT(learned, summary->hidden_test_auc - 0.025) << "hidden " << summary->hidden_test_auc;
  EXPECT_LE(learned, summary->hidden_test_auc + 0.01);
}

}  // namespace
}  // namespace twinps::data
