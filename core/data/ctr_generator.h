#pragma once
// A synthetic click log shaped like Criteo's: 13 dense features I1..I13
// (log-scaled counts), 26 categorical features C1..C26 whose ids follow a Zipf
// law over vocabularies from 10 up to 10^6 ids, and a click label drawn from
// a hidden logistic model. The hidden model knows the true click probability
// of every example, so its AUC on the test split is the best any model can
// reach on that split; a trained model's AUC is judged against it.
//
// Hidden model: logit = bias + sum_k w_k(id_k) + sum_j a_j (I_j - c_j), with
// w_k(id) a normal draw hashed from (seed, k, id) — an embedding table of
// 2.7 million weights that is never stored. Rare ids carry smaller weights
// (scale 1/sqrt(1 + rank/rank_scale)): what is seen a handful of times in a
// training set cannot be learnt, and a generator whose signal lived in ids
// seen once would make the target unreachable for any learner.
//
// Deterministic: the same options give byte-identical files.
#include <cstdint>
#include <string>
#include <vector>

#include "core/data/records.h"
#include "core/runtime/status.h"

namespace twinps::data {

struct CtrOptions {
  std::int64_t examples = 1'000'000;  // train + test
  double test_fraction = 0.1;
  int train_files = 8;
  std::uint64_t seed = 1;
  double zipf_exponent = 1.1;  // 0: uniform ids (a sparse-embedding benchmark's workload)
  std::int64_t max_vocabulary = 1'000'000;
  // Calibrated so that one pass of a per-id logistic regression (Adagrad,
  // rate 0.03) over the 900k training examples of the default size comes
  // within 0.007 of the hidden AUC (about 0.83; 27 % clicks).
  double categorical_scale = 0.3;  // stddev of a frequent id's weight, per feature
  double rank_scale = 50;          // ids rarer than this rank carry shrinking weights
  double dense_scale = 0.3;        // stddev of the dense weights
  double bias = -1.3;
  bool gzip = false;  // write .tfrecord.gz
};

struct CtrSummary {
  std::int64_t train_examples = 0, test_examples = 0;
  double train_positive_rate = 0, test_positive_rate = 0;
  double hidden_test_auc = 0;  // the hidden model's AUC on the test split
  double hidden_test_log_loss = 0;
  std::vector<std::int64_t> vocabulary_sizes;
  std::vector<std::string> train_files, test_files;
};

inline constexpr int kCtrDenseFeatures = 13;
inline constexpr int kCtrCategoricalFeatures = 26;

// label (int64 0/1), I1..I13 (float), C1..C26 (int64 ids in [0, vocabulary)).
Schema ctr_schema();
// Vocabulary sizes of C1..C26: log-spaced from 10 to max_vocabulary.
std::vector<std::int64_t> ctr_vocabulary_sizes(std::int64_t max_vocabulary);

// Writes train-NNNNN-of-MMMMM.tfrecord, test-00000-of-00001.tfrecord and
// hidden_model.json (the summary, with the hidden AUC) into `dir`, which
// must exist.
StatusOr<CtrSummary> generate_ctr(const std::string& dir, const CtrOptions& options);

// Exact ROC AUC (ties count half), the Mann-Whitney statistic.
double roc_auc(const std::vector<double>& scores, const std::vector<int>& labels);

}  // namespace twinps::data
