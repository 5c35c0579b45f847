#include "core/data/csv_reader.h"

#include <algorithm>
#include <map>

#include "core/data/text_values.h"

namespace twinps::data {
namespace {

// A record longer than this is taken for a quote left open, not for data.
constexpr std::size_t kMaxRecordBytes = 64u << 20;

StatusOr<char> single_char(const std::string& value, const char* what) {
  if (value.size() != 1) return absl::InvalidArgumentError(std::string("CSV ") + what + " must be one character, not \"" + value + "\"");
  return value[0];
}

}  // namespace

StatusOr<std::unique_ptr<CsvReader>> CsvReader::open(const std::string& path, std::int32_t file_index,
                                                     const Schema& schema, const CsvOptions& options) {
  auto delimiter = single_char(options.delimiter(), "delimiter");
  if (!delimiter.ok()) return delimiter.status();
  auto separator = single_char(options.list_separator(), "list_separator");
  if (!separator.ok()) return separator.status();
  if (*separator == *delimiter)
    return absl::InvalidArgumentError("the CSV list separator must differ from the delimiter");
  auto file = InputFile::open(path);
  if (!file.ok()) return file.status();
  auto reader = std::unique_ptr<CsvReader>(new CsvReader(std::move(*file), file_index, schema, *delimiter, *separator));
  TWINPS_RETURN_IF_ERROR(reader->resolve_header(path));
  return reader;
}

Status CsvReader::resolve_header(const std::string& path) {
  auto got = read_record_text();
  if (!got.ok()) return got.status();
  if (!*got) return absl::InvalidArgumentError(path + ": empty file, expected a header line");
  TWINPS_RETURN_IF_ERROR(split_fields());
  std::map<std::string, std::size_t, std::less<>> position;
  for (std::size_t i = 0; i < fields_.size(); ++i) {
    std::string name(trim_blanks(field(i)));
    if (!position.emplace(name, i).second)
      return absl::InvalidArgumentError(path + ":" + std::to_string(record_line_) + ": the header names column \"" +
                                        name + "\" twice");
    header_.push_back(std::move(name));
  }
  for (const ColumnSpec& column : schema_.columns) {
    Source source;
    if (auto it = position.find(column.name); it != position.end()) {
      source.fields.push_back(it->second);
    } else if (column.width > 1) {
      for (int k = 0; k < column.width; ++k) {
        auto part = position.find(column.name + "_" + std::to_string(k));
        if (part == position.end()) {
          return absl::InvalidArgumentError(path + ": column \"" + column.name + "\" is not in the header (looked for \"" +
                                            column.name + "\" and \"" + column.name + "_0\" ... \"" + column.name +
                                            "_" + std::to_string(column.width - 1) + "\")");
        }
        source.fields.push_back(part->second);
      }
    } else {
      return absl::InvalidArgumentError(path + ": column \"" + column.name + "\" is not in the header");
    }
    sources_.push_back(std::move(source));
  }
  return absl::OkStatus();
}

std::string CsvReader::where() const {
  return file_->path() + ":" + std::to_string(record_line_) + " (record " + std::to_string(records_passed_) + ")";
}

StatusOr<bool> CsvReader::read_record_text() {
  record_text_.clear();
  // Skip blank lines before the record.
  for (;;) {
    auto got = file_->read_line(line_);
    if (!got.ok()) {
      recoverable_ = false;
      return got.status();
    }
    if (!*got) return false;
    ++lines_read_;
    if (!trim_blanks(line_).empty()) break;
  }
  record_line_ = lines_read_;
  record_text_ = line_;
  // A quoted field is open while the count of quotes is odd ("" escapes add two).
  auto quotes = std::count(record_text_.begin(), record_text_.end(), '"');
  while (quotes % 2 != 0) {
    auto got = file_->read_line(line_);
    if (!got.ok()) {
      recoverable_ = false;
      return got.status();
    }
    if (!*got || record_text_.size() > kMaxRecordBytes) {
      recoverable_ = false;
      return absl::DataLossError(file_->path() + ":" + std::to_string(record_line_) +
                                 ": a quoted field opened on this line is never closed");
    }
    ++lines_read_;
    record_text_ += '\n';
    record_text_ += line_;
    quotes += std::count(line_.begin(), line_.end(), '"');
  }
  return true;
}

Status CsvReader::split_fields() {
  fields_.clear();
  field_text_.clear();
  const std::string& t = record_text_;
  std::size_t i = 0;
  for (;;) {
    const std::size_t start = field_text_.size();
    if (i < t.size() && t[i] == '"') {
      ++i;
      for (;;) {
        if (i >= t.size()) return absl::InvalidArgumentError(where() + ": unterminated quoted field");
        if (t[i] == '"') {
          if (i + 1 < t.size() && t[i + 1] == '"') {
            field_text_ += '"';
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        field_text_ += t[i++];
      }
      if (i < t.size() && t[i] != delimiter_)
        return absl::InvalidArgumentError(where() + ": field " + std::to_string(fields_.size() + 1) +
                                          ": text after the closing quote");
    } else {
      const std::size_t end = std::min(t.find(delimiter_, i), t.size());
      field_text_.append(t, i, end - i);
      i = end;
    }
    fields_.emplace_back(start, field_text_.size());
    if (i >= t.size()) break;
    ++i;  // the delimiter; a trailing one starts an empty last field
  }
  return absl::OkStatus();
}

StatusOr<bool> CsvReader::next(Record& record) {
  recoverable_ = true;
  auto got = read_record_text();
  if (!got.ok() || !*got) return got;
  ++records_passed_;
  record.clear(schema_.columns.size());
  record.origin = RecordOrigin{file_index_, records_passed_, record_line_};
  TWINPS_RETURN_IF_ERROR(split_fields());
  if (fields_.size() != header_.size())
    return absl::InvalidArgumentError(where() + ": " + std::to_string(fields_.size()) + " fields, the header has " +
                                      std::to_string(header_.size()));
  TWINPS_RETURN_IF_ERROR(convert(record));
  return true;
}

Status CsvReader::convert(Record& record) {
  std::vector<std::string_view> tokens;
  for (std::size_t c = 0; c < schema_.columns.size(); ++c) {
    const ColumnSpec& column = schema_.columns[c];
    const Source& source = sources_[c];
    // The column's tokens: one per field, or the list inside its one field.
    tokens.clear();
    if (source.fields.size() > 1 || column.width == 1) {
      for (std::size_t f : source.fields) tokens.push_back(field(f));
    } else {
      std::string_view text = field(source.fields[0]);
      std::size_t pos = 0;
      while (pos <= text.size()) {
        std::size_t end = std::min(text.find(list_separator_, pos), text.size());
        std::string_view token = text.substr(pos, end - pos);
        if (!trim_blanks(token).empty()) tokens.push_back(token);
        pos = end + 1;
      }
    }
    const std::string column_where = where() + ": column \"" + column.name + "\"";
    if (column.width == 1 && column.type != ColumnType::kString && trim_blanks(tokens[0]).empty())
      return absl::InvalidArgumentError(column_where + ": empty value");
    if (column.width != 0 && tokens.size() != static_cast<std::size_t>(column.width))
      return absl::InvalidArgumentError(where() + ": " + width_mismatch(column, tokens.size()));
    switch (column.type) {
      case ColumnType::kFloat: {
        const auto begin = static_cast<std::uint32_t>(record.floats.size());
        for (std::string_view token : tokens) {
          float v;
          if (!parse_float(token, v))
            return absl::InvalidArgumentError(column_where + ": " + quote_token(token) + " is not a float");
          record.floats.push_back(v);
        }
        record.spans[c] = {begin, static_cast<std::uint32_t>(record.floats.size())};
        break;
      }
      case ColumnType::kInt64: {
        const auto begin = static_cast<std::uint32_t>(record.ints.size());
        for (std::string_view token : tokens) {
          std::int64_t v;
          if (!parse_int64(token, v))
            return absl::InvalidArgumentError(column_where + ": " + quote_token(token) + " is not an int64");
          record.ints.push_back(v);
        }
        record.spans[c] = {begin, static_cast<std::uint32_t>(record.ints.size())};
        break;
      }
      case ColumnType::kString: {
        const auto begin = static_cast<std::uint32_t>(record.strings.size());
        for (std::string_view token : tokens) record.strings.emplace_back(token);
        record.spans[c] = {begin, static_cast<std::uint32_t>(record.strings.size())};
        break;
      }
    }
  }
  return absl::OkStatus();
}

StatusOr<std::int64_t> CsvReader::skip(std::int64_t n) {
  std::int64_t done = 0;
  while (done < n) {
    auto got = read_record_text();
    if (!got.ok()) return got.status();
    if (!*got) break;
    ++records_passed_;
    ++done;
  }
  return done;
}

}  // namespace twinps::data
