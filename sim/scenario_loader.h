#pragma once
// Reading a scenario file: Protobuf text format against sim/scenario.proto,
// then semantic checks. Every problem is reported with the file, the
// line:column where there is one (1-based), and the field path
// ("fault[1].kill_worker"), never by crashing: a missing file, a directory, a
// device, binary garbage, an unknown field, an unknown variable, a worker
// index out of range, a negative time ...
#include <string>
#include <string_view>
#include <vector>

#include "scenario.pb.h"  // generated from sim/scenario.proto

namespace twinps::sim {

struct ScenarioError {
  std::string file;
  int line = 0;    // 1-based; 0 when there is no position (the file itself)
  int column = 0;  // 1-based
  std::string field;  // "fault[1].kill_worker", or empty
  std::string message;
  // "file:line:column: field: message"
  std::string to_string() const;
};

struct LoadedScenario {
  scenario::Scenario scenario;
  std::vector<ScenarioError> errors;  // empty: parsed and valid
  bool ok() const { return errors.empty(); }
};

LoadedScenario load_scenario_file(const std::string& path);
// `file` names the text in errors.
LoadedScenario parse_scenario(std::string_view text, const std::string& file);
// A synthetic model alone (scenario.SyntheticModel in text format: its
// `variable`s, `batch_size` ...), for `twinps serve --model` and `twinps
// tune`. Checked as a scenario's `model` is; errors name fields from the
// model down ("variable[1].shape[0]"), at their line:column in the file.
struct LoadedModel {
  scenario::SyntheticModel model;
  std::vector<ScenarioError> errors;
  bool ok() const { return errors.empty(); }
};
LoadedModel load_model_file(const std::string& path);
LoadedModel parse_model(std::string_view text, const std::string& file);

// The semantic checks alone (for scenarios built in code, e.g. the swarm).
std::vector<ScenarioError> validate_scenario(const scenario::Scenario& s, const std::string& file);

}  // namespace twinps::sim
