#pragma once
// Builds record batches (core/data/records.h) in tests: one column per call,
// one inner vector per record.
#include <string>
#include <utility>
#include <vector>

#include "core/data/records.h"

namespace twinps::testing {

inline data::Column float_column(const std::vector<std::vector<float>>& records) {
  data::Column c;
  c.type = data::ColumnType::kFloat;
  c.offsets = {0};
  for (const auto& r : records) {
    c.floats.insert(c.floats.end(), r.begin(), r.end());
    c.offsets.push_back(static_cast<std::int64_t>(c.floats.size()));
  }
  return c;
}

inline data::Column int_column(const std::vector<std::vector<std::int64_t>>& records) {
  data::Column c;
  c.type = data::ColumnType::kInt64;
  c.offsets = {0};
  for (const auto& r : records) {
    c.ints.insert(c.ints.end(), r.begin(), r.end());
    c.offsets.push_back(static_cast<std::int64_t>(c.ints.size()));
  }
  return c;
}

inline data::Column string_column(const std::vector<std::vector<std::string>>& records) {
  data::Column c;
  c.type = data::ColumnType::kString;
  c.offsets = {0};
  for (const auto& r : records) {
    c.strings.insert(c.strings.end(), r.begin(), r.end());
    c.offsets.push_back(static_cast<std::int64_t>(c.strings.size()));
  }
  return c;
}

// A schema and a batch built column by column, in the same order.
struct Records {
  data::Schema schema;
  data::RecordBatch batch;

  Records& add(std::string name, data::Column column, int width) {
    schema.columns.push_back(data::ColumnSpec{std::move(name), column.type, width});
    batch.size = static_cast<std::int64_t>(column.offsets.size()) - 1;
    batch.columns.push_back(std::move(column));
    return *this;
  }
};

}  // namespace twinps::testing
