#pragma once
// Reading a scenario file: Protobuf text format against sim/scenario.proto,
// then semantic checks. Every problem is reported with the file, the
// line:column where there is one (1-based), and the field path
// ("fault[1].kill_worker"), never by crashing: a missing file, a directory, a
// device, binary garbage, an unknown field, an unknown variable, a worker
// index out of range, a negative time ...
//
// A scenario's `cost_profile` is read (relative to the scenario file's
// directory) and merged in before the checks; its errors name the profile
// file, or the scenario's `cost_profile` field when the file cannot be read.
#include <string>
#include <string_view>
#include <vector>

#include "core/config/text_proto.h"
#include "scenario.pb.h"  // generated from sim/scenario.proto

namespace twinps::sim {

// file:line:column, field and message (core/config/text_proto.h).
using ScenarioError = config::TextProtoError;

struct LoadedScenario {
  scenario::Scenario scenario;
  std::vector<ScenarioError> errors;  // empty: parsed and valid
  bool ok() const { return errors.empty(); }
};

// A scenario's `model_spec` is read (relative to the scenario file's
// directory) and checked, its path left resolved in the scenario; with
// TIMING_ONLY fidelity the spec becomes the synthetic `model` that times it
// (sim/spec_workload.h). `model_spec` (`twinps sim --model`, relative to the
// working directory) replaces the scenario's workload with that spec.
LoadedScenario load_scenario_file(const std::string& path, const std::string& model_spec = "");
// `file` names the text in errors.
LoadedScenario parse_scenario(std::string_view text, const std::string& file, const std::string& model_spec = "");
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

// A cost profile (scenario.CostProfile in text format, as `twinps calibrate`
// writes it), for a scenario's `cost_profile` and `twinps tune --profile`. Its
// network, compute and ps_service are checked as a scenario's are; per-task
// settings (host_link, straggler) belong in a scenario and are refused.
// Errors name fields from the profile down ("compute.per_gflop_s").
struct LoadedProfile {
  scenario::CostProfile profile;
  std::vector<ScenarioError> errors;
  bool ok() const { return errors.empty(); }
};
LoadedProfile load_profile_file(const std::string& path);
LoadedProfile parse_profile(std::string_view text, const std::string& file);

// The planes a profile's `data_plane` may name: `twinps serve --data-plane`'s
// values (tools/data_plane_flag.h).
inline constexpr char kDataPlaneNames[] = "tcp, tcp-unix, tcp-only, grpc or tcp-all";
inline bool known_data_plane(std::string_view plane) {
  return plane == "tcp" || plane == "tcp-unix" || plane == "tcp-only" || plane == "grpc" || plane == "tcp-all";
}

// Fills what `s` leaves unset of network, compute and ps_service from
// `profile`, field by field: whatever the scenario sets wins.
// load_scenario_file() does this for a scenario's `cost_profile`.
void apply_profile(const scenario::CostProfile& profile, scenario::Scenario& s);

// The semantic checks alone (for scenarios built in code, e.g. the swarm).
std::vector<ScenarioError> validate_scenario(const scenario::Scenario& s, const std::string& file);

}  // namespace twinps::sim
