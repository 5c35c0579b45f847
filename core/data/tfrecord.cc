#include "core/data/tfrecord.h"

#include <cstring>

#include "core/checkpoint/crc32c.h"

namespace twinps::data {
namespace {

constexpr std::uint32_t kMaskDelta = 0xa282ead8u;
// A record larger than this is refused rather than allocated (protobuf
// messages cannot exceed 2 GiB anyway).
constexpr std::uint64_t kMaxRecordBytes = 1ull << 30;

std::uint32_t load_u32(const unsigned char* p) {
  return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 |
         static_cast<std::uint32_t>(p[2]) << 16 | static_cast<std::uint32_t>(p[3]) << 24;
}
std::uint64_t load_u64(const unsigned char* p) {
  return static_cast<std::uint64_t>(load_u32(p)) | static_cast<std::uint64_t>(load_u32(p + 4)) << 32;
}
void store_u32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}
void store_u64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

// ---------------------------------------------------------------- protobuf wire format

enum WireType { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}
void put_key(std::string& out, int field, WireType type) { put_varint(out, static_cast<std::uint64_t>(field) << 3 | type); }
std::size_t varint_size(std::uint64_t v) {
  std::size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

// Reads protobuf wire format from a byte range; every read checks bounds.
class Wire {
 public:
  explicit Wire(std::string_view bytes)
      : p_(reinterpret_cast<const unsigned char*>(bytes.data())), end_(p_ + bytes.size()) {}
  bool done() const { return p_ == end_; }

  bool varint(std::uint64_t& v) {
    // Tags and lengths are almost always one byte: no loop for those.
    if (p_ != end_ && *p_ < 0x80) {
      v = *p_++;
      return true;
    }
    v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ == end_) return false;
      const unsigned char b = *p_++;
      v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  }
  bool key(int& field, int& type) {
    std::uint64_t k;
    if (!varint(k) || (k >> 3) == 0 || (k >> 3) > 0x1fffffff) return false;
    field = static_cast<int>(k >> 3);
    type = static_cast<int>(k & 7);
    return true;
  }
  bool bytes(std::string_view& out) {
    std::uint64_t n;
    if (!varint(n) || n > static_cast<std::uint64_t>(end_ - p_)) return false;
    out = std::string_view(reinterpret_cast<const char*>(p_), static_cast<std::size_t>(n));
    p_ += n;
    return true;
  }
  bool fixed32(std::uint32_t& v) {
    if (end_ - p_ < 4) return false;
    v = load_u32(p_);
    p_ += 4;
    return true;
  }
  bool skip(int type) {
    std::uint64_t v;
    std::string_view s;
    switch (type) {
      case kVarint: return varint(v);
      case kFixed64:
        if (end_ - p_ < 8) return false;
        p_ += 8;
        return true;
      case kLengthDelimited: return bytes(s);
      case kFixed32:
        if (end_ - p_ < 4) return false;
        p_ += 4;
        return true;
      default: return false;  // groups are not used by Example
    }
  }

 private:
  const unsigned char* p_;
  const unsigned char* end_;
};

// A map entry as protobuf writes a short one: the key (field 1), then the
// value (field 2), each with a one-byte length, and nothing else. True if
// `entry` is exactly that; anything else (a longer value, another order,
// a repeated field) is left to the general loop, which gives the same
// answer for these.
bool split_short_entry(std::string_view entry, std::string_view& key, std::string_view& value) {
  const auto* p = reinterpret_cast<const unsigned char*>(entry.data());
  const std::size_t n = entry.size();
  if (n < 4 || p[0] != 0x0a || p[1] >= 0x80) return false;  // 0x0a: field 1, length-delimited
  const std::size_t key_end = 2 + p[1];
  if (key_end + 2 > n || p[key_end] != 0x12 || p[key_end + 1] >= 0x80) return false;  // 0x12: field 2
  if (key_end + 2 + p[key_end + 1] != n) return false;
  key = entry.substr(2, p[1]);
  value = entry.substr(key_end + 2);
  return true;
}

float float_from_bits(std::uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

const char* kind_name(int kind) {
  switch (kind) {
    case 1: return "bytes_list";
    case 2: return "float_list";
    case 3: return "int64_list";
    default: return "empty feature";
  }
}
int kind_of(ColumnType t) {
  switch (t) {
    case ColumnType::kString: return 1;
    case ColumnType::kFloat: return 2;
    case ColumnType::kInt64: return 3;
  }
  return 0;
}

Status not_an_example(const char* what) {
  return absl::DataLossError(std::string("not a tf.train.Example (") + what + ")");
}

// Appends the values of one list message (BytesList, FloatList, Int64List:
// field 1, packed or not) to the record's vector of `type`.
bool decode_list(std::string_view list, ColumnType type, Record& record) {
  Wire w(list);
  while (!w.done()) {
    int field, wt;
    if (!w.key(field, wt)) return false;
    if (field != 1) {
      if (!w.skip(wt)) return false;
      continue;
    }
    switch (type) {
      case ColumnType::kString: {
        std::string_view s;
        if (wt != kLengthDelimited || !w.bytes(s)) return false;
        record.strings.emplace_back(s);
        break;
      }
      case ColumnType::kFloat: {
        std::uint32_t bits;
        if (wt == kFixed32) {
          if (!w.fixed32(bits)) return false;
          record.floats.push_back(float_from_bits(bits));
        } else if (wt == kLengthDelimited) {
          std::string_view packed;
          if (!w.bytes(packed) || packed.size() % 4 != 0) return false;
          const auto* p = reinterpret_cast<const unsigned char*>(packed.data());
          for (std::size_t i = 0; i < packed.size(); i += 4) record.floats.push_back(float_from_bits(load_u32(p + i)));
        } else {
          return false;
        }
        break;
      }
      case ColumnType::kInt64: {
        std::uint64_t v;
        if (wt == kVarint) {
          if (!w.varint(v)) return false;
          record.ints.push_back(static_cast<std::int64_t>(v));
        } else if (wt == kLengthDelimited) {
          std::string_view packed;
          if (!w.bytes(packed)) return false;
          Wire values(packed);
          while (!values.done()) {
            if (!values.varint(v)) return false;
            record.ints.push_back(static_cast<std::int64_t>(v));
          }
        } else {
          return false;
        }
        break;
      }
    }
  }
  return true;
}

}  // namespace

std::uint32_t mask_crc(std::uint32_t crc) { return ((crc >> 15) | (crc << 17)) + kMaskDelta; }
std::uint32_t unmask_crc(std::uint32_t masked) {
  const std::uint32_t rot = masked - kMaskDelta;
  return (rot >> 17) | (rot << 15);
}

// ---------------------------------------------------------------- framing

StatusOr<std::unique_ptr<TfRecordFileReader>> TfRecordFileReader::open(const std::string& path) {
  auto file = InputFile::open(path);
  if (!file.ok()) return file.status();
  return std::unique_ptr<TfRecordFileReader>(new TfRecordFileReader(std::move(*file)));
}

std::string TfRecordFileReader::where() const {
  return file_->path() + " record " + std::to_string(records_passed_) + " (byte " + std::to_string(record_offset_) + ")";
}

StatusOr<std::optional<std::uint64_t>> TfRecordFileReader::read_header() {
  recoverable_ = true;
  record_offset_ = file_->offset();
  auto got = file_->view(12);
  if (!got.ok()) {
    recoverable_ = false;
    return got.status();
  }
  if (got->empty()) return std::optional<std::uint64_t>();
  ++records_passed_;
  recoverable_ = false;  // every failure below leaves the framing lost
  if (got->size() < 12) return absl::DataLossError(where() + ": truncated record header");
  const auto* header = reinterpret_cast<const unsigned char*>(got->data());
  if (mask_crc(crc32c(header, 8)) != load_u32(header + 8))
    return absl::DataLossError(where() + ": corrupt record length (checksum mismatch)");
  const std::uint64_t length = load_u64(header);
  if (length > kMaxRecordBytes)
    return absl::DataLossError(where() + ": record of " + std::to_string(length) + " bytes is larger than supported");
  recoverable_ = true;
  return std::optional<std::uint64_t>(length);
}

StatusOr<bool> TfRecordFileReader::read_view(std::string_view& data) {
  auto length = read_header();
  if (!length.ok()) return length.status();
  if (!*length) return false;
  // The data and its checksum, in one piece of the buffer.
  const auto n = static_cast<std::size_t>(**length);
  auto got = file_->view(n + 4);
  if (!got.ok() || got->size() < n + 4) {
    recoverable_ = false;
    return got.ok() ? absl::DataLossError(where() + ": truncated record (the file ends inside it)") : got.status();
  }
  data = got->substr(0, n);
  if (mask_crc(crc32c(data)) != load_u32(reinterpret_cast<const unsigned char*>(got->data() + n)))
    return absl::DataLossError(where() + ": corrupt record data (checksum mismatch)");  // recoverable
  return true;
}

StatusOr<bool> TfRecordFileReader::read(std::string& data) {
  std::string_view in_place;
  auto got = read_view(in_place);
  if (got.ok() && *got) data.assign(in_place);
  return got;
}

StatusOr<bool> TfRecordFileReader::skip() {
  auto length = read_header();
  if (!length.ok()) return length.status();
  if (!*length) return false;
  auto skipped = file_->skip(**length + 4);
  if (!skipped.ok()) {
    recoverable_ = false;
    return skipped.status();
  }
  if (*skipped != **length + 4) {
    recoverable_ = false;
    return absl::DataLossError(where() + ": truncated record (the file ends inside it)");
  }
  return true;
}

StatusOr<std::unique_ptr<TfRecordWriter>> TfRecordWriter::create(const std::string& path) {
  auto out = OutputFile::create(path);
  if (!out.ok()) return out.status();
  return std::unique_ptr<TfRecordWriter>(new TfRecordWriter(std::move(*out)));
}

Status TfRecordWriter::write(std::string_view record) {
  frame_.clear();
  store_u64(frame_, record.size());
  store_u32(frame_, mask_crc(crc32c(frame_.data(), 8)));
  TWINPS_RETURN_IF_ERROR(out_->write(frame_));
  TWINPS_RETURN_IF_ERROR(out_->write(record));
  frame_.clear();
  store_u32(frame_, mask_crc(crc32c(record)));
  ++records_;
  return out_->write(frame_);
}

Status TfRecordWriter::close() { return out_->close(); }

// ---------------------------------------------------------------- tf.train.Example

void encode_example(const Schema& schema, const Record& record, std::string& out) {
  // Example { features(1): Features { feature(1): map entry { key(1), value(2): Feature } } }
  std::string features, entry, feature, list;
  for (std::size_t c = 0; c < schema.columns.size(); ++c) {
    const ColumnSpec& column = schema.columns[c];
    const Record::Span s = record.spans[c];
    list.clear();
    switch (column.type) {
      case ColumnType::kString:
        for (std::uint32_t i = s.begin; i < s.end; ++i) {
          put_key(list, 1, kLengthDelimited);
          put_varint(list, record.strings[i].size());
          list += record.strings[i];
        }
        break;
      case ColumnType::kFloat:
        if (s.end > s.begin) {
          put_key(list, 1, kLengthDelimited);
          put_varint(list, 4ull * (s.end - s.begin));
          for (std::uint32_t i = s.begin; i < s.end; ++i) {
            std::uint32_t bits;
            std::memcpy(&bits, &record.floats[i], 4);
            store_u32(list, bits);
          }
        }
        break;
      case ColumnType::kInt64:
        if (s.end > s.begin) {
          std::size_t bytes = 0;
          for (std::uint32_t i = s.begin; i < s.end; ++i) bytes += varint_size(static_cast<std::uint64_t>(record.ints[i]));
          put_key(list, 1, kLengthDelimited);
          put_varint(list, bytes);
          for (std::uint32_t i = s.begin; i < s.end; ++i) put_varint(list, static_cast<std::uint64_t>(record.ints[i]));
        }
        break;
    }
    feature.clear();
    put_key(feature, kind_of(column.type), kLengthDelimited);
    put_varint(feature, list.size());
    feature += list;
    entry.clear();
    put_key(entry, 1, kLengthDelimited);
    put_varint(entry, column.name.size());
    entry += column.name;
    put_key(entry, 2, kLengthDelimited);
    put_varint(entry, feature.size());
    entry += feature;
    put_key(features, 1, kLengthDelimited);
    put_varint(features, entry.size());
    features += entry;
  }
  out.clear();
  put_key(out, 1, kLengthDelimited);
  put_varint(out, features.size());
  out += features;
}

namespace {
std::vector<std::string> column_names(const Schema& schema) {
  std::vector<std::string> names;
  for (const ColumnSpec& c : schema.columns) names.push_back(c.name);
  return names;
}
}  // namespace

ExampleDecoder::ExampleDecoder(const Schema& schema) : schema_(schema), column_of_(column_names(schema)) {}

Status ExampleDecoder::decode(std::string_view bytes, Record& record) const {
  record.clear(schema_.columns.size());
  std::vector<int>& kinds = kinds_;
  kinds.assign(schema_.columns.size(), -1);  // -1: not seen
  std::size_t position = 0;  // of the feature in the record, for column_of_
  Wire example(bytes);
  while (!example.done()) {
    int field, wt;
    if (!example.key(field, wt)) return not_an_example("bad field key");
    if (field != 1 || wt != kLengthDelimited) {
      if (!example.skip(wt)) return not_an_example("bad field");
      continue;
    }
    std::string_view features_bytes;
    if (!example.bytes(features_bytes)) return not_an_example("features overrun the record");
    Wire features(features_bytes);
    while (!features.done()) {
      if (!features.key(field, wt)) return not_an_example("bad field key in features");
      if (field != 1 || wt != kLengthDelimited) {
        if (!features.skip(wt)) return not_an_example("bad field in features");
        continue;
      }
      std::string_view entry_bytes, key, value;
      if (!features.bytes(entry_bytes)) return not_an_example("a feature overruns the record");
      if (!split_short_entry(entry_bytes, key, value)) {
        Wire entry(entry_bytes);
        while (!entry.done()) {
          if (!entry.key(field, wt)) return not_an_example("bad feature entry");
          if (field == 1 && wt == kLengthDelimited) {
            if (!entry.bytes(key)) return not_an_example("bad feature name");
          } else if (field == 2 && wt == kLengthDelimited) {
            if (!entry.bytes(value)) return not_an_example("bad feature value");
          } else if (!entry.skip(wt)) {
            return not_an_example("bad feature entry");
          }
        }
      }
      const std::size_t c = column_of_.find(key, position++);
      if (c == ColumnIndex::kNotAColumn) continue;  // a feature the schema does not read
      const ColumnSpec& column = schema_.columns[c];
      // Feature: oneof bytes_list(1) / float_list(2) / int64_list(3); the last one set wins.
      int kind = 0;
      std::string_view list;
      Wire feature(value);
      while (!feature.done()) {
        if (!feature.key(field, wt)) return not_an_example("bad feature");
        if (field >= 1 && field <= 3 && wt == kLengthDelimited) {
          if (!feature.bytes(list)) return not_an_example("bad feature list");
          kind = field;
        } else if (!feature.skip(wt)) {
          return not_an_example("bad feature");
        }
      }
      if (kind != 0 && kind != kind_of(column.type))
        return absl::InvalidArgumentError("feature \"" + column.name + "\" is a " + kind_name(kind) +
                                          ", the schema wants " + column_type_name(column.type) + " (" +
                                          kind_name(kind_of(column.type)) + ")");
      // A repeated map key: the last entry wins, as in protobuf.
      std::uint32_t begin = 0;
      switch (column.type) {
        case ColumnType::kFloat: begin = static_cast<std::uint32_t>(record.floats.size()); break;
        case ColumnType::kInt64: begin = static_cast<std::uint32_t>(record.ints.size()); break;
        case ColumnType::kString: begin = static_cast<std::uint32_t>(record.strings.size()); break;
      }
      if (!decode_list(list, column.type, record)) return not_an_example("bad value list");
      std::uint32_t end = 0;
      switch (column.type) {
        case ColumnType::kFloat: end = static_cast<std::uint32_t>(record.floats.size()); break;
        case ColumnType::kInt64: end = static_cast<std::uint32_t>(record.ints.size()); break;
        case ColumnType::kString: end = static_cast<std::uint32_t>(record.strings.size()); break;
      }
      record.spans[c] = {begin, end};
      kinds[c] = kind;
    }
  }
  for (std::size_t c = 0; c < schema_.columns.size(); ++c) {
    const ColumnSpec& column = schema_.columns[c];
    if (kinds[c] < 0) return absl::InvalidArgumentError("feature \"" + column.name + "\" is missing");
    if (column.width != 0 && record.values(c) != static_cast<std::size_t>(column.width))
      return absl::InvalidArgumentError(width_mismatch(column, record.values(c)));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------- reader

StatusOr<std::unique_ptr<TfRecordReader>> TfRecordReader::open(const std::string& path, std::int32_t file_index,
                                                               const Schema& schema) {
  auto file = TfRecordFileReader::open(path);
  if (!file.ok()) return file.status();
  return std::unique_ptr<TfRecordReader>(new TfRecordReader(std::move(*file), file_index, schema));
}

StatusOr<bool> TfRecordReader::next(Record& record) {
  std::string_view data;
  auto got = file_->read_view(data);
  records_passed_ = file_->records_passed();
  recoverable_ = file_->recoverable();
  if (!got.ok() || !*got) return got;
  Status decoded = decoder_.decode(data, record);
  record.origin = RecordOrigin{file_index_, records_passed_, 0};
  if (!decoded.ok()) return Status(decoded.code(), file_->where() + ": " + std::string(decoded.message()));
  return true;
}

StatusOr<std::int64_t> TfRecordReader::skip(std::int64_t n) {
  std::int64_t done = 0;
  while (done < n) {
    auto got = file_->skip();
    records_passed_ = file_->records_passed();
    recoverable_ = file_->recoverable();
    if (!got.ok()) return got.status();
    if (!*got) break;
    ++done;
  }
  return done;
}

}  // namespace twinps::data
