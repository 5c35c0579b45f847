#include "core/training/data_source.h"

#include "core/data/file_dataset.h"
#include "core/models/tutorial/tutorial_data.h"

namespace twinps::training {

namespace {

std::string format_label(data::FileDatasetSpec::Format f) {
  switch (f) {
    case data::FileDatasetSpec::CSV: return "CSV";
    case data::FileDatasetSpec::LIBSVM: return "LibSVM";
    case data::FileDatasetSpec::IDX: return "IDX";
    case data::FileDatasetSpec::TFRECORD: return "TFRecord";
    default: return "?";
  }
}

std::string joined_patterns(const data::FileDatasetSpec& spec) {
  std::string out;
  for (const auto& p : spec.patterns()) out += (out.empty() ? "" : ", ") + p;
  return out;
}

}  // namespace

StatusOr<DataSource> file_data(data::FileDatasetSpec spec) {
  // Built once here to check everything a worker would (patterns, format,
  // columns against the first file) and to count the records.
  auto whole = data::FileDataset::create(spec, 0, 1);
  if (!whole.ok()) return whole.status();
  std::int64_t records = 0;
  for (const auto& file : (*whole)->files()) {
    auto n = data::count_records(spec, (*whole)->format(), (*whole)->schema(), file, spec.skip_bad_records());
    if (!n.ok()) return n.status();
    records += *n;
  }
  if (records == 0) return absl::InvalidArgumentError("no records in the files matching " + joined_patterns(spec));
  DataSource source;
  source.function = data::kFileDatasetFunction;
  source.records = records;
  source.read_kernel = data::read_kernel((*whole)->format(), (*whole)->files().front().path);
  const std::size_t files = (*whole)->files().size();
  source.description = std::to_string(files) + " " + format_label((*whole)->format()) + " file" +
                       (files == 1 ? "" : "s") + " matching " + joined_patterns(spec) + ", " +
                       std::to_string(records) + " records";
  source.args = [spec = std::move(spec)](const DatasetRequest& r) {
    data::FileDatasetSpec s = spec;
    s.set_batch_size(r.batch_size);
    s.set_repeat(r.repeat);
    if (!r.shuffle) {
      s.set_shuffle_buffer(0);
      s.set_shuffle_files(false);
    }
    return data::file_dataset_args(s, r.workers);
  };
  return source;
}

DataSource tutorial_data(std::uint64_t seed, std::int64_t records, std::int64_t shuffle_buffer) {
  DataSource source;
  source.function = tutorial::kRecordsFunction;
  source.records = records;
  source.read_kernel = data::kReadMemoryKernel;
  source.description = std::to_string(records) + " generated tutorial records (seed " + std::to_string(seed) + ")";
  source.args = [seed, records, shuffle_buffer](const DatasetRequest& r) {
    return tutorial::records_args(seed, records, r.batch_size, r.shuffle ? shuffle_buffer : 0, r.repeat);
  };
  return source;
}

void register_data_functions(FunctionRegistry& registry) {
  data::register_file_dataset_functions(registry);
  tutorial::register_data_functions(registry);
}

StatusOr<LocalData> LocalData::open(const FunctionRegistry& registry, const DataSource& source,
                                    const DatasetRequest& request, RandomStream random) {
  const ResourceFunction* fn = registry.resource(source.function);
  if (!fn) return absl::InvalidArgumentError("no data function \"" + source.function + "\" is registered");
  const std::vector<Value> args = source.args(request);
  ResourceContext ctx{0, args, nullptr, random.fork("dataset")};
  auto built = (*fn)(ctx);
  if (!built.ok()) return built.status();
  auto* dataset = dynamic_cast<data::RecordDatasetResource*>(built->get());
  if (!dataset) return absl::InvalidArgumentError("\"" + source.function + "\" does not build a record dataset");
  LocalData out;
  out.iterator_ = dataset->make_iterator(random.fork("iterator"));
  out.dataset_ = std::move(*built);
  return out;
}

}  // namespace twinps::training
