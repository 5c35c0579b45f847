#pragma once
// Per-worker resources that give RecordBatches (file datasets), beside the
// tutorial's in-memory Batch datasets of dataset.h. The built-in "iterator"
// resource function (register_dataset_functions) makes an iterator of
// either kind, so the coordinator's create_per_worker_iterator works for
// both.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/data/records.h"
#include "core/runtime/random.h"
#include "core/runtime/status.h"
#include "core/worker/resource.h"

namespace twinps::data {

// What an iterator has read so far, for run summaries.
struct ReadStats {
  std::int64_t records_read = 0;     // records delivered into batches (or dropped as a remainder)
  std::int64_t records_skipped = 0;  // bad records passed over (skip_bad_records)
  std::int64_t files_cut_short = 0;  // files whose rest could not be read after a bad record
  std::int64_t passes_completed = 0;
  std::vector<std::string> first_errors;  // the first few skipped records' errors, naming file and record

  static constexpr std::size_t kErrorsKept = 5;
};

class RecordIteratorResource : public Resource {
 public:
  // The next batch, or OUT_OF_RANGE when the data is exhausted. A bad record
  // (when not skipped) is an error naming file and record, and the iterator
  // keeps returning it.
  virtual StatusOr<RecordBatch> next() = 0;
  virtual const Schema& schema() const = 0;
  virtual const ReadStats& stats() const = 0;
  // The kernel kind a cost model prices this iterator's batches by: "read/"
  // and the format, with ".gz" for compressed files ("read/tfrecord.gz",
  // file_dataset.h's read_kernel), or kReadMemoryKernel; empty: unpriced.
  virtual std::string_view read_kernel() const { return {}; }
};

// Records taken from memory (the tutorial's generated records).
inline constexpr char kReadMemoryKernel[] = "read/memory";

class RecordDatasetResource : public Resource {
 public:
  virtual std::unique_ptr<RecordIteratorResource> make_iterator(RandomStream random) const = 0;
  virtual const Schema& schema() const = 0;
};

}  // namespace twinps::data
