#pragma once
// The JSON a training run's report is made of, written once for every way a
// model spec is trained: `twinps train --report` (in memory, in process, on
// a TF_CONFIG cluster) and `twinps sim --report` (simulated, or on real
// processes with --real). Notebooks and tests read these fields by name:
//
//   epochs[]   {epoch, iterations, time (s), examples_per_second,
//               steps_per_second, examples, loss, accuracy?, auc?, eval?{...}}
//   staleness  {gradients, max, mean, unmeasured, dropped, counts[], bounds[]}
//              (counts[i]: gradients with staleness <= bounds[i] and above
//              bounds[i-1]; the last count: above the last bound)
//   stats      the coordinator's counters (closures, failures, sync steps ...)
#include <cstdint>

#include <nlohmann/json.hpp>

#include "core/coordinator/cluster_coordinator.h"
#include "core/model/compiled_model.h"
#include "core/ps/staleness.h"
#include "core/training/trainer.h"

namespace twinps::cli {

// {examples, loss, accuracy?, auc?}
nlohmann::json metrics_json(const model::MetricValues& m);

// One epoch: its training metrics, the optimizer's step counter after it,
// when it finished (seconds on the run's clock, `time_origin` subtracted),
// its throughput and its evaluation if there was one.
nlohmann::json epoch_json(const training::EpochResult& e, std::int64_t batch_size, Time time_origin = 0);

nlohmann::json staleness_json(const StalenessHistogram& h);

nlohmann::json stats_json(const CoordinatorStats& s);

}  // namespace twinps::cli
