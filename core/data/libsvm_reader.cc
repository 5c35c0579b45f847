#include "core/data/libsvm_reader.h"

#include "core/data/text_values.h"

namespace twinps::data {
namespace {

constexpr std::size_t kLabel = 0, kQid = 1;

// The next blank-separated token of `s`, removed from it; empty at the end.
std::string_view next_token(std::string_view& s) {
  std::size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  std::size_t j = i;
  while (j < s.size() && s[j] != ' ' && s[j] != '\t') ++j;
  std::string_view token = s.substr(i, j - i);
  s.remove_prefix(j);
  return token;
}

}  // namespace

Schema libsvm_schema(const LibSvmOptions& options) {
  Schema s;
  s.columns.push_back({options.label_column(), ColumnType::kFloat, 1});
  if (!options.qid_column().empty()) s.columns.push_back({options.qid_column(), ColumnType::kInt64, 1});
  s.columns.push_back({options.indices_column(), ColumnType::kInt64, 0});
  s.columns.push_back({options.values_column(), ColumnType::kFloat, 0});
  return s;
}

LibSvmReader::LibSvmReader(std::unique_ptr<InputFile> file, std::int32_t file_index, const LibSvmOptions& options)
    : file_(std::move(file)),
      file_index_(file_index),
      schema_(libsvm_schema(options)),
      keep_qid_(!options.qid_column().empty()) {}

StatusOr<std::unique_ptr<LibSvmReader>> LibSvmReader::open(const std::string& path, std::int32_t file_index,
                                                           const LibSvmOptions& options) {
  auto file = InputFile::open(path);
  if (!file.ok()) return file.status();
  return std::unique_ptr<LibSvmReader>(new LibSvmReader(std::move(*file), file_index, options));
}

std::string LibSvmReader::where() const {
  return file_->path() + ":" + std::to_string(lines_read_) + " (record " + std::to_string(records_passed_) + ")";
}

StatusOr<bool> LibSvmReader::next_record_line() {
  for (;;) {
    auto got = file_->read_line(line_);
    if (!got.ok()) {
      recoverable_ = false;
      return got.status();
    }
    if (!*got) return false;
    ++lines_read_;
    std::string_view content = line_;
    if (auto hash = content.find('#'); hash != std::string_view::npos) content = content.substr(0, hash);
    content = trim_blanks(content);
    if (!content.empty()) {
      content_ = content;
      return true;
    }
  }
}

StatusOr<bool> LibSvmReader::next(Record& record) {
  recoverable_ = true;
  auto got = next_record_line();
  if (!got.ok() || !*got) return got;
  ++records_passed_;
  record.clear(schema_.columns.size());
  record.origin = RecordOrigin{file_index_, records_passed_, lines_read_};
  std::string_view rest = content_;

  const std::string_view label = next_token(rest);
  float y;
  if (!parse_float(label, y)) return absl::InvalidArgumentError(where() + ": label " + quote_token(label) + " is not a number");
  record.floats.push_back(y);
  record.spans[kLabel] = {0, 1};

  const std::size_t indices_column = keep_qid_ ? 2 : 1, values_column = indices_column + 1;
  std::int64_t qid = 0;
  const auto values_begin = static_cast<std::uint32_t>(record.floats.size());
  // With a qid column, ints[0] is the qid and the indices follow it.
  if (keep_qid_) record.ints.push_back(0);
  const auto indices_begin = static_cast<std::uint32_t>(record.ints.size());
  bool first_feature = true;
  for (std::string_view token = next_token(rest); !token.empty(); token = next_token(rest)) {
    const std::size_t colon = token.find(':');
    if (colon == std::string_view::npos)
      return absl::InvalidArgumentError(where() + ": " + quote_token(token) + " is not index:value");
    const std::string_view key = token.substr(0, colon), value = token.substr(colon + 1);
    if (key == "qid") {
      if (!first_feature) return absl::InvalidArgumentError(where() + ": qid must come before the features");
      if (!parse_int64(value, qid)) return absl::InvalidArgumentError(where() + ": qid " + quote_token(value) + " is not an integer");
      continue;
    }
    first_feature = false;
    std::int64_t index;
    float v;
    if (!parse_int64(key, index) || index < 0)
      return absl::InvalidArgumentError(where() + ": feature index " + quote_token(key) + " is not a non-negative integer");
    if (!parse_float(value, v))
      return absl::InvalidArgumentError(where() + ": value " + quote_token(value) + " of feature " + std::string(key) +
                                        " is not a number");
    record.ints.push_back(index);
    record.floats.push_back(v);
  }
  if (keep_qid_) {
    record.ints[0] = qid;
    record.spans[kQid] = {0, 1};
  }
  record.spans[indices_column] = {indices_begin, static_cast<std::uint32_t>(record.ints.size())};
  record.spans[values_column] = {values_begin, static_cast<std::uint32_t>(record.floats.size())};
  return true;
}

StatusOr<std::int64_t> LibSvmReader::skip(std::int64_t n) {
  std::int64_t done = 0;
  while (done < n) {
    auto got = next_record_line();
    if (!got.ok()) return got.status();
    if (!*got) break;
    ++records_passed_;
    ++done;
  }
  return done;
}

}  // namespace twinps::data
