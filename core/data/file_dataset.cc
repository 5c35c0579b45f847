#include "core/data/file_dataset.h"

#include <glob.h>

#include <algorithm>
#include <limits>
#include <set>

#include "core/data/csv_reader.h"
#include "core/data/dataset.h"
#include "core/data/idx_reader.h"
#include "core/data/libsvm_reader.h"
#include "core/data/shuffle_buffer.h"
#include "core/data/tfrecord.h"

namespace twinps::data {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string format_name(FileDatasetSpec::Format f) { return FileDatasetSpec::Format_Name(f); }

// The format a file name says, or FORMAT_FROM_NAMES if it says none.
FileDatasetSpec::Format format_of_name(std::string_view name) {
  if (ends_with(name, ".gz")) name.remove_suffix(3);
  if (auto slash = name.rfind('/'); slash != std::string_view::npos) name.remove_prefix(slash + 1);
  if (ends_with(name, ".csv") || ends_with(name, ".tsv")) return FileDatasetSpec::CSV;
  if (ends_with(name, ".libsvm") || ends_with(name, ".svm") || ends_with(name, ".svmlight")) return FileDatasetSpec::LIBSVM;
  if (ends_with(name, ".tfrecord") || ends_with(name, ".tfrecords")) return FileDatasetSpec::TFRECORD;
  if (name.find("-ubyte") != std::string_view::npos || ends_with(name, ".idx")) return FileDatasetSpec::IDX;
  return FileDatasetSpec::FORMAT_FROM_NAMES;
}

Status check_spec(const FileDatasetSpec& spec) {
  if (spec.patterns().empty()) return absl::InvalidArgumentError("the file dataset has no file patterns");
  if (spec.batch_size() <= 0)
    return absl::InvalidArgumentError("batch_size must be positive, not " + std::to_string(spec.batch_size()));
  if (spec.shuffle_buffer() < 0)
    return absl::InvalidArgumentError("shuffle_buffer must not be negative, not " + std::to_string(spec.shuffle_buffer()));
  if (spec.repeat() == 0 || spec.repeat() < -1)
    return absl::InvalidArgumentError("repeat must be -1 (forever) or positive, not " + std::to_string(spec.repeat()));
  std::set<std::string> names;
  for (const ColumnProto& c : spec.columns()) {
    if (c.name().empty()) return absl::InvalidArgumentError("a column has no name");
    if (c.width() < 0) return absl::InvalidArgumentError("column \"" + c.name() + "\": width must not be negative");
    if (!names.insert(c.name()).second) return absl::InvalidArgumentError("column \"" + c.name() + "\" is declared twice");
  }
  return absl::OkStatus();
}

// The files of a spec: IDX images paired with labels, others one by one.
StatusOr<std::vector<DataFile>> list_files(const FileDatasetSpec& spec, FileDatasetSpec::Format format,
                                           const std::vector<std::string>& paths) {
  std::vector<DataFile> files;
  for (const auto& p : paths) files.push_back(DataFile{p, ""});
  if (format != FileDatasetSpec::IDX || spec.idx().labels_patterns().empty()) return files;
  auto labels = expand_patterns({spec.idx().labels_patterns().begin(), spec.idx().labels_patterns().end()});
  if (!labels.ok()) return labels.status();
  if (labels->size() != files.size())
    return absl::InvalidArgumentError(std::to_string(files.size()) + " IDX images files but " +
                                      std::to_string(labels->size()) + " labels files: they pair one to one");
  for (std::size_t i = 0; i < files.size(); ++i) files[i].labels_path = (*labels)[i];
  return files;
}

std::string list_numbers(const std::vector<ShardPiece>& pieces) {
  std::string out;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    if (i == 8) return out + ", ... (" + std::to_string(pieces.size()) + " files)";
    out += (i ? ", " : "") + std::to_string(pieces[i].file + 1);
  }
  return out;
}

}  // namespace

