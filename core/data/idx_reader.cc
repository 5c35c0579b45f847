#include "core/data/idx_reader.h"

#include <algorithm>
#include <cstring>

namespace twinps::data {
namespace {

int type_bytes(std::uint8_t type) {
  switch (type) {
    case 0x08: case 0x09: return 1;
    case 0x0B: return 2;
    case 0x0C: case 0x0D: return 4;
    case 0x0E: return 8;
    default: return 0;
  }
}

std::uint64_t big_endian(const unsigned char* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | p[i];
  return v;
}

// The value at `p` of IDX type `type`, as a double (exact for every type).
double value_at(const unsigned char* p, std::uint8_t type) {
  switch (type) {
    case 0x08: return p[0];
    case 0x09: return static_cast<std::int8_t>(p[0]);
    case 0x0B: return static_cast<std::int16_t>(big_endian(p, 2));
    case 0x0C: return static_cast<std::int32_t>(big_endian(p, 4));
    case 0x0D: {
      const auto bits = static_cast<std::uint32_t>(big_endian(p, 4));
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    case 0x0E: {
      const std::uint64_t bits = big_endian(p, 8);
      double d;
      std::memcpy(&d, &bits, 8);
      return d;
    }
    default: return 0;
  }
}

StatusOr<IdxHeader> read_header(InputFile& file) {
  unsigned char magic[4];
  auto got = file.read(magic, 4);
  if (!got.ok()) return got.status();
  if (*got < 4 || magic[0] != 0 || magic[1] != 0 || type_bytes(magic[2]) == 0 || magic[3] == 0)
    return absl::InvalidArgumentError(file.path() + ": not an IDX file (bad magic number)");
  IdxHeader h;
  h.type = magic[2];
  for (int i = 0; i < magic[3]; ++i) {
    unsigned char d[4];
    got = file.read(d, 4);
    if (!got.ok()) return got.status();
    if (*got < 4) return absl::DataLossError(file.path() + ": the IDX header is truncated");
    h.dims.push_back(static_cast<std::uint32_t>(big_endian(d, 4)));
  }
  if (h.bytes_per_item() > (std::int64_t{1} << 30))
    return absl::InvalidArgumentError(file.path() + ": IDX items of " + std::to_string(h.bytes_per_item()) +
                                      " bytes are not supported");
  return h;
}

}  // namespace

std::int64_t IdxHeader::values_per_item() const {
  std::int64_t n = 1;
  for (std::size_t i = 1; i < dims.size(); ++i) {
    n *= dims[i];
    if (n > (std::int64_t{1} << 31)) return (std::int64_t{1} << 31) + 1;  // too large: rejected by read_header
  }
  return n;
}

std::int64_t IdxHeader::bytes_per_item() const { return values_per_item() * type_bytes(type); }

Schema idx_schema(const IdxOptions& options, std::int64_t image_width, bool with_labels) {
  Schema s;
  s.columns.push_back({options.image_column(), ColumnType::kFloat, static_cast<int>(image_width)});
  if (with_labels) s.columns.push_back({options.label_column(), ColumnType::kInt64, 1});
  return s;
}

StatusOr<std::unique_ptr<IdxReader>> IdxReader::open(const std::string& images_path, const std::string& labels_path,
                                                     std::int32_t file_index, const IdxOptions& options) {
  auto reader = std::unique_ptr<IdxReader>(new IdxReader());
  reader->file_index_ = file_index;
  auto images = InputFile::open(images_path);
  if (!images.ok()) return images.status();
  reader->images_ = std::move(*images);
  auto header = read_header(*reader->images_);
  if (!header.ok()) return header.status();
  reader->images_header_ = *header;
  if (!labels_path.empty()) {
    auto labels = InputFile::open(labels_path);
    if (!labels.ok()) return labels.status();
    reader->labels_ = std::move(*labels);
    auto lh = read_header(*reader->labels_);
    if (!lh.ok()) return lh.status();
    reader->labels_header_ = *lh;
    if (lh->values_per_item() != 1 || lh->type == 0x0D || lh->type == 0x0E)
      return absl::InvalidArgumentError(labels_path + ": an IDX labels file holds one integer per item");
    if (lh->items() != header->items())
      return absl::InvalidArgumentError(images_path + " has " + std::to_string(header->items()) + " items but " +
                                        labels_path + " has " + std::to_string(lh->items()) + " labels");
  }
  reader->scale_ = options.scale_to_unit();
  if (reader->scale_ && header->type != 0x08)
    return absl::InvalidArgumentError(images_path + ": scale_to_unit applies to unsigned-byte images only");
  reader->schema_ = idx_schema(options, header->values_per_item(), reader->labels_ != nullptr);
  return reader;
}

Status IdxReader::truncated(const InputFile& file, std::int64_t bytes_per_item) {
  recoverable_ = false;
  return absl::DataLossError(file.path() + " record " + std::to_string(records_passed_) + ": truncated (the file ends at byte " +
                             std::to_string(file.offset()) + ", the record needs " + std::to_string(bytes_per_item) +
                             " bytes from byte " +
                             std::to_string(images_header_.header_bytes() + (records_passed_ - 1) * bytes_per_item) + ")");
}

StatusOr<bool> IdxReader::next(Record& record) {
  recoverable_ = true;
  if (records_passed_ >= images_header_.items()) return false;
  ++records_passed_;
  record.clear(schema_.columns.size());
  record.origin = RecordOrigin{file_index_, records_passed_, 0};

  const std::int64_t item_bytes = images_header_.bytes_per_item();
  scratch_.resize(static_cast<std::size_t>(item_bytes));
  auto got = images_->read(scratch_.data(), scratch_.size());
  if (!got.ok()) {
    recoverable_ = false;
    return got.status();
  }
  if (*got < scratch_.size()) return truncated(*images_, item_bytes);
  const auto width = static_cast<std::size_t>(images_header_.values_per_item());
  record.floats.resize(width);
  if (images_header_.type == 0x08) {
    // Divided, not multiplied by 1/255: the same floats as PyTorch's ToTensor or x / 255.0 in NumPy.
    const float divisor = scale_ ? 255.0f : 1.0f;
    for (std::size_t i = 0; i < width; ++i) record.floats[i] = static_cast<float>(scratch_[i]) / divisor;
  } else {
    const int b = type_bytes(images_header_.type);
    for (std::size_t i = 0; i < width; ++i)
      record.floats[i] = static_cast<float>(value_at(scratch_.data() + i * static_cast<std::size_t>(b), images_header_.type));
  }
  record.spans[0] = {0, static_cast<std::uint32_t>(width)};

  if (labels_) {
    unsigned char label[8];
    const int b = type_bytes(labels_header_.type);
    auto lg = labels_->read(label, static_cast<std::size_t>(b));
    if (!lg.ok()) {
      recoverable_ = false;
      return lg.status();
    }
    if (*lg < static_cast<std::size_t>(b)) return truncated(*labels_, b);
    record.ints.push_back(static_cast<std::int64_t>(value_at(label, labels_header_.type)));
    record.spans[1] = {0, 1};
  }
  return true;
}

StatusOr<std::int64_t> IdxReader::skip(std::int64_t n) {
  const std::int64_t left = images_header_.items() - records_passed_;
  const std::int64_t take = std::max<std::int64_t>(0, std::min(n, left));
  if (take == 0) return 0;
  const std::int64_t item_bytes = images_header_.bytes_per_item();
  auto skipped = images_->skip(static_cast<std::uint64_t>(take * item_bytes));
  if (!skipped.ok()) return skipped.status();
  if (labels_) {
    const std::int64_t label_bytes = type_bytes(labels_header_.type);
    auto ls = labels_->skip(static_cast<std::uint64_t>(take * label_bytes));
    if (!ls.ok()) return ls.status();
  }
  // A short file shows when its records are read; skipping only moves past them.
  records_passed_ += take;
  return take;
}

Status write_idx_ubyte(const std::string& path, const std::vector<std::uint32_t>& dims,
                       const std::vector<std::uint8_t>& values) {
  auto out = OutputFile::create(path);
  if (!out.ok()) return out.status();
  std::string bytes = {0, 0, 0x08, static_cast<char>(dims.size())};
  for (std::uint32_t d : dims)
    for (int shift = 24; shift >= 0; shift -= 8) bytes += static_cast<char>((d >> shift) & 0xff);
  bytes.append(values.begin(), values.end());
  TWINPS_RETURN_IF_ERROR((*out)->write(bytes));
  return (*out)->close();
}

}  // namespace twinps::data
