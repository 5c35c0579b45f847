#pragma once
// Reading user-written Protobuf text files (scenarios, cost profiles, model
// specs) with errors a user can act on: every problem names the file, the
// line:column where there is one (1-based) and the field path
// ("layer[2].dense.units"), and nothing crashes on a missing file, a
// directory, a device, binary garbage or an oversized file.
//
// The loaders (sim/scenario_loader.h, core/model/spec_loader.h) share this:
// read_text_file() and parse_text_proto() for the syntax, FieldPath and
// locate() to report a semantic problem at the field's own position.
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <google/protobuf/message.h>
#include <google/protobuf/text_format.h>

namespace twinps::config {

struct TextProtoError {
  std::string file;
  int line = 0;    // 1-based; 0 when there is no position (the file itself)
  int column = 0;  // 1-based
  std::string field;  // "fault[1].kill_worker", or empty
  std::string message;
  // "file:line:column: field: message"
  std::string to_string() const;
};

// Text files larger than this are refused: a config is never this big, and a
// mistaken path (a data file) should fail at once rather than be parsed.
inline constexpr std::size_t kMaxTextFileBytes = 16 << 20;

// The text of `path`, or nullopt with the reason in `errors`. `what` ("model
// spec") names the kind of file in messages. A NUL byte (binary data) is
// refused with its line:column.
std::optional<std::string> read_text_file(const std::string& path, const char* what,
                                          std::vector<TextProtoError>& errors);

// Parses `text` into `message`, recording field positions in `tree` and
// syntax errors (unknown fields, bad values, with line:column) in `errors`.
// `file` names the text in errors.
bool parse_text_proto(std::string_view text, const std::string& file, const char* what,
                      google::protobuf::Message& message, google::protobuf::TextFormat::ParseInfoTree& tree,
                      std::vector<TextProtoError>& errors);

// A field inside a message: (field, index) steps from the root, index -1 for
// a singular field. Built as root(msg, "layer", 2)(layer, "dense")(dense, "units").
struct FieldPath {
  std::vector<std::pair<const google::protobuf::FieldDescriptor*, int>> steps;

  // The path to `field` of `parent` (element `index` if repeated). A field
  // name the message does not have is a bug in the caller: it aborts.
  FieldPath operator()(const google::protobuf::Message& parent, const char* field, int index = -1) const;
  // "layer[2].dense.units"
  std::string str() const;
};

// An error at `path`: positioned at the field's line:column in `tree`, or at
// its closest ancestor that has one (a field left unset has no position of
// its own). `tree` may be null (a message built in code): no position.
TextProtoError error_at(const std::string& file, const google::protobuf::TextFormat::ParseInfoTree* tree,
                        const FieldPath& path, std::string message);

// Bytes made printable for a terminal: anything outside ASCII 0x20..0x7e as \xNN.
std::string printable(std::string_view text);

}  // namespace twinps::config
