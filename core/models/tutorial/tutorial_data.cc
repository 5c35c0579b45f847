#include "core/models/tutorial/tutorial_data.h"

#include <memory>

#include "core/data/in_memory_records.h"

namespace twinps::tutorial {

data::Schema schema() {
  data::Schema s;
  s.columns.push_back(data::ColumnSpec{"features", data::ColumnType::kString, 3});
  s.columns.push_back(data::ColumnSpec{"label", data::ColumnType::kString, 1});
  return s;
}

data::RecordBatch generate_records(int n, RandomStream& random) {
  data::Column features, labels;
  features.type = labels.type = data::ColumnType::kString;
  features.offsets = labels.offsets = {0};
  for (int i = 0; i < n; ++i) {
    bool avenger = false;
    for (std::size_t pick : random.sample(kFeatureVocab.size(), 3)) {
      features.strings.push_back(kFeatureVocab[pick]);
      avenger |= pick == 0;
    }
    labels.strings.push_back(avenger ? "yes" : "no");
    features.offsets.push_back(static_cast<std::int64_t>(features.strings.size()));
    labels.offsets.push_back(static_cast<std::int64_t>(labels.strings.size()));
  }
  data::RecordBatch batch;
  batch.size = n;
  batch.columns.push_back(std::move(features));
  batch.columns.push_back(std::move(labels));
  return batch;
}

std::vector<Value> records_args(std::uint64_t seed, std::int64_t records, std::int64_t batch_size,
                                std::int64_t shuffle_buffer, std::int64_t repeat) {
  return {Value(static_cast<std::int64_t>(seed)), Value(records), Value(batch_size), Value(shuffle_buffer),
          Value(repeat)};
}

void register_data_functions(FunctionRegistry& registry) {
  registry.add_resource(kRecordsFunction, [](ResourceContext& ctx) -> StatusOr<std::unique_ptr<Resource>> {
    if (ctx.args.size() != 5) return absl::InvalidArgumentError("tutorial/records takes 5 arguments");
    for (const auto& a : ctx.args)
      if (!std::holds_alternative<std::int64_t>(a))
        return absl::InvalidArgumentError("tutorial/records arguments are integers");
    auto arg = [&](std::size_t i) { return std::get<std::int64_t>(ctx.args[i]); };
    if (arg(1) < 1) return absl::InvalidArgumentError("tutorial/records: the record count must be positive");
    // Every worker draws the same records from the same seed; only their
    // shuffle differs (the worker's own stream), as in the tutorial.
    RandomStream random(static_cast<std::uint64_t>(arg(0)));
    auto records = std::make_shared<const data::RecordBatch>(generate_records(static_cast<int>(arg(1)), random));
    DatasetOptions o;
    o.batch_size = arg(2);
    o.shuffle_buffer = arg(3);
    o.repeat = arg(4);
    auto ds = data::InMemoryRecordDataset::create(schema(), std::move(records), o);
    if (!ds.ok()) return ds.status();
    return std::unique_ptr<Resource>(std::move(*ds));
  });
}

}  // namespace twinps::tutorial
