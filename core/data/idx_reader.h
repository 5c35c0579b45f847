#pragma once
// IDX, the MNIST format: a magic (two zero bytes, a type code, the number of
// dimensions), the dimensions as big-endian uint32, then the items, big-endian.
// An images file (N x rows x cols, or any N x d1 x ... x dk) is paired with
// a labels file (N): record i is image i as a float column of width
// d1*...*dk, and label i as an int64 column. Both files may be gzipped.
//
// A file that ends before its header says it should is DATA_LOSS naming the
// file and the record, and the rest of the file is unreadable.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/file_dataset.pb.h"
#include "core/data/input_file.h"
#include "core/data/record_reader.h"

namespace twinps::data {

// One IDX file's header.
struct IdxHeader {
  std::uint8_t type = 0;  // 0x08 ubyte, 0x09 byte, 0x0B int16, 0x0C int32, 0x0D float32, 0x0E float64
  std::vector<std::uint32_t> dims;
  std::int64_t items() const { return dims.empty() ? 0 : dims[0]; }
  std::int64_t values_per_item() const;
  std::int64_t bytes_per_item() const;
  std::int64_t header_bytes() const { return 4 + 4 * static_cast<std::int64_t>(dims.size()); }
};

// The columns an IDX pair gives: image (float, `image_width` values) and,
// with a labels file, label (int64).
Schema idx_schema(const IdxOptions& options, std::int64_t image_width, bool with_labels);

class IdxReader final : public RecordReader {
 public:
  // `labels_path` may be empty: images only. `file_index` goes into origins.
  static StatusOr<std::unique_ptr<IdxReader>> open(const std::string& images_path, const std::string& labels_path,
                                                   std::int32_t file_index, const IdxOptions& options);
  const Schema& schema() const override { return schema_; }
  const IdxHeader& images_header() const { return images_header_; }
  StatusOr<bool> next(Record& record) override;
  StatusOr<std::int64_t> skip(std::int64_t n) override;

 private:
  IdxReader() = default;
  Status truncated(const InputFile& file, std::int64_t bytes_per_item);

  std::unique_ptr<InputFile> images_, labels_;
  IdxHeader images_header_, labels_header_;
  std::int32_t file_index_ = 0;
  bool scale_ = false;
  Schema schema_;
  std::vector<unsigned char> scratch_;
};

// Writes an IDX file of unsigned bytes (for tests and tools): `dims[0]` items.
Status write_idx_ubyte(const std::string& path, const std::vector<std::uint32_t>& dims,
                       const std::vector<std::uint8_t>& values);

}  // namespace twinps::data
