#pragma once
// The input layer of a model spec: from a batch of records (core/data/records.h)
// to what the layers read — a [batch x width] matrix per dense input, a bag
// of ids (with weights) per categorical input, and the labels. Vocabulary
// lookups, hashing, identity ranges and OOV policies happen here, once per
// batch on the worker; readers only parse and check types.
//
// A FeatureMapper is immutable after create(), so one serves every worker
// thread of an in-process cluster.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/data/records.h"
#include "core/model/layers.h"
#include "core/model/losses.h"
#include "core/runtime/status.h"
#include "model/model_spec.pb.h"

namespace twinps::model {

struct Features {
  std::int64_t batch = 0;
  std::vector<Matrix> dense;  // per spec input (empty for categorical inputs)
  std::vector<IdBags> bags;   // per spec input (empty for dense inputs)
  Matrix labels;              // [batch x label width]; empty without labels
};

// The hash behind hash_buckets and OOV buckets: FNV-1a 64 of the text, then
// SplitMix64's finalizer to spread the low bits. Fixed: changing it would
// move every trained row.
std::uint64_t fingerprint(std::string_view text);

class FeatureMapper {
 public:
  // `spec` must be valid (core/model/spec_loader.h) with vocabularies
  // inline; `head_width` is the width of the head's layer (the classes of a
  // softmax head).
  static StatusOr<FeatureMapper> create(const spec::ModelSpec& spec, std::int64_t head_width);

  // The columns the model reads, with their types and widths: inputs in
  // spec order, then weight columns, then the label (each column once).
  const data::Schema& schema() const { return schema_; }
  // Ids categorical input `input` produces (the rows its embedding needs).
  std::int64_t id_count(int input) const { return inputs_[static_cast<std::size_t>(input)].id_count; }

  // Maps `batch`, whose columns follow `schema` (the dataset's, which may
  // hold more columns than the model reads). INVALID_ARGUMENT naming the
  // column and the record (its file and number when the batch came from
  // files: RecordBatch::describe_record) for a missing column, another
  // type or width, an unknown value under OOV_ERROR, a label the loss cannot
  // take. Without `labels` the label column is not needed.
  StatusOr<Features> map(const data::Schema& schema, const data::RecordBatch& batch, bool labels = true) const;

 private:
  struct InputMapping {
    enum class Kind { kDense, kVocabulary, kHash, kIdentity } kind = Kind::kDense;
    std::string column;
    std::string weight_column;  // empty: weights 1
    data::ColumnType type = data::ColumnType::kFloat;
    int width = 1;
    // Dense.
    bool log1p = false;
    float shift = 0, scale = 1;
    // Categorical.
    std::unordered_map<std::string, std::int64_t> vocabulary;  // looked up only, never iterated
    std::int64_t buckets = 0;   // hash or identity buckets
    spec::OovPolicy oov = spec::OOV_BUCKETS;
    std::int64_t oov_buckets = 0;
    std::int64_t id_count = 0;
  };

  Status map_dense(const InputMapping& m, const data::Column& c, const data::RecordBatch& batch, Matrix& out) const;
  Status map_categorical(const InputMapping& m, const data::Column& c, const data::Column* weights,
                         const data::RecordBatch& batch, IdBags& out) const;
  // The id of one value, or -1 to drop it (OOV_IGNORE); an error under OOV_ERROR.
  StatusOr<std::int64_t> id_of(const InputMapping& m, const data::Column& c, std::size_t value) const;
  Status map_labels(const data::Column& c, const data::RecordBatch& batch, Matrix& out) const;

  std::vector<InputMapping> inputs_;
  data::Schema schema_;
  // The label.
  std::string label_column_;
  data::ColumnType label_type_ = data::ColumnType::kFloat;
  int label_width_ = 1;
  std::unordered_map<std::string, std::int64_t> label_vocabulary_;
  std::optional<double> positive_label_, negative_label_;  // Label.positive_label / negative_label
  LossKind loss_ = LossKind::kBinaryCrossEntropy;
  std::int64_t classes_ = 0;  // softmax: the head's width
};

}  // namespace twinps::model
