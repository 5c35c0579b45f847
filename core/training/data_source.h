#pragma once
// Where a training run's records come from, described so that every task
// can build its own part: a resource function registered in every twinps
// binary and the arguments to give it. The coordinator asks for one dataset
// per worker (each worker builds its shard, again after a restart); a
// side-car evaluator or the coordinator's direct evaluation builds the whole
// data on the caller with the same function.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/data/record_dataset.h"
#include "core/messages/value.h"
#include "core/runtime/random.h"
#include "core/runtime/status.h"
#include "core/worker/function_registry.h"
#include "data/file_dataset.pb.h"

namespace twinps::training {

// What a dataset is asked for.
struct DatasetRequest {
  int workers = 1;               // shards the data is divided into
  std::int64_t batch_size = 1;
  std::int64_t repeat = -1;      // passes over the data; -1 forever
  bool shuffle = true;           // false: in order (evaluation)
};

struct DataSource {
  // The resource function that builds the dataset (register_data_functions).
  std::string function;
  // Its arguments for a request.
  std::function<std::vector<Value>(const DatasetRequest&)> args;
  // Records in one pass over the whole data; -1 when unknown.
  std::int64_t records = -1;
  // For summaries ("3 CSV files matching data/train-*.csv, 2,000 records").
  std::string description;
  // The kernel kind a batch's reading is priced by (RecordIteratorResource::
  // read_kernel of the iterators it makes): a prediction of a run on this
  // data charges it.
  std::string read_kernel;
};

// Files (core/data/file_dataset.h). The spec's patterns, format, columns,
// format options, sharding, shuffle_buffer, shuffle_seed and
// skip_bad_records are used; batch size and repeat come from each request
// (an evaluation reads in order). Counts the records (a pass over headers or
// lines) so that epochs can be one pass; errors name the pattern or file.
StatusOr<DataSource> file_data(data::FileDatasetSpec spec);

// The tutorial's generated records (core/models/tutorial/tutorial_data.h):
// `records` records drawn from `seed`, the same on every worker, shuffled
// with a buffer of `shuffle_buffer` for training.
DataSource tutorial_data(std::uint64_t seed, std::int64_t records, std::int64_t shuffle_buffer);

// The data functions every twinps binary registers: file datasets, the
// tutorial's records and the "iterator" function.
void register_data_functions(FunctionRegistry& registry);

// A source's data built on the caller (shard 0 of `request.workers`).
class LocalData {
 public:
  static StatusOr<LocalData> open(const FunctionRegistry& registry, const DataSource& source,
                                  const DatasetRequest& request, RandomStream random);
  // The next batch, or OUT_OF_RANGE at the end.
  StatusOr<data::RecordBatch> next() { return iterator_->next(); }
  const data::Schema& schema() const { return iterator_->schema(); }
  const data::ReadStats& stats() const { return iterator_->stats(); }

 private:
  std::shared_ptr<Resource> dataset_;  // the iterator may refer to it
  std::shared_ptr<data::RecordIteratorResource> iterator_;
};

}  // namespace twinps::training
