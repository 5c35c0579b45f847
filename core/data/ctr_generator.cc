#include "core/data/ctr_generator.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <optional>

#include <nlohmann/json.hpp>

#include "core/data/record_reader.h"
#include "core/data/tfrecord.h"
#include "core/data/zipf.h"
#include "core/runtime/random.h"

namespace twinps::data {
namespace {

// A normal draw determined by `key` alone (Box-Muller on two hashed uniforms).
double hashed_normal(std::uint64_t key) {
  std::uint64_t state = key;
  const double u1 = (static_cast<double>(splitmix64(state) >> 11) + 0.5) * 0x1.0p-53;
  const double u2 = static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

std::uint64_t gcd(std::uint64_t a, std::uint64_t b) {
  while (b) {
    a %= b;
    std::swap(a, b);
  }
  return a;
}

// One categorical feature: Zipf ranks (uniform ones for exponent 0), mapped
// to ids by a fixed permutation (rank r -> (r * stride + offset) mod V) so
// frequent ids are spread over the id space rather than being 0, 1, 2...
struct Categorical {
  std::optional<ZipfSampler> ranks;  // absent: uniform over the vocabulary
  std::uint64_t vocabulary, stride, offset;
  double scale;
  std::uint64_t weight_key;

  std::uint64_t draw_rank(RandomStream& random) const {  // 1-based
    return ranks ? static_cast<std::uint64_t>(ranks->sample(random)) : random.below(vocabulary) + 1;
  }
};

class HiddenModel {
 public:
  HiddenModel(const CtrOptions& o) : options_(o) {
    RandomStream model = RandomStream(o.seed).fork("ctr-hidden-model");
    const auto sizes = ctr_vocabulary_sizes(o.max_vocabulary);
    for (int k = 0; k < kCtrCategoricalFeatures; ++k) {
      const auto v = static_cast<std::uint64_t>(sizes[static_cast<std::size_t>(k)]);
      std::uint64_t stride = 2654435761u % v;
      while (stride == 0 || gcd(stride, v) != 1) stride = (stride + 1) % v;
      std::optional<ZipfSampler> ranks;
      if (o.zipf_exponent > 0) ranks.emplace(static_cast<std::int64_t>(v), o.zipf_exponent);
      features_.push_back(Categorical{ranks, v, stride, model.below(v), o.categorical_scale, model.next_u64()});
    }
    for (int j = 0; j < kCtrDenseFeatures; ++j) {
      dense_weight_[j] = model.normal(0, o.dense_scale);
      // Counts with medians from 1 to ~1000: log1p of a log-normal.
      dense_median_[j] = std::exp(model.uniform(0.0, 7.0));
      dense_center_[j] = std::log1p(dense_median_[j]);
    }
  }

  // Draws one example into `record` (schema ctr_schema()) and returns its
  // click probability; the label is drawn from it.
  double draw(RandomStream& random, Record& record) const {
    record.clear(1 + kCtrDenseFeatures + kCtrCategoricalFeatures);
    double logit = options_.bias;
    record.ints.push_back(0);  // the label, set below
    record.spans[0] = {0, 1};
    for (int j = 0; j < kCtrDenseFeatures; ++j) {
      const double count = std::floor(random.lognormal(dense_median_[j], 1.0));
      const auto x = static_cast<float>(std::log1p(count));
      logit += dense_weight_[j] * (x - dense_center_[j]);
      record.spans[static_cast<std::size_t>(1 + j)] = {static_cast<std::uint32_t>(j), static_cast<std::uint32_t>(j + 1)};
      record.floats.push_back(x);
    }
    for (int k = 0; k < kCtrCategoricalFeatures; ++k) {
      const Categorical& f = features_[static_cast<std::size_t>(k)];
      const std::uint64_t rank = f.draw_rank(random);
      const std::uint64_t id = ((rank - 1) % f.vocabulary * f.stride + f.offset) % f.vocabulary;
      const double shrink = 1.0 / std::sqrt(1.0 + static_cast<double>(rank) / options_.rank_scale);
      logit += f.scale * shrink * hashed_normal(f.weight_key ^ (id * 0x9e3779b97f4a7c15ull));
      const auto at = static_cast<std::uint32_t>(record.ints.size());
      record.ints.push_back(static_cast<std::int64_t>(id));
      record.spans[static_cast<std::size_t>(1 + kCtrDenseFeatures + k)] = {at, at + 1};
    }
    const double p = 1.0 / (1.0 + std::exp(-logit));
    record.ints[0] = random.bernoulli(p) ? 1 : 0;
    return p;
  }

 private:
  const CtrOptions& options_;
  std::vector<Categorical> features_;
  double dense_weight_[kCtrDenseFeatures], dense_median_[kCtrDenseFeatures], dense_center_[kCtrDenseFeatures];
};

std::string file_name(const std::string& split, int index, int count, bool gzip) {
  char name[64];
  std::snprintf(name, sizeof name, "%s-%05d-of-%05d.tfrecord%s", split.c_str(), index, count, gzip ? ".gz" : "");
  return name;
}

Status check_options(const CtrOptions& o) {
  if (o.examples < 2) return absl::InvalidArgumentError("--examples must be at least 2");
  if (!(o.test_fraction > 0 && o.test_fraction < 1)) return absl::InvalidArgumentError("--test-fraction must be in (0, 1)");
  if (o.train_files < 1) return absl::InvalidArgumentError("--train-files must be at least 1");
  if (o.max_vocabulary < 10) return absl::InvalidArgumentError("--max-vocabulary must be at least 10");
  if (!(o.zipf_exponent >= 0)) return absl::InvalidArgumentError("--zipf-exponent must be 0 (uniform ids) or more");
  if (!(o.rank_scale > 0)) return absl::InvalidArgumentError("--rank-scale must be positive");
  return absl::OkStatus();
}

}  // namespace

Schema ctr_schema() {
  Schema s;
  s.columns.push_back({"label", ColumnType::kInt64, 1});
  for (int j = 1; j <= kCtrDenseFeatures; ++j) s.columns.push_back({"I" + std::to_string(j), ColumnType::kFloat, 1});
  for (int k = 1; k <= kCtrCategoricalFeatures; ++k) s.columns.push_back({"C" + std::to_string(k), ColumnType::kInt64, 1});
  return s;
}

std::vector<std::int64_t> ctr_vocabulary_sizes(std::int64_t max_vocabulary) {
  std::vector<std::int64_t> sizes;
  const double top = std::log10(static_cast<double>(std::max<std::int64_t>(max_vocabulary, 10)));
  for (int k = 0; k < kCtrCategoricalFeatures; ++k)
    sizes.push_back(static_cast<std::int64_t>(std::llround(std::pow(10.0, 1.0 + (top - 1.0) * k / (kCtrCategoricalFeatures - 1)))));
  return sizes;
}

double roc_auc(const std::vector<double>& scores, const std::vector<int>& labels) {
  std::vector<std::size_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return scores[a] < scores[b]; });
  // Sum of the positives' ranks, ties given their average rank.
  double rank_sum = 0;
  std::int64_t positives = 0;
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j < order.size() && scores[order[j]] == scores[order[i]]) ++j;
    const double average_rank = (static_cast<double>(i + 1) + static_cast<double>(j)) / 2.0;
    for (std::size_t t = i; t < j; ++t)
      if (labels[order[t]]) {
        rank_sum += average_rank;
        ++positives;
      }
    i = j;
  }
  const auto negatives = static_cast<std::int64_t>(scores.size()) - positives;
  if (positives == 0 || negatives == 0) return 0.5;
  const double p = static_cast<double>(positives);
  return (rank_sum - p * (p + 1) / 2.0) / (p * static_cast<double>(negatives));
}

