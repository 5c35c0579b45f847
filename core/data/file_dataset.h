#pragma once
// Datasets over files: a list of files from globs, divided among the workers,
// read by the format's RecordReader, shuffled with tf.data's buffer, batched
// and repeated, as per-worker resources:
//
//   FileDatasetSpec spec;                       // file_dataset.proto
//   spec.add_patterns("/data/train-*.tfrecord");
//   ... columns, batch_size, shuffle_buffer, repeat ...
//   // on the coordinator:
//   auto ds = coordinator.create_per_worker_dataset(kFileDatasetFunction, file_dataset_args(spec, workers));
//   auto it = coordinator.create_per_worker_iterator(ds);
//   // in a step function:
//   auto* it = *ctx.resource<data::RecordIteratorResource>(0);
//   StatusOr<RecordBatch> batch = it->next();
//
// Each worker builds its dataset from the same spec and its own index, so a
// worker that restarts builds the same shard again; its iterator starts over
// (spec R10). Everything is deterministic given the iterator's random stream.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/data/record_dataset.h"
#include "core/data/record_reader.h"
#include "core/messages/value.h"
#include "core/worker/function_registry.h"
#include "data/file_dataset.pb.h"

namespace twinps::data {

// The resource function registered by register_file_dataset_functions.
inline constexpr char kFileDatasetFunction[] = "file_dataset";

// A file to read: for IDX an images file and its labels file.
struct DataFile {
  std::string path;
  std::string labels_path;  // IDX only; may be empty
};

// The files matched by `patterns`, sorted and without duplicates. A pattern
// that matches nothing is NOT_FOUND naming it.
StatusOr<std::vector<std::string>> expand_patterns(const std::vector<std::string>& patterns);

// The format the file names say (FORMAT_FROM_NAMES), or INVALID_ARGUMENT
// naming a file whose name says none or another format than the first's.
StatusOr<FileDatasetSpec::Format> format_from_names(const std::vector<std::string>& files);

// The schema a spec reads: its columns for CSV and TFRecord; for LibSVM and
// IDX the fixed columns named by their options (IDX needs the images file's
// header, hence `first_file`).
StatusOr<Schema> schema_of(const FileDatasetSpec& spec, FileDatasetSpec::Format format, const DataFile& first_file);
Schema schema_from_columns(const google::protobuf::RepeatedPtrField<ColumnProto>& columns);
// Sets the spec's columns to the schema's.
void set_columns(const Schema& schema, FileDatasetSpec& spec);

// The kernel kind reading `format` from files like `first_path` is priced by
// ("read/tfrecord", "read/idx.gz": RecordIteratorResource::read_kernel).
std::string_view read_kernel(FileDatasetSpec::Format format, std::string_view first_path);

// Opens a reader for one file of a spec. `file_index` goes into origins.
StatusOr<std::unique_ptr<RecordReader>> open_reader(const FileDatasetSpec& spec, FileDatasetSpec::Format format,
                                                    const Schema& schema, const DataFile& file,
                                                    std::int32_t file_index);

// Records in a file (passing over them without decoding). A file whose
// framing breaks off counts the records up to and including the bad one
// when `stop_at_damage` (the rest cannot be read); otherwise the damage is
// an error.
StatusOr<std::int64_t> count_records(const FileDatasetSpec& spec, FileDatasetSpec::Format format,
                                     const Schema& schema, const DataFile& file, bool stop_at_damage);

// A contiguous run of one file's records: [first, first + count), or to the
// end of the file when count < 0.
struct ShardPiece {
  std::int32_t file = 0;
  std::int64_t first = 0;
  std::int64_t count = -1;
};

// What a worker reads, and why.
struct ShardPlan {
  FileDatasetSpec::Sharding sharding = FileDatasetSpec::AUTO;  // the policy applied (never AUTO)
  std::vector<ShardPiece> pieces;
  std::int64_t records = -1;  // records in the shard, when counted (BY_RECORD)
  std::string description;    // "by file: files 1, 4 of 6 (6 files >= 3 workers)"
};

// Divides `files` among `workers` (see FileDatasetSpec.Sharding). BY_RECORD
// gives worker w the records [w*N/W, (w+1)*N/W) of the N records of all
// files in order, so every record is in exactly one shard.
StatusOr<ShardPlan> plan_shard(const FileDatasetSpec& spec, FileDatasetSpec::Format format, const Schema& schema,
                               const std::vector<DataFile>& files, int worker, int workers);

class FileDataset final : public RecordDatasetResource {
 public:
  // Checks the spec, lists the files and plans `worker`'s shard of
  // `workers`. Errors name the pattern, file, column or field at fault.
  static StatusOr<std::unique_ptr<FileDataset>> create(const FileDatasetSpec& spec, int worker, int workers);

  std::unique_ptr<RecordIteratorResource> make_iterator(RandomStream random) const override;
  const Schema& schema() const override { return schema_; }
  const ShardPlan& plan() const { return plan_; }
  const std::vector<DataFile>& files() const { return files_; }
  FileDatasetSpec::Format format() const { return format_; }
  int worker() const { return worker_; }
  const FileDatasetSpec& spec() const { return spec_; }

 private:
  FileDataset() = default;
  FileDatasetSpec spec_;
  FileDatasetSpec::Format format_ = FileDatasetSpec::FORMAT_FROM_NAMES;
  Schema schema_;
  std::vector<DataFile> files_;
  std::shared_ptr<const std::vector<std::string>> file_names_;
  ShardPlan plan_;
  int worker_ = 0;
};

// The arguments of the kFileDatasetFunction resource: the spec and the
// number of workers to divide the files among (1: every worker builds the
// whole data).
std::vector<Value> file_dataset_args(const FileDatasetSpec& spec, int workers);

// Registers kFileDatasetFunction (and the "iterator" function, which makes
// iterators of datasets of either kind).
void register_file_dataset_functions(FunctionRegistry& registry);

}  // namespace twinps::data