std::string_view read_kernel(FileDatasetSpec::Format format, std::string_view first_path) {
  const bool gz = ends_with(first_path, ".gz");
  switch (format) {
    case FileDatasetSpec::CSV: return gz ? "read/csv.gz" : "read/csv";
    case FileDatasetSpec::LIBSVM: return gz ? "read/libsvm.gz" : "read/libsvm";
    case FileDatasetSpec::IDX: return gz ? "read/idx.gz" : "read/idx";
    case FileDatasetSpec::TFRECORD: return gz ? "read/tfrecord.gz" : "read/tfrecord";
    default: return {};
  }
}

StatusOr<std::vector<std::string>> expand_patterns(const std::vector<std::string>& patterns) {
  std::set<std::string> out;
  for (const auto& pattern : patterns) {
    glob_t g{};
    const int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
    if (rc == 0)
      for (std::size_t i = 0; i < g.gl_pathc; ++i) out.insert(g.gl_pathv[i]);
    globfree(&g);
    if (rc == GLOB_NOMATCH) return absl::NotFoundError("no files match \"" + pattern + "\"");
    if (rc != 0) return absl::NotFoundError("cannot list files matching \"" + pattern + "\"");
  }
  return std::vector<std::string>(out.begin(), out.end());
}

StatusOr<FileDatasetSpec::Format> format_from_names(const std::vector<std::string>& files) {
  FileDatasetSpec::Format format = FileDatasetSpec::FORMAT_FROM_NAMES;
  for (const auto& f : files) {
    const auto here = format_of_name(f);
    if (here == FileDatasetSpec::FORMAT_FROM_NAMES)
      return absl::InvalidArgumentError(f + ": the file name does not say its format (.csv, .tsv, .libsvm, .svm, "
                                            ".tfrecord, *-ubyte; optionally .gz): set the dataset's format");
    if (format != FileDatasetSpec::FORMAT_FROM_NAMES && here != format)
      return absl::InvalidArgumentError(f + " looks like " + format_name(here) + " but " + files.front() + " like " +
                                        format_name(format) + ": one dataset reads one format");
    format = here;
  }
  return format;
}

Schema schema_from_columns(const google::protobuf::RepeatedPtrField<ColumnProto>& columns) {
  Schema s;
  for (const ColumnProto& c : columns) {
    ColumnType t = ColumnType::kFloat;
    if (c.type() == ColumnProto::INT64) t = ColumnType::kInt64;
    if (c.type() == ColumnProto::STRING) t = ColumnType::kString;
    s.columns.push_back({c.name(), t, c.width()});
  }
  return s;
}

void set_columns(const Schema& schema, FileDatasetSpec& spec) {
  spec.clear_columns();
  for (const ColumnSpec& c : schema.columns) {
    ColumnProto* p = spec.add_columns();
    p->set_name(c.name);
    p->set_type(c.type == ColumnType::kInt64 ? ColumnProto::INT64
                : c.type == ColumnType::kString ? ColumnProto::STRING
                                                : ColumnProto::FLOAT);
    p->set_width(c.width);
  }
}

StatusOr<Schema> schema_of(const FileDatasetSpec& spec, FileDatasetSpec::Format format, const DataFile& first_file) {
  switch (format) {
    case FileDatasetSpec::CSV:
    case FileDatasetSpec::TFRECORD:
      if (spec.columns().empty())
        return absl::InvalidArgumentError(format_name(format) + " datasets need columns (name, type, width) to read");
      return schema_from_columns(spec.columns());
    case FileDatasetSpec::LIBSVM:
      return libsvm_schema(spec.libsvm());
    case FileDatasetSpec::IDX: {
      auto reader = IdxReader::open(first_file.path, first_file.labels_path, 0, spec.idx());
      if (!reader.ok()) return reader.status();
      return (*reader)->schema();
    }
    default:
      return absl::InvalidArgumentError("unknown data format " + std::to_string(format));
  }
}

