#pragma once
// Records: the contract between the file readers (CSV, LibSVM, IDX, TFRecord)
// and a model's input layer. A reader turns files into records that follow a
// Schema of typed, named columns; a dataset batches them into RecordBatches,
// stored column by column so that an input layer reads a whole column of a
// batch at once (a dense feature as a [batch x width] matrix, a bag of ids as
// a ragged list). Mapping strings to ids (vocabularies, hashing) is the input
// layer's work, not the reader's: a reader only checks types and arity.
#include <cstdint>
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

// A batch of records; `columns` follow the schema's order.
struct RecordBatch {
  std::int64_t size = 0;
  std::vector<Column> columns;
};

}  // namespace twinps::data
