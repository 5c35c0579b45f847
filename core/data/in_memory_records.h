#pragma once
// Records held in memory, as a per-worker dataset (core/data/record_dataset.h):
// for tests and for data a program generates (the tutorial's examples).
// Shuffled with tf.data's buffer, batched and repeated like the file
// datasets, so a model trains on them exactly as on files.
#include <memory>
#include <span>

#include "core/data/dataset.h"
#include "core/data/record_dataset.h"
#include "core/data/records.h"
#include "core/runtime/random.h"
#include "core/runtime/status.h"

namespace twinps::data {

class InMemoryRecordDataset final : public RecordDatasetResource {
 public:
  // `records` holds every record as one batch that follows `schema`.
  // INVALID_ARGUMENT for bad options or records that do not fit the schema.
  static StatusOr<std::unique_ptr<InMemoryRecordDataset>> create(Schema schema,
                                                                 std::shared_ptr<const RecordBatch> records,
                                                                 DatasetOptions options);
  const Schema& schema() const override { return schema_; }
  std::unique_ptr<RecordIteratorResource> make_iterator(RandomStream random) const override;

 private:
  InMemoryRecordDataset(Schema schema, std::shared_ptr<const RecordBatch> records, DatasetOptions options)
      : schema_(std::move(schema)), records_(std::move(records)), options_(options) {}
  Schema schema_;
  std::shared_ptr<const RecordBatch> records_;
  DatasetOptions options_;
};

// OK when `batch` has the schema's columns with consistent offsets, types
// and fixed widths; INVALID_ARGUMENT naming the column otherwise.
Status check_batch(const Schema& schema, const RecordBatch& batch);

// The records `indices` of `all`, in that order (with their origins, when
// `all` has them).
RecordBatch take_records(const RecordBatch& all, std::span<const std::size_t> indices);

// Appends `batch`'s records to `into` (same schema; `into` may be empty):
// a table of every record, built from a dataset's batches.
void append_records(RecordBatch& into, const RecordBatch& batch);

}  // namespace twinps::data
