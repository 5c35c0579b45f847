#include "core/data/in_memory_records.h"

namespace twinps::data {

namespace {

const char* type_name(ColumnType t) {
  switch (t) {
    case ColumnType::kFloat: return "float";
    case ColumnType::kInt64: return "int64";
    case ColumnType::kString: return "string";
  }
  return "?";
}

std::size_t values_of(const Column& c) {
  switch (c.type) {
    case ColumnType::kFloat: return c.floats.size();
    case ColumnType::kInt64: return c.ints.size();
    case ColumnType::kString: return c.strings.size();
  }
  return 0;
}

class InMemoryRecordIterator final : public RecordIteratorResource {
 public:
  InMemoryRecordIterator(const Schema& schema, std::shared_ptr<const RecordBatch> records, DatasetOptions options,
                         RandomStream random)
      : schema_(schema), records_(std::move(records)), options_(options), random_(random) {
    start_pass();
  }

  const Schema& schema() const override { return schema_; }
  const ReadStats& stats() const override { return stats_; }
  std::string_view read_kernel() const override { return kReadMemoryKernel; }

  StatusOr<RecordBatch> next() override {
    const auto n = static_cast<std::size_t>(records_->size);
    if (n == 0) return absl::OutOfRangeError("the dataset is empty");
    if (position_ >= order_.size() ||
        (options_.drop_remainder && order_.size() - position_ < static_cast<std::size_t>(options_.batch_size))) {
      if (options_.repeat >= 0 && passes_done_ + 1 >= options_.repeat) return absl::OutOfRangeError("end of dataset");
      ++passes_done_;
      stats_.passes_completed = passes_done_;
      start_pass();
      if (options_.drop_remainder && n < static_cast<std::size_t>(options_.batch_size))
        return absl::OutOfRangeError("fewer records than one batch, and drop_remainder");
    }
    const std::size_t take = std::min(order_.size() - position_, static_cast<std::size_t>(options_.batch_size));
    RecordBatch batch = take_records(*records_, std::span(order_).subspan(position_, take));
    position_ += take;
    stats_.records_read += static_cast<std::int64_t>(take);
    return batch;
  }

 private:
  void start_pass() {
    const auto n = static_cast<std::size_t>(records_->size);
    position_ = 0;
    if (options_.shuffle_buffer > 0) {
      RandomStream pass_random = options_.reshuffle_each_iteration ? random_.fork("pass", passes_done_) : random_;
      order_ = shuffle_order(n, static_cast<std::size_t>(options_.shuffle_buffer), pass_random);
    } else {
      order_.resize(n);
      for (std::size_t i = 0; i < n; ++i) order_[i] = i;
    }
  }

