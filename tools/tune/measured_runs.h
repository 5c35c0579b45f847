#pragma once
// The real runs of `twinps tune --validate`, kept apart from their
// predictions so that a measurement can be saved (--save-runs) and
// predicted again later (--runs): with another cost profile, or another
// build of the simulator, on the very same measured steps/s. The file is
// scenario.MeasuredRuns (sim/scenario.proto) in text format.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/config/text_proto.h"
#include "core/runtime/status.h"
#include "scenario.pb.h"  // generated from sim/scenario.proto
#include "sim/tuner.h"
#include "tools/tune/real_run.h"

namespace twinps::cli {

// One configuration of the validation grid.
struct GridConfig {
  int model = 0;  // index into the grid's model names
  int workers = 1, ps = 1;
  sim::PartitionerKind kind = sim::PartitionerKind::kFixed;
  int shards = 1;
  int straggler = 0;  // worker 0 computes this many times over; 0: none
  int batch = 0;      // 0: the model's
};

// A real run and the machine's speed probed just before and just after it.
struct MeasuredRun {
  RealRunResult result;
  scenario::MachineSpeed before, after;
};

// A configuration, the model it ran (partitioner and batch applied) and
// its rounds, in the order they ran.
struct GridRun {
  GridConfig config;
  scenario::SyntheticModel model;
  std::vector<MeasuredRun> rounds;
  // A model spec's configuration: the spec compiled with the configuration's
  // partitioner and batch, and its data, which the real runs train (`model`
  // is the synthetic model that times it). Not saved: a saved run is
  // predicted from `model` alone.
  std::shared_ptr<const model::CompiledModel> spec;
  std::optional<training::DataSource> spec_data;
};

// Everything a validation measured: what the predictions are made for.
struct Measurement {
  std::string data_plane;
  int online_cores = 1;
  std::string measured_on;
  std::vector<std::string> model_names;  // GridConfig::model indexes these
  std::vector<GridRun> runs;
};

// Writes `m` to `path` (text format). An error names the file.
Status save_measurement(const Measurement& m, const std::string& path);

// Reads a file save_measurement wrote. Every problem names the file, the
// line:column and the field ("config[2].round[0].steps_per_second").
struct LoadedMeasurement {
  Measurement measurement;
  std::vector<config::TextProtoError> errors;
  bool ok() const { return errors.empty(); }
};
LoadedMeasurement load_measurement(const std::string& path);
LoadedMeasurement parse_measurement(std::string_view text, const std::string& file);

}  // namespace twinps::cli