StatusOr<std::unique_ptr<RecordReader>> open_reader(const FileDatasetSpec& spec, FileDatasetSpec::Format format,
                                                    const Schema& schema, const DataFile& file,
                                                    std::int32_t file_index) {
  auto up = [](auto r) -> StatusOr<std::unique_ptr<RecordReader>> {
    if (!r.ok()) return r.status();
    return std::unique_ptr<RecordReader>(std::move(*r));
  };
  switch (format) {
    case FileDatasetSpec::CSV: return up(CsvReader::open(file.path, file_index, schema, spec.csv()));
    case FileDatasetSpec::LIBSVM: return up(LibSvmReader::open(file.path, file_index, spec.libsvm()));
    case FileDatasetSpec::TFRECORD: return up(TfRecordReader::open(file.path, file_index, schema));
    case FileDatasetSpec::IDX: {
      auto r = IdxReader::open(file.path, file.labels_path, file_index, spec.idx());
      if (!r.ok()) return r.status();
      // Every images file of one dataset must give the same columns.
      if ((*r)->schema().columns.front().width != schema.columns.front().width)
        return absl::InvalidArgumentError(file.path + ": images of " + std::to_string((*r)->schema().columns.front().width) +
                                          " values, the dataset's first file has " +
                                          std::to_string(schema.columns.front().width));
      return std::unique_ptr<RecordReader>(std::move(*r));
    }
    default: return absl::InvalidArgumentError("unknown data format " + std::to_string(format));
  }
}

StatusOr<std::int64_t> count_records(const FileDatasetSpec& spec, FileDatasetSpec::Format format,
                                     const Schema& schema, const DataFile& file, bool stop_at_damage) {
  auto reader = open_reader(spec, format, schema, file, 0);
  if (!reader.ok()) return reader.status();
  auto n = (*reader)->skip(std::numeric_limits<std::int64_t>::max());
  if (!n.ok() && stop_at_damage) return (*reader)->records_passed();
  return n;
}

StatusOr<ShardPlan> plan_shard(const FileDatasetSpec& spec, FileDatasetSpec::Format format, const Schema& schema,
                               const std::vector<DataFile>& files, int worker, int workers) {
  if (workers < 1 || worker < 0 || worker >= workers)
    return absl::InvalidArgumentError("worker " + std::to_string(worker) + " of " + std::to_string(workers) +
                                      " workers does not exist");
  const auto n_files = static_cast<std::int64_t>(files.size());
  ShardPlan plan;
  plan.sharding = spec.sharding();
  std::string why;
  if (plan.sharding == FileDatasetSpec::AUTO) {
    // TensorFlow's AUTO policy shards by file when it can; with fewer files
    // than workers some workers would get nothing, so records are divided.
    plan.sharding = n_files >= workers ? FileDatasetSpec::BY_FILE : FileDatasetSpec::BY_RECORD;
    why = n_files >= workers ? " (auto: " + std::to_string(n_files) + " files >= " + std::to_string(workers) + " workers)"
                             : " (auto: " + std::to_string(n_files) + " file" + (n_files == 1 ? "" : "s") + " < " +
                                   std::to_string(workers) + " workers)";
  }
  if (workers == 1 && plan.sharding != FileDatasetSpec::NONE) plan.sharding = FileDatasetSpec::BY_FILE;

  switch (plan.sharding) {
    case FileDatasetSpec::NONE:
      for (std::int32_t f = 0; f < n_files; ++f) plan.pieces.push_back({f, 0, -1});
      plan.description = "none: every worker reads all " + std::to_string(n_files) + " files";
      break;
    case FileDatasetSpec::BY_FILE:
      if (n_files < workers)
        return absl::InvalidArgumentError("sharding BY_FILE needs at least as many files as workers: " +
                                          std::to_string(n_files) + " files, " + std::to_string(workers) + " workers");
      for (std::int32_t f = worker; f < n_files; f += workers) plan.pieces.push_back({f, 0, -1});
      plan.description = "by file: files " + list_numbers(plan.pieces) + " of " + std::to_string(n_files) + why;
      break;
    case FileDatasetSpec::BY_RECORD: {
      std::vector<std::int64_t> counts;
      std::int64_t total = 0;
      for (const DataFile& f : files) {
        auto n = count_records(spec, format, schema, f, spec.skip_bad_records());
        if (!n.ok()) return n.status();
        counts.push_back(*n);
        total += *n;
      }
      // Worker w's records of all files in order: [w*N/W, (w+1)*N/W).
      const std::int64_t begin = total * worker / workers, end = total * (worker + 1) / workers;
      std::int64_t at = 0;
      for (std::int32_t f = 0; f < n_files; ++f) {
        const std::int64_t lo = std::max(begin, at), hi = std::min(end, at + counts[static_cast<std::size_t>(f)]);
        if (lo < hi) plan.pieces.push_back({f, lo - at, hi - lo});
        at += counts[static_cast<std::size_t>(f)];
      }
      plan.records = end - begin;
      plan.description = "by record: records " + std::to_string(begin + 1) + ".." + std::to_string(end) + " of " +
                         std::to_string(total) + " in " + std::to_string(n_files) + " file" + (n_files == 1 ? "" : "s") + why;
      break;
    }
    default:
      return absl::InvalidArgumentError("unknown sharding " + std::to_string(plan.sharding));
  }
  return plan;
}