  Schema schema_;  // a copy: the iterator may outlive its dataset
  std::shared_ptr<const RecordBatch> records_;
  DatasetOptions options_;
  RandomStream random_;
  std::vector<std::size_t> order_;
  std::size_t position_ = 0;
  std::int64_t passes_done_ = 0;
  ReadStats stats_;
};

}  // namespace

Status check_batch(const Schema& schema, const RecordBatch& batch) {
  if (batch.columns.size() != schema.columns.size())
    return absl::InvalidArgumentError("the batch has " + std::to_string(batch.columns.size()) +
                                      " columns; the schema " + std::to_string(schema.columns.size()));
  for (std::size_t i = 0; i < schema.columns.size(); ++i) {
    const ColumnSpec& spec = schema.columns[i];
    const Column& c = batch.columns[i];
    auto bad = [&](const std::string& what) {
      return absl::InvalidArgumentError("column \"" + spec.name + "\": " + what);
    };
    if (c.type != spec.type)
      return bad(std::string("holds ") + type_name(c.type) + " values; the schema says " + type_name(spec.type));
    if (c.offsets.size() != static_cast<std::size_t>(batch.size) + 1 || c.offsets.front() != 0)
      return bad("has offsets for " + std::to_string(c.offsets.size() - 1) + " records in a batch of " +
                 std::to_string(batch.size));
    for (std::size_t r = 0; r + 1 < c.offsets.size(); ++r) {
      const std::int64_t count = c.offsets[r + 1] - c.offsets[r];
      if (count < 0) return bad("offsets go backwards at record " + std::to_string(r));
      if (spec.width > 0 && count != spec.width)
        return bad("record " + std::to_string(r) + " has " + std::to_string(count) + " values; the column holds " +
                   std::to_string(spec.width));
    }
    if (static_cast<std::size_t>(c.offsets.back()) != values_of(c))
      return bad("offsets end at " + std::to_string(c.offsets.back()) + " but there are " +
                 std::to_string(values_of(c)) + " values");
  }
  return absl::OkStatus();
}

RecordBatch take_records(const RecordBatch& all, std::span<const std::size_t> indices) {
  RecordBatch out;
  out.size = static_cast<std::int64_t>(indices.size());
  out.columns.resize(all.columns.size());
  for (std::size_t k = 0; k < all.columns.size(); ++k) {
    const Column& from = all.columns[k];
    Column& to = out.columns[k];
    to.type = from.type;
    to.offsets.reserve(indices.size() + 1);
    to.offsets.assign(1, 0);
    for (std::size_t i : indices) {
      const auto begin = static_cast<std::size_t>(from.offsets[i]), end = static_cast<std::size_t>(from.offsets[i + 1]);
      switch (from.type) {
        case ColumnType::kFloat: to.floats.insert(to.floats.end(), from.floats.begin() + begin, from.floats.begin() + end); break;
        case ColumnType::kInt64: to.ints.insert(to.ints.end(), from.ints.begin() + begin, from.ints.begin() + end); break;
        case ColumnType::kString:
          to.strings.insert(to.strings.end(), from.strings.begin() + begin, from.strings.begin() + end);
          break;
      }
      to.offsets.push_back(to.offsets.back() + static_cast<std::int64_t>(end - begin));
    }
  }
  if (all.origins.size() == static_cast<std::size_t>(all.size)) {
    out.origins.reserve(indices.size());
    for (std::size_t i : indices) out.origins.push_back(all.origins[i]);
    out.files = all.files;
  }
  return out;
}

void append_records(RecordBatch& into, const RecordBatch& batch) {
  if (into.columns.empty()) {
    into.columns.resize(batch.columns.size());
    for (std::size_t k = 0; k < batch.columns.size(); ++k) {
      into.columns[k].type = batch.columns[k].type;
      into.columns[k].offsets.assign(1, 0);
    }
    into.files = batch.files;
  }
  for (std::size_t k = 0; k < batch.columns.size(); ++k) {
    const Column& from = batch.columns[k];
    Column& to = into.columns[k];
    const std::int64_t base = to.offsets.back();
    to.floats.insert(to.floats.end(), from.floats.begin(), from.floats.end());
    to.ints.insert(to.ints.end(), from.ints.begin(), from.ints.end());
    to.strings.insert(to.strings.end(), from.strings.begin(), from.strings.end());
    for (std::size_t r = 1; r < from.offsets.size(); ++r) to.offsets.push_back(base + from.offsets[r]);
  }
  into.origins.insert(into.origins.end(), batch.origins.begin(), batch.origins.end());
  into.size += batch.size;
}

StatusOr<std::unique_ptr<InMemoryRecordDataset>> InMemoryRecordDataset::create(
    Schema schema, std::shared_ptr<const RecordBatch> records, DatasetOptions options) {
  if (options.batch_size <= 0) return absl::InvalidArgumentError("batch_size must be positive");
  if (options.shuffle_buffer < 0) return absl::InvalidArgumentError("shuffle buffer must not be negative");
  if (options.repeat == 0 || options.repeat < -1) return absl::InvalidArgumentError("repeat must be -1 or positive");
  if (!records) return absl::InvalidArgumentError("no records");
  TWINPS_RETURN_IF_ERROR(check_batch(schema, *records));
  return std::unique_ptr<InMemoryRecordDataset>(
      new InMemoryRecordDataset(std::move(schema), std::move(records), options));
}

std::unique_ptr<RecordIteratorResource> InMemoryRecordDataset::make_iterator(RandomStream random) const {
  return std::make_unique<InMemoryRecordIterator>(schema_, records_, options_, random);
}

}  // namespace twinps::data
