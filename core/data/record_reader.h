#pragma once
// The interface every file format implements: a RecordReader reads one file
// (for IDX, one images + labels pair) record by record into Records that
// follow a Schema, and RecordBatchBuilder gathers Records into the columnar
// RecordBatch of records.h.
//
// Errors name the file and the record (text formats: the line), counting
// from 1. A reader that fails on one record may be able to go on with the
// next (a value of the wrong type, a bad data checksum) or not (a truncated
// file, a damaged length field): `recoverable()` says which, so that a
// dataset asked to skip bad records knows whether the rest of the file is
// still readable.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/data/records.h"
#include "core/runtime/status.h"

namespace twinps::data {

// One record: each column's values in the vector of its type, at the span the
// reader recorded for that column.
struct Record {
  struct Span {
    std::uint32_t begin = 0, end = 0;
  };
  std::vector<float> floats;
  std::vector<std::int64_t> ints;
  std::vector<std::string> strings;
  std::vector<Span> spans;  // one per schema column
  RecordOrigin origin;

  // Empties the record for `columns` columns, keeping the vectors' capacity.
  void clear(std::size_t columns) {
    floats.clear();
    ints.clear();
    strings.clear();
    spans.assign(columns, Span{});
  }
  std::size_t values(std::size_t column) const { return spans[column].end - spans[column].begin; }
};

// Appends Records to a RecordBatch column by column.
class RecordBatchBuilder {
 public:
  RecordBatchBuilder(const Schema& schema, std::shared_ptr<const std::vector<std::string>> files);
  void add(const Record& record);
  std::int64_t size() const { return batch_.size; }
  // The batch so far; the builder starts a new one.
  RecordBatch finish();

 private:
  void reset();
  const Schema& schema_;
  std::shared_ptr<const std::vector<std::string>> files_;
  RecordBatch batch_;
  // The last finished batch's records and values per column.
  struct Size {
    std::size_t records = 0;
    std::vector<std::size_t> values;
  } last_size_;
};

class RecordReader {
 public:
  virtual ~RecordReader() = default;
  virtual const Schema& schema() const = 0;

  // Reads the next record into `record` (origin set). false at the end.
  virtual StatusOr<bool> next(Record& record) = 0;
  // Passes over up to `n` records without decoding their values (the start
  // of a record range, counting); returns how many there were.
  virtual StatusOr<std::int64_t> skip(std::int64_t n) = 0;
  // After an error: whether the reader got past the bad record, so that
  // next() reads the one after it.
  bool recoverable() const { return recoverable_; }
  // Records read or passed over so far (the failed one included).
  std::int64_t records_passed() const { return records_passed_; }

 protected:
  bool recoverable_ = true;
  std::int64_t records_passed_ = 0;
};

// Checks a value count against a column's width (0: any count). The error
// text is what readers put after their "file record N:" prefix.
inline std::string width_mismatch(const ColumnSpec& column, std::size_t got) {
  return "column \"" + column.name + "\" wants " + std::to_string(column.width) + " value" +
         (column.width == 1 ? "" : "s") + ", the record has " + std::to_string(got);
}

}  // namespace twinps::data
