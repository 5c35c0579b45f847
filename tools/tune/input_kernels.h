#pragma once
// calibrate's prices of a train step's input pipeline, the work a worker
// does before its layers: reading a batch of records ("read/<format>",
// data::RecordIteratorResource::read_kernel) and mapping them through the
// model's input layer ("features/dense", "features/categorical",
// model::ModelGraph::train_kernels). Each is timed on the trainer's own
// code: files of every format written into a scratch directory and read
// through the same data source `twinps train` builds, with its shuffle
// buffer, and the batches mapped by the same FeatureMapper.
#include <string>

#include "scenario.pb.h"  // generated from sim/scenario.proto
#include "tools/tune/calibration.h"

namespace twinps::cli {

// Adds the kinds' prices to the profile's compute prices and a table per
// kind to `report`. Its scratch files go under `o.work_dir` (else the
// system's temporary directory) and are removed after.
Status measure_input_kernels(const CalibrationOptions& o, scenario::CostProfile& p, std::string* report);

}  // namespace twinps::cli
