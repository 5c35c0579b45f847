#pragma once
// Per-worker datasets of records (core/data/records.h): what a model's train
// and eval steps read. A RecordDataset is a per-worker resource (built on
// each worker by a registered resource function, rebuilt when the worker
// recovers); iter() of it (the built-in "iterator" resource function,
// core/data/dataset.h) gives each worker a RecordIterator whose shuffle
// order is drawn from that worker's random stream (spec R6).
//
// File readers (CSV, LibSVM, IDX, TFRecord) implement RecordDataset; so does
// InMemoryRecordDataset below, for records built in memory (tests, generated
// data such as the tutorial's).
#include <memory>
#include <span>

#include "core/data/dataset.h"
#include "core/data/records.h"
#include "core/runtime/random.h"
#include "core/runtime/status.h"
#include "core/worker/resource.h"

namespace twinps::data {

class RecordIterator : public Resource {
 public:
  // The columns of every batch, in order.
  virtual const Schema& schema() const = 0;
  // The next batch, or OUT_OF_RANGE at the end of the data.
  virtual StatusOr<RecordBatch> next() = 0;
};

class RecordDataset : public Resource {
 public:
  virtual const Schema& schema() const = 0;
  virtual std::unique_ptr<RecordIterator> make_iterator(RandomStream random) const = 0;
};

// Records in memory -> shuffle -> batch -> repeat, with tf.data's shuffle
// buffer and the options InMemoryDataset takes.
class InMemoryRecordDataset final : public RecordDataset {
 public:
  // `records` holds every record as one batch that follows `schema`.
  // INVALID_ARGUMENT for bad options or records that do not fit the schema.
  static StatusOr<std::unique_ptr<InMemoryRecordDataset>> create(Schema schema,
                                                                 std::shared_ptr<const RecordBatch> records,
                                                                 DatasetOptions options);
  const Schema& schema() const override { return schema_; }
  std::unique_ptr<RecordIterator> make_iterator(RandomStream random) const override;

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

// The records `indices` of `all`, in that order.
RecordBatch take_records(const RecordBatch& all, std::span<const std::size_t> indices);

}  // namespace twinps::data