// ---------------------------------------------------------------- the iterator

namespace {

class FileIterator final : public RecordIteratorResource {
 public:
  FileIterator(const FileDataset& dataset, RandomStream random)
      : spec_(dataset.spec()),
        format_(dataset.format()),
        schema_(dataset.schema()),
        files_(dataset.files()),
        pieces_(dataset.plan().pieces),
        names_(std::make_shared<const std::vector<std::string>>(file_names(dataset.files()))),
        random_(dataset.spec().has_shuffle_seed()
                    ? RandomStream(dataset.spec().shuffle_seed()).fork("worker", static_cast<std::uint64_t>(dataset.worker()))
                    : random),
        builder_(schema_, names_) {}

  const Schema& schema() const override { return schema_; }
  const ReadStats& stats() const override { return stats_; }
  std::string_view read_kernel() const override {
    return files_.empty() ? std::string_view{} : data::read_kernel(format_, files_.front().path);
  }

  StatusOr<RecordBatch> next() override {
    if (!failed_.ok()) return failed_;
    const auto batch_size = spec_.batch_size();
    // Bounded: each turn returns a batch or ends a pass, and a pass that
    // gave no batch ends the data (repeating it would loop forever).
    for (;;) {
      if (!in_pass_) {
        if (passes_ > 0 && batches_this_pass_ == 0)
          return fail(absl::OutOfRangeError(records_this_pass_ == 0
                                                ? "end of data: the shard has no records"
                                                : "end of data: fewer records than a batch (drop_remainder)"));
        if (passes_ > 0 && spec_.repeat() >= 0 && passes_ >= spec_.repeat())
          return fail(absl::OutOfRangeError("end of data"));
        start_pass();
      }
      while (builder_.size() < batch_size) {
        auto got = pull_shuffled();
        if (!got.ok()) return fail(got.status());
        if (!*got) break;
        builder_.add(record_);
      }
      if (builder_.size() == batch_size) {
        ++batches_this_pass_;
        return builder_.finish();
      }
      // The pass is over: its last, short batch unless dropped.
      in_pass_ = false;
      ++stats_.passes_completed;
      if (builder_.size() > 0 && !spec_.drop_remainder()) {
        ++batches_this_pass_;
        return builder_.finish();
      }
      builder_.finish();
    }
  }

