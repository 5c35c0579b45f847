#pragma once
// CSV (RFC 4180) with a header line. The schema says which columns to read
// and their types; other header columns are ignored. Fields may be quoted
// ("a, b", "say ""hi""", values spanning lines); blank lines are passed over.
//
// A schema column of width 1, or a list column (width 0), is the header
// column of its name; a list's values are separated by the list separator.
// A column of width k > 1 is either one header column of its name holding k
// values ("0 0.5 1") or k header columns name_0 ... name_{k-1}.
//
// Errors: a schema column missing from the header names the file and the
// column (whatever the skip option: a schema that does not fit the file is
// not a bad record); a value of the wrong type names file, line and column.
#include <memory>
#include <string>
#include <vector>

#include "data/file_dataset.pb.h"
#include "core/data/input_file.h"
#include "core/data/record_reader.h"

namespace twinps::data {

class CsvReader final : public RecordReader {
 public:
  // `file_index` goes into each record's origin.
  static StatusOr<std::unique_ptr<CsvReader>> open(const std::string& path, std::int32_t file_index,
                                                   const Schema& schema, const CsvOptions& options);
  const Schema& schema() const override { return schema_; }
  StatusOr<bool> next(Record& record) override;
  StatusOr<std::int64_t> skip(std::int64_t n) override;

 private:
  // Where a schema column's values are: one field, or `fields` consecutive
  // entries of `field_indices` (name_0 ... name_{k-1}).
  struct Source {
    std::vector<std::size_t> fields;
  };

  CsvReader(std::unique_ptr<InputFile> file, std::int32_t file_index, Schema schema, char delimiter,
            char list_separator)
      : file_(std::move(file)),
        file_index_(file_index),
        schema_(std::move(schema)),
        delimiter_(delimiter),
        list_separator_(list_separator) {}

  // The text of the next record (physical lines joined while a quoted field
  // is open); false at the end of the file.
  StatusOr<bool> read_record_text();
  // Splits record_text_ into fields_ (unquoted into field_text_).
  Status split_fields();
  Status resolve_header(const std::string& path);
  Status convert(Record& record);
  std::string where() const;
  std::string_view field(std::size_t i) const {
    return std::string_view(field_text_).substr(fields_[i].first, fields_[i].second - fields_[i].first);
  }

  std::unique_ptr<InputFile> file_;
  std::int32_t file_index_;
  Schema schema_;
  char delimiter_, list_separator_;
  std::vector<std::string> header_;
  std::vector<Source> sources_;  // per schema column
  std::string line_, record_text_, field_text_;
  std::vector<std::pair<std::size_t, std::size_t>> fields_;
  std::int64_t lines_read_ = 0;
  std::int64_t record_line_ = 0;  // first line of the current record
};

}  // namespace twinps::data
