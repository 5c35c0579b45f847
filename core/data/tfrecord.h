#pragma once
// TFRecord files of tf.train.Example, as TensorFlow writes and reads them.
//
// Framing, per record (little-endian):
//   uint64 length | uint32 masked CRC-32C of the length bytes | data[length] | uint32 masked CRC-32C of data
// where mask(crc) = rotate_right(crc, 15) + 0xa282ead8.
//
// The data is a serialized tf.train.Example (example.proto here, the same
// wire format as TensorFlow's). The hot path decodes the wire format
// straight into a Record with no intermediate message (TFRecord readers feed
// training steps); example.proto's generated classes are there for tests and
// for users who want them, and must agree with this codec.
//
// Errors are DATA_LOSS for a damaged file (bad checksum, truncation, a record
// that is not an Example) and INVALID_ARGUMENT for an Example that does not
// fit the schema (a missing feature, another type, another count), each
// naming the file, the record (counting from 1) and its byte offset.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/data/column_index.h"
#include "core/data/input_file.h"
#include "core/data/record_reader.h"

namespace twinps::data {

std::uint32_t mask_crc(std::uint32_t crc);
std::uint32_t unmask_crc(std::uint32_t masked);

// The framing alone: reads records' bytes.
class TfRecordFileReader {
 public:
  static StatusOr<std::unique_ptr<TfRecordFileReader>> open(const std::string& path);
  const std::string& path() const { return file_->path(); }

  // The next record's bytes; false at the end. After an error,
  // recoverable() says whether the reader got past the bad record (only a
  // bad data checksum: the length was sound).
  StatusOr<bool> read(std::string& data);
  // The same, in place in the file's buffer (no copy): `data` is valid until
  // the next call on this reader.
  StatusOr<bool> read_view(std::string_view& data);
  // Passes over the next record, checking the length's checksum but not
  // the data's; false at the end.
  StatusOr<bool> skip();
  bool recoverable() const { return recoverable_; }
  std::int64_t records_passed() const { return records_passed_; }
  // Byte offset of the record last read or passed over.
  std::uint64_t record_offset() const { return record_offset_; }
  std::string where() const;

 private:
  explicit TfRecordFileReader(std::unique_ptr<InputFile> file) : file_(std::move(file)) {}
  // Reads and checks a header: the data length, or nullopt at the end.
  StatusOr<std::optional<std::uint64_t>> read_header();

  std::unique_ptr<InputFile> file_;
  bool recoverable_ = true;
  std::int64_t records_passed_ = 0;
  std::uint64_t record_offset_ = 0;
};

class TfRecordWriter {
 public:
  // A ".gz" path writes a gzip-compressed file (TensorFlow's "GZIP").
  static StatusOr<std::unique_ptr<TfRecordWriter>> create(const std::string& path);
  Status write(std::string_view record);
  Status close();
  std::int64_t records_written() const { return records_; }

 private:
  explicit TfRecordWriter(std::unique_ptr<OutputFile> out) : out_(std::move(out)) {}
  std::unique_ptr<OutputFile> out_;
  std::string frame_;
  std::int64_t records_ = 0;
};

// Serializes `record`'s columns as a tf.train.Example whose features are
// named after the schema's columns (float -> float_list, int64 ->
// int64_list, string -> bytes_list), in schema order.
void encode_example(const Schema& schema, const Record& record, std::string& out);

// Decodes a serialized tf.train.Example into `record` following `schema`.
// Errors are the text after "file record N:" (the caller names the record).
class ExampleDecoder {
 public:
  explicit ExampleDecoder(const Schema& schema);
  // `status_code` of a failure: DATA_LOSS if the bytes are not an Example,
  // INVALID_ARGUMENT if the Example does not fit the schema.
  Status decode(std::string_view bytes, Record& record) const;

 private:
  const Schema& schema_;
  // Feature names are looked up as the string_views the bytes hold; the
  // index remembers the last record's names by position (so, mutable).
  mutable ColumnIndex column_of_;
  // Which list kind each column was given in the record being decoded;
  // kept between calls so a record costs no allocation (a decoder belongs to
  // one reader).
  mutable std::vector<int> kinds_;
};

// RecordReader over a TFRecord file of Examples.
class TfRecordReader final : public RecordReader {
 public:
  static StatusOr<std::unique_ptr<TfRecordReader>> open(const std::string& path, std::int32_t file_index,
                                                        const Schema& schema);
  const Schema& schema() const override { return schema_; }
  StatusOr<bool> next(Record& record) override;
  StatusOr<std::int64_t> skip(std::int64_t n) override;

 private:
  TfRecordReader(std::unique_ptr<TfRecordFileReader> file, std::int32_t file_index, const Schema& schema)
      : file_(std::move(file)), file_index_(file_index), schema_(schema), decoder_(schema_) {}
  std::unique_ptr<TfRecordFileReader> file_;
  std::int32_t file_index_;
  Schema schema_;
  ExampleDecoder decoder_;
};

}  // namespace twinps::data
