#include "core/model/features.h"

#include <cmath>
#include <map>

#include "core/runtime/random.h"

namespace twinps::model {

using namespace spec;  // the spec messages an input layer is built from

std::uint64_t fingerprint(std::string_view text) {
  std::uint64_t h = hash_name(text);
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

namespace {

data::ColumnType column_type(ValueType t) {
  switch (t) {
    case FLOAT: return data::ColumnType::kFloat;
    case INT64: return data::ColumnType::kInt64;
    case STRING: return data::ColumnType::kString;
  }
  return data::ColumnType::kFloat;
}

const char* type_name(data::ColumnType t) {
  switch (t) {
    case data::ColumnType::kFloat: return "FLOAT";
    case data::ColumnType::kInt64: return "INT64";
    case data::ColumnType::kString: return "STRING";
  }
  return "?";
}

LossKind loss_kind(Loss l) {
  switch (l) {
    case SOFTMAX_CROSS_ENTROPY: return LossKind::kSoftmaxCrossEntropy;
    case MEAN_SQUARED_ERROR: return LossKind::kMeanSquaredError;
    default: return LossKind::kBinaryCrossEntropy;
  }
}

std::string width_text(int width) { return width == 0 ? "a list" : std::to_string(width) + " value(s) per record"; }

// The value's text: what vocabularies hold and hashing reads.
std::string text_of(const data::Column& c, std::size_t i) {
  return c.type == data::ColumnType::kString ? c.strings[i] : std::to_string(c.ints[i]);
}

Status column_error(const std::string& column, const std::string& message) {
  return absl::InvalidArgumentError("column \"" + column + "\": " + message);
}

}  // namespace

StatusOr<FeatureMapper> FeatureMapper::create(const ModelSpec& spec, std::int64_t head_width) {
  FeatureMapper m;
  std::map<std::string, std::size_t> column_index;  // name -> schema position
  auto add_column = [&](const std::string& name, data::ColumnType type, int width) -> Status {
    auto [it, inserted] = column_index.emplace(name, m.schema_.columns.size());
    if (inserted) {
      m.schema_.columns.push_back(data::ColumnSpec{name, type, width});
      return absl::OkStatus();
    }
    const data::ColumnSpec& prev = m.schema_.columns[it->second];
    if (prev.type != type || prev.width != width)
      return column_error(name, std::string("read as ") + type_name(prev.type) + " with " + width_text(prev.width) +
                                    " and as " + type_name(type) + " with " + width_text(width));
    return absl::OkStatus();
  };
  for (const Input& in : spec.input()) {
    InputMapping im;
    im.column = in.has_column() ? in.column() : in.name();
    if (in.has_dense()) {
      im.kind = InputMapping::Kind::kDense;
      im.type = column_type(in.dense().type());
      im.width = in.dense().width();
      im.log1p = in.dense().log1p();
      im.shift = in.dense().shift();
      im.scale = in.dense().scale();
    } else {
      const CategoricalInput& c = in.categorical();
      im.type = column_type(c.type());
      im.width = c.width();
      im.oov = c.oov();
      const bool buckets = c.oov() == OOV_BUCKETS;
      im.oov_buckets = buckets ? c.num_oov_buckets() : 0;
      if (c.has_weight_column()) im.weight_column = c.weight_column();
      if (c.has_vocabulary()) {
        im.kind = InputMapping::Kind::kVocabulary;
        // Keras's StringLookup: OOV ids first, then the tokens.
        for (int i = 0; i < c.vocabulary().token_size(); ++i) im.vocabulary.emplace(c.vocabulary().token(i), im.oov_buckets + i);
        im.id_count = im.oov_buckets + c.vocabulary().token_size();
      } else if (c.has_hash_buckets()) {
        im.kind = InputMapping::Kind::kHash;
        im.buckets = c.hash_buckets();
        im.oov_buckets = 0;
        im.id_count = im.buckets;
      } else if (c.has_identity_buckets()) {
        im.kind = InputMapping::Kind::kIdentity;
        im.buckets = c.identity_buckets();
        im.id_count = im.buckets + im.oov_buckets;
      } else {
        return absl::InvalidArgumentError("input \"" + in.name() + "\" has no vocabulary, hash_buckets or identity_buckets "
                                          "(vocabulary files must be read first: load_model_spec_file does)");
      }
    }
    m.inputs_.push_back(std::move(im));
  }
  for (const InputMapping& im : m.inputs_) TWINPS_RETURN_IF_ERROR(add_column(im.column, im.type, im.width));
  for (const InputMapping& im : m.inputs_)
    if (!im.weight_column.empty()) TWINPS_RETURN_IF_ERROR(add_column(im.weight_column, data::ColumnType::kFloat, im.width));

  const Label& l = spec.label();
  m.label_column_ = l.column();
  m.label_type_ = column_type(l.type());
  m.label_width_ = l.width();
  for (int i = 0; i < l.vocabulary().token_size(); ++i) m.label_vocabulary_.emplace(l.vocabulary().token(i), i);
  if (l.has_positive_label()) m.positive_label_ = l.positive_label();
  if (l.has_negative_label()) m.negative_label_ = l.negative_label();
  m.loss_ = loss_kind(spec.head().loss());
  m.classes_ = head_width;
  TWINPS_RETURN_IF_ERROR(add_column(m.label_column_, m.label_type_, m.label_width_));
  return m;
}

StatusOr<std::int64_t> FeatureMapper::id_of(const InputMapping& m, const data::Column& c, std::size_t i) const {
  auto out_of_vocabulary = [&](const std::string& what) -> StatusOr<std::int64_t> {
    switch (m.oov) {
      case OOV_BUCKETS: return static_cast<std::int64_t>(fingerprint(text_of(c, i)) % static_cast<std::uint64_t>(m.oov_buckets));
      case OOV_IGNORE: return -1;
      case OOV_ERROR: break;
    }
    return column_error(m.column, what);
  };
  switch (m.kind) {
    case InputMapping::Kind::kVocabulary: {
      auto it = m.vocabulary.find(text_of(c, i));
      if (it != m.vocabulary.end()) return it->second;
      return out_of_vocabulary("\"" + text_of(c, i) + "\" is not in the vocabulary (oov: OOV_ERROR)");
    }
    case InputMapping::Kind::kHash:
      return static_cast<std::int64_t>(fingerprint(text_of(c, i)) % static_cast<std::uint64_t>(m.buckets));
    case InputMapping::Kind::kIdentity: {
      const std::int64_t v = c.ints[i];
      if (v >= 0 && v < m.buckets) return v;
      auto id = out_of_vocabulary("id " + std::to_string(v) + " is outside [0, " + std::to_string(m.buckets) +
                                  ") (oov: OOV_ERROR)");
      if (id.ok() && *id >= 0 && m.oov == OOV_BUCKETS) return m.buckets + *id;  // OOV ids after the identity range
      return id;
    }
    case InputMapping::Kind::kDense: break;
  }
  return absl::InternalError("not a categorical input");
}

Status FeatureMapper::map_dense(const InputMapping& m, const data::Column& c, const data::RecordBatch& batch,
                                Matrix& out) const {
  out.resize(batch.size, m.width);
  for (std::int64_t r = 0; r < batch.size; ++r) {
    for (int k = 0; k < m.width; ++k) {
      const auto i = static_cast<std::size_t>(c.offsets[static_cast<std::size_t>(r)] + k);
      float x = c.type == data::ColumnType::kFloat ? c.floats[i] : static_cast<float>(c.ints[i]);
      if (!std::isfinite(x))
        return column_error(m.column, batch.describe_record(r) + " holds " + std::to_string(x));
      if (m.log1p) x = std::log1p(std::max(x, 0.0f));
      out(r, k) = (x - m.shift) * m.scale;
    }
  }
  return absl::OkStatus();
}

Status FeatureMapper::map_categorical(const InputMapping& m, const data::Column& c, const data::Column* weights,
                                      const data::RecordBatch& batch, IdBags& out) const {
  out = IdBags{};
  out.ids.reserve(static_cast<std::size_t>(c.offsets.back()));
  if (weights) out.weights.reserve(out.ids.capacity());
  for (std::size_t r = 0; r + 1 < c.offsets.size(); ++r) {
    const auto begin = static_cast<std::size_t>(c.offsets[r]), end = static_cast<std::size_t>(c.offsets[r + 1]);
    if (weights && weights->offsets[r + 1] - weights->offsets[r] != c.offsets[r + 1] - c.offsets[r])
      return column_error(m.weight_column, batch.describe_record(static_cast<std::int64_t>(r)) + " has " +
                                               std::to_string(weights->offsets[r + 1] - weights->offsets[r]) +
                                               " weights for " + std::to_string(end - begin) + " values of \"" +
                                               m.column + "\"");
    for (std::size_t i = begin; i < end; ++i) {
      auto id = id_of(m, c, i);
      if (!id.ok())
        return absl::InvalidArgumentError(std::string(id.status().message()) + " in " +
                                          batch.describe_record(static_cast<std::int64_t>(r)));
      if (*id < 0) continue;  // OOV_IGNORE
      out.ids.push_back(*id);
      if (weights) out.weights.push_back(weights->floats[static_cast<std::size_t>(weights->offsets[r]) + (i - begin)]);
    }
    out.offsets.push_back(static_cast<std::int64_t>(out.ids.size()));
  }
  return absl::OkStatus();
}

Status FeatureMapper::map_labels(const data::Column& c, const data::RecordBatch& batch, Matrix& out) const {
  out.resize(batch.size, label_width_);
  for (std::int64_t r = 0; r < batch.size; ++r) {
    for (int k = 0; k < label_width_; ++k) {
      const auto i = static_cast<std::size_t>(c.offsets[static_cast<std::size_t>(r)] + k);
      double y = 0;
      switch (c.type) {
        case data::ColumnType::kFloat: y = c.floats[i]; break;
        case data::ColumnType::kInt64: y = static_cast<double>(c.ints[i]); break;
        case data::ColumnType::kString: {
          auto it = label_vocabulary_.find(c.strings[i]);
          if (it == label_vocabulary_.end())
            return column_error(label_column_, batch.describe_record(r) + " has the label \"" +
                                                   c.strings[i] + "\", which is not in the label vocabulary");
          y = static_cast<double>(it->second);
          break;
        }
      }
      auto bad = [&](const std::string& what) {
        return column_error(label_column_, batch.describe_record(r) + " has the label " +
                                               std::to_string(y) + ": " + what);
      };
      if (!std::isfinite(y)) return bad("not a number");
      if (positive_label_) {  // binary labels written as two other values (LibSVM's +1/-1)
        if (y == *positive_label_) {
          y = 1;
        } else if (!negative_label_ || y == *negative_label_) {
          y = 0;
        } else {
          return bad("neither positive_label " + std::to_string(*positive_label_) + " nor negative_label " +
                     std::to_string(*negative_label_));
        }
      }
      if (loss_ == LossKind::kBinaryCrossEntropy && !(y >= 0 && y <= 1))
        return bad("binary cross-entropy takes labels in [0, 1]");
      if (loss_ == LossKind::kSoftmaxCrossEntropy && (y < 0 || y >= static_cast<double>(classes_) || y != std::floor(y)))
        return bad("softmax cross-entropy takes a class id in [0, " + std::to_string(classes_) + ")");
      out(r, k) = static_cast<float>(y);
    }
  }
  return absl::OkStatus();
}

StatusOr<Features> FeatureMapper::map(const data::Schema& schema, const data::RecordBatch& batch, bool labels) const {
  if (batch.columns.size() != schema.columns.size())
    return absl::InvalidArgumentError("the batch has " + std::to_string(batch.columns.size()) +
                                      " columns; its schema names " + std::to_string(schema.columns.size()));
  // The batch's column for `want`, checked against what the model reads.
  auto column = [&](const data::ColumnSpec& want) -> StatusOr<const data::Column*> {
    auto index = schema.index_of(want.name);
    if (!index) return column_error(want.name, "the data has no such column");
    const data::ColumnSpec& have = schema.columns[*index];
    const data::Column& c = batch.columns[*index];
    if (have.type != want.type || c.type != want.type)
      return column_error(want.name, std::string("holds ") + type_name(c.type) + " values; the model reads " +
                                         type_name(want.type));
    if (c.offsets.size() != static_cast<std::size_t>(batch.size) + 1)
      return column_error(want.name, "has " + std::to_string(c.offsets.size() - 1) + " records in a batch of " +
                                         std::to_string(batch.size));
    if (want.width > 0)
      for (std::size_t r = 0; r + 1 < c.offsets.size(); ++r)
        if (c.offsets[r + 1] - c.offsets[r] != want.width)
          return column_error(want.name, batch.describe_record(static_cast<std::int64_t>(r)) + " has " +
                                             std::to_string(c.offsets[r + 1] - c.offsets[r]) + " values; the model reads " +
                                             std::to_string(want.width));
    return &c;
  };
  auto spec_of = [&](const std::string& name) -> const data::ColumnSpec& {
    return schema_.columns[*schema_.index_of(name)];
  };

  Features f;
  f.batch = batch.size;
  f.dense.resize(inputs_.size());
  f.bags.resize(inputs_.size());
  for (std::size_t i = 0; i < inputs_.size(); ++i) {
    const InputMapping& m = inputs_[i];
    auto c = column(spec_of(m.column));
    if (!c.ok()) return c.status();
    if (m.kind == InputMapping::Kind::kDense) {
      TWINPS_RETURN_IF_ERROR(map_dense(m, **c, batch, f.dense[i]));
      continue;
    }
    const data::Column* weights = nullptr;
    if (!m.weight_column.empty()) {
      auto w = column(spec_of(m.weight_column));
      if (!w.ok()) return w.status();
      weights = *w;
    }
    TWINPS_RETURN_IF_ERROR(map_categorical(m, **c, weights, batch, f.bags[i]));
  }
  if (labels) {
    auto c = column(spec_of(label_column_));
    if (!c.ok()) return c.status();
    TWINPS_RETURN_IF_ERROR(map_labels(**c, batch, f.labels));
  }
  return f;
}

}  // namespace twinps::model
