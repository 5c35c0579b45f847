#pragma once
// Reading a model spec: Protobuf text format against core/model/model_spec.proto,
// vocabulary files resolved, then semantic checks (the graph, widths, the
// head against the label, optimizer groups ...). Every problem is reported
// with the file, the line:column where there is one and the field path
// ("layer[2].input[0]"), never by crashing; tools print them and exit 2.
#include <string>
#include <string_view>
#include <vector>

#include "core/config/text_proto.h"
#include "model/model_spec.pb.h"  // generated from core/model/model_spec.proto

namespace twinps::model {

using SpecError = config::TextProtoError;

struct LoadedSpec {
  // Vocabulary files are read (relative to the spec file's directory) and
  // their tokens put inline as `vocabulary`, so the spec stands on its own.
  spec::ModelSpec spec;
  std::vector<SpecError> errors;  // empty: parsed and valid
  bool ok() const { return errors.empty(); }
  // "file:line:column: field: message" lines, for Status messages.
  std::string error_text() const;
};

LoadedSpec load_model_spec_file(const std::string& path);
// `file` names the text in errors; vocabulary files are relative to its directory.
LoadedSpec parse_model_spec(std::string_view text, const std::string& file);

// The semantic checks alone, for specs built in code (no positions).
std::vector<SpecError> validate_model_spec(const spec::ModelSpec& spec, const std::string& file);

}  // namespace twinps::model
