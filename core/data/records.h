#pragma once
// Records: the contract between the file readers (CSV, LibSVM, IDX, TFRecord)
// and a model's input layer. A reader turns files into records that follow a
// Schema of typed, named columns; a dataset batches them into RecordBatches,
// stored column by column so that an input layer reads a whole column of a
// batch at once (a dense feature as a [batch x width] matrix, a bag of ids as
// a ragged list). Mapping strings to ids (vocabularies, hashing) is the input
// layer's work, not the reader's: a reader only checks types and arity.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace twinps::data {

enum class ColumnType { kFloat, kInt64, kString };

struct ColumnSpec {
  std::string name;
  ColumnType type = ColumnType::kFloat;
  // Values per record: >= 1 a fixed count (a scalar is 1, a 28x28 image 784);
  // 0 a list of any length (a bag of ids, LibSVM's feature indices).
  int width = 1;
};

struct Schema {
  std::vector<ColumnSpec> columns;

  // The column's position, or nullopt.
  std::optional<std::size_t> index_of(const std::string& name) const {
    for (std::size_t i = 0; i < columns.size(); ++i)
      if (columns[i].name == name) return i;
    return std::nullopt;
  }
};

// One column of a batch: the values of every record back to back. Record i's
// values are [offsets[i], offsets[i + 1]) of the vector its type selects.
struct Column {
  ColumnType type = ColumnType::kFloat;
  std::vector<float> floats;          // kFloat
  std::vector<std::int64_t> ints;     // kInt64
  std::vector<std::string> strings;   // kString
  std::vector<std::int64_t> offsets;  // records + 1 entries; offsets[0] == 0
};

// Where a record was read, so that a consumer (an input layer meeting an id
// out of range, say) can name it: the file (an index into RecordBatch::files),
// the record's number in that file, counting from 1, and for text formats its
// first line.
struct RecordOrigin {
  std::int32_t file = -1;
  std::int64_t record = 0;
  std::int64_t line = 0;  // 0 for binary formats
};

// A batch of records; `columns` follow the schema's order.
struct RecordBatch {
  std::int64_t size = 0;
  std::vector<Column> columns;
  // One per record when the batch came from files (empty otherwise).
  std::vector<RecordOrigin> origins;
  std::shared_ptr<const std::vector<std::string>> files;

  // "train.csv:12 (record 11)" or "part-0.tfrecord record 7"; "record i" if unknown.
  std::string describe_record(std::int64_t i) const {
    if (i < 0 || i >= static_cast<std::int64_t>(origins.size()) || !files) return "record " + std::to_string(i);
    const RecordOrigin& o = origins[static_cast<std::size_t>(i)];
    const std::string file = o.file >= 0 && o.file < static_cast<std::int32_t>(files->size())
                                 ? (*files)[static_cast<std::size_t>(o.file)]
                                 : std::string("?");
    if (o.line > 0) return file + ":" + std::to_string(o.line) + " (record " + std::to_string(o.record) + ")";
    return file + " record " + std::to_string(o.record);
  }
};

inline const char* column_type_name(ColumnType t) {
  switch (t) {
    case ColumnType::kFloat: return "float";
    case ColumnType::kInt64: return "int64";
    case ColumnType::kString: return "string";
  }
  return "?";
}

}  // namespace twinps::data
