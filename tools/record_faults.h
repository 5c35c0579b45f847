#pragma once
// `--record-faults FILE` (twinps train, twinps sim --real): a real run
// written as a scenario the simulator replays (sim/fault_recorder.h). This
// file holds the tools' side: checking the path before a run, writing the
// file after it, and a launcher run's outcome read from its result.
#include <string>

#include "core/runtime/status.h"
#include "scenario.pb.h"  // generated from sim/scenario.proto
#include "sim/fault_recorder.h"
#include "sim/simulation.h"

namespace twinps::cli {

// INVALID_ARGUMENT naming --record-faults when `path` cannot be written (a
// directory, a missing parent directory); creates nothing.
Status check_record_path(const std::string& path);

// Writes the recorded scenario (with its header) to `path`; prints what was
// observed and how to replay it.
Status write_recording(const std::string& path, const sim::FaultRecorder& recorder,
                       const scenario::Scenario& recorded, const std::string& how);

// A `twinps sim --real` run's outcome for the recorder, and the closures
// whose run is not one step (looping or with extra compute), which the
// recorder leaves out of the measured step time.
sim::RecordedOutcome launcher_outcome(const scenario::Scenario& s, const sim::SimResult& result,
                                      sim::FaultRecorder& recorder);

}  // namespace twinps::cli