 private:
  static std::vector<std::string> file_names(const std::vector<DataFile>& files) {
    std::vector<std::string> names;
    for (const auto& f : files) names.push_back(f.path);
    return names;
  }

  Status fail(Status s) {
    failed_ = std::move(s);
    return failed_;
  }

  void start_pass() {
    const std::uint64_t pass_key = spec_.reshuffle_each_iteration() ? static_cast<std::uint64_t>(passes_) : 0;
    RandomStream pass_random = random_.fork("pass", pass_key);
    order_ = pieces_;
    if (spec_.shuffle_files()) {
      RandomStream files_random = pass_random.fork("files");
      files_random.shuffle(order_);
    }
    shuffle_.reset();
    if (spec_.shuffle_buffer() > 0)
      shuffle_ = std::make_unique<ShuffleBuffer<Record>>(static_cast<std::size_t>(spec_.shuffle_buffer()),
                                                          pass_random.fork("records"));
    piece_ = 0;
    reader_.reset();
    ++passes_;
    batches_this_pass_ = 0;
    records_this_pass_ = 0;
    in_pass_ = true;
  }

  // The next record of the pass into record_, through the shuffle buffer.
  StatusOr<bool> pull_shuffled() {
    if (!shuffle_) return pull(record_);
    return shuffle_->next([this](Record& r) { return pull(r); }, record_);
  }

  // The next record of the pass in file order; bad records are skipped and
  // counted, or fail the pass.
  StatusOr<bool> pull(Record& record) {
    for (;;) {
      if (!reader_) {
        if (piece_ >= order_.size()) return false;
        const ShardPiece& piece = order_[piece_];
        auto reader = open_reader(spec_, format_, schema_, files_[static_cast<std::size_t>(piece.file)], piece.file);
        if (!reader.ok()) return reader.status();
        reader_ = std::move(*reader);
        remaining_ = piece.count;
        if (piece.first > 0) {
          auto skipped = reader_->skip(piece.first);
          if (!skipped.ok()) {
            if (!spec_.skip_bad_records()) return skipped.status();
            note_skipped(skipped.status(), /*cut_short=*/true, /*counted=*/false);
            next_piece();
            continue;
          }
        }
      }
      if (remaining_ == 0) {
        next_piece();
        continue;
      }
      auto got = reader_->next(record);
      if (got.ok() && !*got) {
        next_piece();
        continue;
      }
      if (remaining_ > 0) --remaining_;
      if (got.ok()) {
        ++stats_.records_read;
        ++records_this_pass_;
        return true;
      }
      if (!spec_.skip_bad_records()) return got.status();
      const bool cut_short = !reader_->recoverable();
      note_skipped(got.status(), cut_short, /*counted=*/true);
      if (cut_short) next_piece();
    }
  }

  void note_skipped(const Status& error, bool cut_short, bool counted) {
    if (counted) ++stats_.records_skipped;
    if (cut_short) ++stats_.files_cut_short;
    if (stats_.first_errors.size() < ReadStats::kErrorsKept)
      stats_.first_errors.push_back(std::string(error.message()) + (cut_short ? " (the rest of the file is skipped)" : ""));
  }

  void next_piece() {
    reader_.reset();
    ++piece_;
  }

  // Copies, so the iterator does not depend on the dataset resource's lifetime.
  const FileDatasetSpec spec_;
  const FileDatasetSpec::Format format_;
  const Schema schema_;
  const std::vector<DataFile> files_;
  const std::vector<ShardPiece> pieces_;
  std::shared_ptr<const std::vector<std::string>> names_;
  RandomStream random_;
  RecordBatchBuilder builder_;
  ReadStats stats_;
  Status failed_;

  std::int64_t passes_ = 0;  // passes started
  bool in_pass_ = false;
  std::int64_t batches_this_pass_ = 0;
  std::int64_t records_this_pass_ = 0;
  std::vector<ShardPiece> order_;
  std::size_t piece_ = 0;
  std::unique_ptr<RecordReader> reader_;
  std::int64_t remaining_ = -1;
  std::unique_ptr<ShuffleBuffer<Record>> shuffle_;
  Record record_;
};

}  // namespace

