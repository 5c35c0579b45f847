#include "core/data/record_reader.h"

namespace twinps::data {

RecordBatchBuilder::RecordBatchBuilder(const Schema& schema, std::shared_ptr<const std::vector<std::string>> files)
    : schema_(schema), files_(std::move(files)) {
  reset();
}

void RecordBatchBuilder::reset() {
  batch_ = RecordBatch{};
  batch_.files = files_;
  batch_.columns.resize(schema_.columns.size());
  // Room for a batch like the last one, so that filling it does not grow
  // its vectors step by step (moving every value each time): a batch of 512
  // grew each of them about ten times.
  batch_.origins.reserve(last_size_.records);
  for (std::size_t c = 0; c < schema_.columns.size(); ++c) {
    Column& column = batch_.columns[c];
    column.type = schema_.columns[c].type;
    column.offsets.reserve(last_size_.records + 1);
    column.offsets.push_back(0);
    const std::size_t values = c < last_size_.values.size() ? last_size_.values[c] : 0;
    switch (column.type) {
      case ColumnType::kFloat: column.floats.reserve(values); break;
      case ColumnType::kInt64: column.ints.reserve(values); break;
      case ColumnType::kString: column.strings.reserve(values); break;
    }
  }
}

void RecordBatchBuilder::add(const Record& record) {
  for (std::size_t c = 0; c < batch_.columns.size(); ++c) {
    Column& column = batch_.columns[c];
    const Record::Span s = record.spans[c];
    switch (column.type) {
      case ColumnType::kFloat:
        column.floats.insert(column.floats.end(), record.floats.begin() + s.begin, record.floats.begin() + s.end);
        column.offsets.push_back(static_cast<std::int64_t>(column.floats.size()));
        break;
      case ColumnType::kInt64:
        column.ints.insert(column.ints.end(), record.ints.begin() + s.begin, record.ints.begin() + s.end);
        column.offsets.push_back(static_cast<std::int64_t>(column.ints.size()));
        break;
      case ColumnType::kString:
        column.strings.insert(column.strings.end(), record.strings.begin() + s.begin, record.strings.begin() + s.end);
        column.offsets.push_back(static_cast<std::int64_t>(column.strings.size()));
        break;
    }
  }
  batch_.origins.push_back(record.origin);
  ++batch_.size;
}

RecordBatch RecordBatchBuilder::finish() {
  last_size_.records = static_cast<std::size_t>(batch_.size);
  last_size_.values.clear();
  for (const Column& c : batch_.columns) last_size_.values.push_back(static_cast<std::size_t>(c.offsets.back()));
  RecordBatch out = std::move(batch_);
  reset();
  return out;
}

}  // namespace twinps::data
