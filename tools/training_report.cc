#include "tools/training_report.h"

namespace twinps::cli {

nlohmann::json metrics_json(const model::MetricValues& m) {
  nlohmann::json j{{"examples", m.examples}, {"loss", m.loss}};
  if (m.accuracy) j["accuracy"] = *m.accuracy;
  if (m.auc) j["auc"] = *m.auc;
  return j;
}

nlohmann::json epoch_json(const training::EpochResult& e, std::int64_t batch_size, Time time_origin) {
  nlohmann::json j = metrics_json(e.train);
  j["epoch"] = e.epoch;
  j["iterations"] = e.iterations;
  j["time"] = to_seconds(e.finished_at - time_origin);
  j["examples_per_second"] = e.examples_per_second;
  j["steps_per_second"] = batch_size > 0 ? e.examples_per_second / static_cast<double>(batch_size) : 0.0;
  if (e.eval) j["eval"] = metrics_json(*e.eval);
  return j;
}

nlohmann::json staleness_json(const StalenessHistogram& h) {
  return {{"gradients", h.total}, {"max", h.max},     {"mean", h.mean()},
          {"unmeasured", h.unmeasured}, {"dropped", h.dropped}, {"counts", h.counts},
          {"bounds", StalenessHistogram::kBounds}};
}

nlohmann::json stats_json(const CoordinatorStats& s) {
  return {{"scheduled", s.scheduled},
          {"completed", s.completed},
          {"failed", s.failed},
          {"retried", s.retried},
          {"cancelled", s.cancelled},
          {"dispatched", s.dispatched},
          {"worker_failures", s.worker_failures},
          {"worker_recoveries", s.worker_recoveries},
          {"resources_built", s.resources_built},
          {"errors_raised", s.errors_raised},
          {"ssp_waits", s.ssp_waits},
          {"ssp_wait_s", to_seconds(s.ssp_wait_time)},
          {"sync_steps", s.sync_steps},
          {"sync_wait_s", to_seconds(s.sync_wait_time)},
          {"closures_per_worker", s.closures_per_worker}};
}

}  // namespace twinps::cli
