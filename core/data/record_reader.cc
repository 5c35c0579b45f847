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
  for (std::size_t c = 0; c < schema_.columns.size(); ++c) {
    batch_.columns[c].type = schema_.columns[c].type;
    batch_.columns[c].offsets.push_back(0);
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
  RecordBatch out = std::move(batch_);
  reset();
  return out;
}

}  // namespace twinps::data