StatusOr<CtrSummary> generate_ctr(const std::string& dir, const CtrOptions& options) {
  TWINPS_RETURN_IF_ERROR(check_options(options));
  const HiddenModel model(options);
  const Schema schema = ctr_schema();
  CtrSummary summary;
  summary.vocabulary_sizes = ctr_vocabulary_sizes(options.max_vocabulary);
  summary.test_examples = std::max<std::int64_t>(1, std::llround(options.examples * options.test_fraction));
  summary.train_examples = options.examples - summary.test_examples;

  Record record;
  std::string bytes;
  std::vector<double> test_p;
  std::vector<int> test_labels;
  std::int64_t train_positives = 0;
  const RandomStream root = RandomStream(options.seed).fork("ctr-examples");
  // One random stream per file: a file's content does not depend on how
  // the others were cut.
  auto write_file = [&](const std::string& name, std::int64_t count, RandomStream random, bool is_test) -> Status {
    const std::string path = dir + "/" + name;
    auto writer = TfRecordWriter::create(path);
    if (!writer.ok()) return writer.status();
    for (std::int64_t i = 0; i < count; ++i) {
      const double p = model.draw(random, record);
      const int label = static_cast<int>(record.ints[0]);
      if (is_test) {
        test_p.push_back(p);
        test_labels.push_back(label);
      } else {
        train_positives += label;
      }
      encode_example(schema, record, bytes);
      TWINPS_RETURN_IF_ERROR((*writer)->write(bytes));
    }
    return (*writer)->close();
  };
  for (int f = 0; f < options.train_files; ++f) {
    const std::int64_t begin = summary.train_examples * f / options.train_files;
    const std::int64_t end = summary.train_examples * (f + 1) / options.train_files;
    const std::string name = file_name("train", f, options.train_files, options.gzip);
    TWINPS_RETURN_IF_ERROR(write_file(name, end - begin, root.fork("train", static_cast<std::uint64_t>(f)), false));
    summary.train_files.push_back(name);
  }
  const std::string test_name = file_name("test", 0, 1, options.gzip);
  TWINPS_RETURN_IF_ERROR(write_file(test_name, summary.test_examples, root.fork("test"), true));
  summary.test_files.push_back(test_name);

  summary.train_positive_rate = static_cast<double>(train_positives) / static_cast<double>(std::max<std::int64_t>(1, summary.train_examples));
  double positives = 0, log_loss = 0;
  for (std::size_t i = 0; i < test_p.size(); ++i) {
    positives += test_labels[i];
    log_loss -= test_labels[i] ? std::log(test_p[i]) : std::log1p(-test_p[i]);
  }
  summary.test_positive_rate = positives / static_cast<double>(test_p.size());
  summary.hidden_test_log_loss = log_loss / static_cast<double>(test_p.size());
  summary.hidden_test_auc = roc_auc(test_p, test_labels);

  nlohmann::ordered_json j;
  j["hidden_test_auc"] = summary.hidden_test_auc;
  j["hidden_test_log_loss"] = summary.hidden_test_log_loss;
  j["train_examples"] = summary.train_examples;
  j["test_examples"] = summary.test_examples;
  j["train_positive_rate"] = summary.train_positive_rate;
  j["test_positive_rate"] = summary.test_positive_rate;
  j["train_files"] = summary.train_files;
  j["test_files"] = summary.test_files;
  j["label"] = "label (int64 0/1)";
  j["dense_features"] = "I1..I13 (float, log1p of counts)";
  j["categorical_features"] = "C1..C26 (int64 ids in [0, vocabulary))";
  j["vocabulary_sizes"] = summary.vocabulary_sizes;
  j["seed"] = options.seed;
  j["zipf_exponent"] = options.zipf_exponent;
  j["rank_scale"] = options.rank_scale;
  auto out = OutputFile::create(dir + "/hidden_model.json");
  if (!out.ok()) return out.status();
  TWINPS_RETURN_IF_ERROR((*out)->write(j.dump(2) + "\n"));
  TWINPS_RETURN_IF_ERROR((*out)->close());
  return summary;
}

}  // namespace twinps::data
