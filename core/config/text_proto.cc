#include "core/config/text_proto.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

#include <google/protobuf/io/tokenizer.h>

namespace twinps::config {

namespace pb = google::protobuf;

std::string TextProtoError::to_string() const {
  std::string out = file;
  if (line > 0) out += ":" + std::to_string(line) + ":" + std::to_string(column);
  out += ": ";
  if (!field.empty()) out += field + ": ";
  return out + message;
}

std::string printable(std::string_view text) {
  std::string out;
  for (unsigned char c : text) {
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  return out;
}

namespace {

class Collector final : public pb::io::ErrorCollector {
 public:
  Collector(std::string file, std::vector<TextProtoError>& out) : file_(std::move(file)), out_(out) {}
  void AddError(int line, pb::io::ColumnNumber column, const std::string& message) override {
    // The parser quotes what it found; from a binary file that is raw bytes,
    // which must not reach the terminal as they are.
    out_.push_back(TextProtoError{file_, line + 1, column + 1, "", printable(message)});
  }

 private:
  std::string file_;
  std::vector<TextProtoError>& out_;
};

}  // namespace

std::optional<std::string> read_text_file(const std::string& path, const char* what,
                                          std::vector<TextProtoError>& errors) {
  auto fail = [&](const std::string& message) {
    errors.push_back(TextProtoError{path, 0, 0, "", message});
    return std::nullopt;
  };
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return fail(std::string("cannot read the ") + what + ": " + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) return fail(std::string("is a directory, not a ") + what + " file");
  if (!S_ISREG(st.st_mode)) return fail("is not a regular file");
  if (static_cast<std::size_t>(st.st_size) > kMaxTextFileBytes)
    return fail("is " + std::to_string(st.st_size) + " bytes; a " + what + " file is at most " +
                std::to_string(kMaxTextFileBytes) + " bytes");
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(std::string("cannot open the ") + what + ": " + std::strerror(errno));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return fail("reading failed");
  // The text format has no use for NUL bytes; refuse binary data up front
  // with a position rather than a tokenizer message about control characters.
  if (auto nul = text.find('\0'); nul != std::string::npos) {
    int line = 1, col = 1;
    for (std::size_t i = 0; i < nul; ++i) {
      if (text[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    errors.push_back(
        TextProtoError{path, line, col, "", std::string("binary data (a NUL byte): not a text-format ") + what});
    return std::nullopt;
  }
  return text;
}

bool parse_text_proto(std::string_view text, const std::string& file, const char* what, pb::Message& message,
                      pb::TextFormat::ParseInfoTree& tree, std::vector<TextProtoError>& errors) {
  Collector collector(file, errors);
  pb::TextFormat::Parser parser;
  parser.RecordErrorsTo(&collector);
  parser.WriteLocationsTo(&tree);
  if (parser.ParseFromString(std::string(text), &message)) return true;
  if (errors.empty())
    errors.push_back(TextProtoError{file, 0, 0, "", std::string("not a ") + what + " in Protobuf text format"});
  return false;
}

FieldPath FieldPath::operator()(const pb::Message& parent, const char* field, int index) const {
  FieldPath p = *this;
  const pb::FieldDescriptor* f = parent.GetDescriptor()->FindFieldByName(field);
  if (f == nullptr) std::abort();  // a typo in the caller, not in the user's file
  p.steps.emplace_back(f, f->is_repeated() ? std::max(index, 0) : -1);
  return p;
}

std::string FieldPath::str() const {
  std::string s;
  for (const auto& [f, i] : steps) {
    if (!s.empty()) s += ".";
    s += f->name();
    if (i >= 0) s += "[" + std::to_string(i) + "]";
  }
  return s;
}

TextProtoError error_at(const std::string& file, const pb::TextFormat::ParseInfoTree* tree, const FieldPath& path,
                        std::string message) {
  TextProtoError e{file, 0, 0, path.str(), std::move(message)};
  for (std::size_t i = 0; tree != nullptr && i < path.steps.size(); ++i) {
    const auto [field, index] = path.steps[i];
    const auto loc = tree->GetLocation(field, index);
    if (loc.line < 0) break;
    e.line = loc.line + 1;
    e.column = loc.column + 1;
    if (i + 1 < path.steps.size() && field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE)
      tree = tree->GetTreeForNested(field, index);
    else
      break;
  }
  return e;
}

}  // namespace twinps::config