StatusOr<std::unique_ptr<FileDataset>> FileDataset::create(const FileDatasetSpec& spec, int worker, int workers) {
  TWINPS_RETURN_IF_ERROR(check_spec(spec));
  auto ds = std::unique_ptr<FileDataset>(new FileDataset());
  ds->spec_ = spec;
  auto paths = expand_patterns({spec.patterns().begin(), spec.patterns().end()});
  if (!paths.ok()) return paths.status();
  ds->format_ = spec.format();
  if (ds->format_ == FileDatasetSpec::FORMAT_FROM_NAMES) {
    auto f = format_from_names(*paths);
    if (!f.ok()) return f.status();
    ds->format_ = *f;
  }
  auto files = list_files(spec, ds->format_, *paths);
  if (!files.ok()) return files.status();
  ds->files_ = std::move(*files);
  if ((ds->format_ == FileDatasetSpec::LIBSVM || ds->format_ == FileDatasetSpec::IDX) && !spec.columns().empty())
    return absl::InvalidArgumentError(format_name(ds->format_) + " datasets have fixed columns: name them in the " +
                                      (ds->format_ == FileDatasetSpec::IDX ? "idx" : "libsvm") +
                                      " options instead of listing columns");
  auto schema = schema_of(spec, ds->format_, ds->files_.front());
  if (!schema.ok()) return schema.status();
  ds->schema_ = std::move(*schema);
  auto plan = plan_shard(spec, ds->format_, ds->schema_, ds->files_, worker, workers);
  if (!plan.ok()) return plan.status();
  ds->plan_ = std::move(*plan);
  ds->worker_ = worker;
  // Open the shard's first file now, so that a schema that does not fit the
  // files (a CSV header without a column, mismatched IDX pairs) fails when
  // the dataset is built rather than at the first batch.
  const std::int32_t first = ds->plan_.pieces.empty() ? 0 : ds->plan_.pieces.front().file;
  auto probe = open_reader(spec, ds->format_, ds->schema_, ds->files_[static_cast<std::size_t>(first)], first);
  if (!probe.ok()) return probe.status();
  return ds;
}

std::unique_ptr<RecordIteratorResource> FileDataset::make_iterator(RandomStream random) const {
  return std::make_unique<FileIterator>(*this, random);
}

std::vector<Value> file_dataset_args(const FileDatasetSpec& spec, int workers) {
  return {Value{spec.SerializeAsString()}, Value{static_cast<std::int64_t>(workers)}};
}

void register_file_dataset_functions(FunctionRegistry& registry) {
  register_dataset_functions(registry);
  registry.add_resource(kFileDatasetFunction, [](ResourceContext& ctx) -> StatusOr<std::unique_ptr<Resource>> {
    if (ctx.args.size() != 2 || !std::holds_alternative<std::string>(ctx.args[0]) ||
        !std::holds_alternative<std::int64_t>(ctx.args[1]))
      return absl::InvalidArgumentError("file_dataset takes [serialized FileDatasetSpec, number of workers]");
    FileDatasetSpec spec;
    if (!spec.ParseFromString(std::get<std::string>(ctx.args[0])))
      return absl::InvalidArgumentError("file_dataset: the spec argument is not a serialized FileDatasetSpec");
    // Divided among 1: the whole data, on whichever worker builds it
    // (exactly-once training's record table reads it all on every worker).
    const int workers = static_cast<int>(std::get<std::int64_t>(ctx.args[1]));
    auto ds = FileDataset::create(spec, workers == 1 ? 0 : ctx.worker_index, workers);
    if (!ds.ok()) return ds.status();
    return std::unique_ptr<Resource>(std::move(*ds));
  });
}

}  // namespace twinps::data
