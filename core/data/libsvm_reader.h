#pragma once
// LibSVM / SVMlight text: one example per line,
//   label [qid:Q] index:value index:value ... [# comment]
// read into a float label column, an int64 list of indices and a parallel
// float list of values (a sparse row), and optionally an int64 qid column.
// Indices are kept as written (LibSVM counts from 1; the input layer maps
// them). Blank and comment-only lines are not records.
#include <memory>
#include <string>

#include "data/file_dataset.pb.h"
#include "core/data/input_file.h"
#include "core/data/record_reader.h"

namespace twinps::data {

// The columns a LibSVM file gives: label, [qid,] indices, values.
Schema libsvm_schema(const LibSvmOptions& options);

class LibSvmReader final : public RecordReader {
 public:
  static StatusOr<std::unique_ptr<LibSvmReader>> open(const std::string& path, std::int32_t file_index,
                                                      const LibSvmOptions& options);
  const Schema& schema() const override { return schema_; }
  StatusOr<bool> next(Record& record) override;
  StatusOr<std::int64_t> skip(std::int64_t n) override;

 private:
  LibSvmReader(std::unique_ptr<InputFile> file, std::int32_t file_index, const LibSvmOptions& options);
  // The next line holding a record, without its comment; false at the end.
  StatusOr<bool> next_record_line();
  std::string where() const;

  std::unique_ptr<InputFile> file_;
  std::int32_t file_index_;
  Schema schema_;
  bool keep_qid_;
  std::string line_;
  std::string_view content_;  // line_ without comment and blanks
  std::int64_t lines_read_ = 0;
};

}  // namespace twinps::data
