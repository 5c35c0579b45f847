#include "tools/tune/input_kernels.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <vector>

#include "core/data/idx_reader.h"
#include "core/data/input_file.h"
#include "core/data/tfrecord.h"
#include "core/model/compiled_model.h"
#include "core/model/graph.h"
#include "core/model/spec_loader.h"
#include "core/runtime/random.h"
#include "core/training/data_source.h"
#include "core/worker/function_registry.h"
#include "tools/cli.h"
#include "tools/training_flags.h"
#include "tools/tune/kernel_fit.h"

namespace twinps::cli {

namespace {

namespace fs = std::filesystem;

// Records per file: more than the trainer's shuffle buffer (10,000 records),
// which a worker draws from at random. Wide records overflow the caches
// there: Fashion-MNIST's buffer holds 31 MB of floats, and reading its
// batches took 4 times what a file of 512 records took. A subject reads
// whole passes, so the buffer is filled as often as a worker fills it.
constexpr std::int64_t kRecords = 10240;

// What a data set's records hold, and the model spec reading them: `floats`
// float scalars, one float input `wide` values wide (an image; 0: none),
// `ints` INT64 categorical scalars (identity buckets) and `strings` STRING
// categorical scalars (hash buckets), and a binary label.
struct DataShape {
  int floats = 0, wide = 0, ints = 0, strings = 0;
  int batch = 32;

  std::string name() const {
    std::string out;
    auto add = [&](int n, const char* what) {
      if (n > 0) out += (out.empty() ? "" : ", ") + std::to_string(n) + " " + what;
    };
    add(floats, "floats");
    if (wide > 0) out += (out.empty() ? "" : ", ") + std::string("1 x ") + std::to_string(wide);
    add(ints, "ints");
    add(strings, "strings");
    return out + format(", batch %d", batch);
  }

  std::string spec_text() const {
    std::string t, layers, all;
    auto join = [&](const std::string& name) { all += (all.empty() ? "\"" : ", \"") + name + "\""; };
    for (int i = 0; i < floats; ++i) {
      t += format("input { name: \"f%d\" dense { width: 1 } }\n", i);
      join(format("f%d", i));
    }
    if (wide > 0) {
      t += format("input { name: \"image\" dense { width: %d } }\n", wide);
      join("image");
    }
    for (int i = 0; i < ints; ++i) {
      t += format("input { name: \"i%d\" categorical { type: INT64 identity_buckets: 1000 oov: OOV_ERROR } }\n", i);
      layers += format("layer { name: \"ei%d\" input: \"i%d\" embedding { dim: 1 } }\n", i, i);
      join(format("ei%d", i));
    }
    for (int i = 0; i < strings; ++i) {
      t += format("input { name: \"s%d\" categorical { type: STRING hash_buckets: 1000 } }\n", i);
      layers += format("layer { name: \"es%d\" input: \"s%d\" embedding { dim: 1 } }\n", i, i);
      join(format("es%d", i));
    }
    t += "label { column: \"label\" type: INT64 }\n" + layers;
    t += "layer { name: \"all\" input: [" + all + "] concatenate {} }\n";
    t += "layer { name: \"out\" input: \"all\" dense { units: 1 } }\n";
    t += "head { input: \"out\" loss: BINARY_CROSS_ENTROPY }\n";
    return t + format("batch_size: %d\n", batch);
  }
};

// Record `r` of a data set with `schema`: values drawn from `random`.
data::Record make_record(const data::Schema& schema, RandomStream& random) {
  data::Record r;
  r.clear(schema.columns.size());
  for (std::size_t c = 0; c < schema.columns.size(); ++c) {
    const data::ColumnSpec& col = schema.columns[c];
    const int width = std::max(col.width, 1);
    const bool label = col.name == "label";
    switch (col.type) {
      case data::ColumnType::kFloat:
        r.spans[c].begin = static_cast<std::uint32_t>(r.floats.size());
        for (int k = 0; k < width; ++k) r.floats.push_back(static_cast<float>(random.uniform(0, 1)));
        r.spans[c].end = static_cast<std::uint32_t>(r.floats.size());
        break;
      case data::ColumnType::kInt64:
        r.spans[c].begin = static_cast<std::uint32_t>(r.ints.size());
        for (int k = 0; k < width; ++k)
          r.ints.push_back(static_cast<std::int64_t>(random.next_u64() % (label ? 2 : 1000)));
        r.spans[c].end = static_cast<std::uint32_t>(r.ints.size());
        break;
      case data::ColumnType::kString:
        r.spans[c].begin = static_cast<std::uint32_t>(r.strings.size());
        for (int k = 0; k < width; ++k) r.strings.push_back("token" + std::to_string(random.next_u64() % 5000));
        r.spans[c].end = static_cast<std::uint32_t>(r.strings.size());
        break;
    }
  }
  return r;
}

Status write_tfrecord(const std::string& path, const data::Schema& schema, RandomStream random) {
  auto out = data::TfRecordWriter::create(path);
  if (!out.ok()) return out.status();
  std::string example;
  for (std::int64_t i = 0; i < kRecords; ++i) {
    example.clear();
    data::encode_example(schema, make_record(schema, random), example);
    TWINPS_RETURN_IF_ERROR((*out)->write(example));
  }
  return (*out)->close();
}

// A header line, then one line per record; a wide column in one field.
Status write_csv(const std::string& path, const data::Schema& schema, RandomStream random) {
  auto out = data::OutputFile::create(path);
  if (!out.ok()) return out.status();
  std::string text;
  for (std::size_t c = 0; c < schema.columns.size(); ++c) text += (c ? "," : "") + schema.columns[c].name;
  text += "\n";
  for (std::int64_t i = 0; i < kRecords; ++i) {
    const data::Record r = make_record(schema, random);
    for (std::size_t c = 0; c < schema.columns.size(); ++c) {
      if (c) text += ",";
      for (std::uint32_t k = r.spans[c].begin; k < r.spans[c].end; ++k) {
        if (k > r.spans[c].begin) text += " ";
        switch (schema.columns[c].type) {
          case data::ColumnType::kFloat: text += format("%.4f", r.floats[k]); break;
          case data::ColumnType::kInt64: text += std::to_string(r.ints[k]); break;
          case data::ColumnType::kString: text += r.strings[k]; break;
        }
      }
    }
    text += "\n";
  }
  TWINPS_RETURN_IF_ERROR((*out)->write(text));
  return (*out)->close();
}

// MNIST's layout: an images file of `wide` bytes per record and a labels file.
Status write_idx(const std::string& images, const std::string& labels, int wide, RandomStream random) {
  std::vector<std::uint8_t> pixels(static_cast<std::size_t>(kRecords * wide)), classes(kRecords);
  for (auto& v : pixels) v = static_cast<std::uint8_t>(random.next_u64() % 256);
  for (auto& v : classes) v = static_cast<std::uint8_t>(random.next_u64() % 2);
  TWINPS_RETURN_IF_ERROR(data::write_idx_ubyte(images, {static_cast<std::uint32_t>(kRecords), static_cast<std::uint32_t>(wide)}, pixels));
  return data::write_idx_ubyte(labels, {static_cast<std::uint32_t>(kRecords)}, classes);
}

// A data set written in one format, loaded as `twinps train --model SPEC
// --train-data FILE` loads it: the compiled model and its data source.
struct Loaded {
  std::shared_ptr<const model::CompiledModel> model;
  training::DataSource train;
};

StatusOr<Loaded> load(const std::string& spec_path, std::vector<std::string> data, std::vector<std::string> labels) {
  auto run = load_spec_and_data(spec_path, std::move(data), std::move(labels));
  if (!run.ok()) return run.status();
  return Loaded{run->model, std::move(*run->train)};
}

// Reading batches of a data set through the trainer's data source, a pass
// of `calls` batches a run.
struct ReadSubject {
  std::string name;
  Loaded loaded;
  int batch;
  training::LocalData data;
  int calls = static_cast<int>((kRecords + batch - 1) / batch);
  std::int64_t records = 0;  // read so far, so the reads are used

  static StatusOr<ReadSubject> open(std::string name, Loaded loaded, int batch, const FunctionRegistry& registry) {
    training::DatasetRequest request;
    request.batch_size = batch;
    auto data = training::LocalData::open(registry, loaded.train, request, RandomStream(7));
    if (!data.ok()) return data.status();
    return ReadSubject{std::move(name), std::move(loaded), batch, std::move(*data)};
  }
  void run() {
    for (int i = 0; i < calls; ++i) {
      auto b = data.next();
      records += b.ok() ? b->size : 0;
    }
  }
  KernelWork work() const { return loaded.model->graph().read_kernel(loaded.train.read_kernel, batch); }
};

// Mapping one batch through the model's input layer.
struct FeatureSubject {
  std::string name;
  std::string_view kind;
  Loaded loaded;
  data::Schema schema;
  data::RecordBatch batch;
  std::int64_t mapped = 0;

  void run() {
    auto f = loaded.model->graph().features().map(schema, batch);
    mapped += f.ok() ? f->batch : 0;
  }
  KernelWork work() const {
    for (const KernelWork& k : loaded.model->graph().train_kernels(batch.size))
      if (k.kind == kind) return k;
    return KernelWork{kind};
  }
};

class Scratch {
 public:
  static StatusOr<Scratch> create(const std::string& under) {
    std::error_code ec;
    const fs::path parent = under.empty() ? fs::temp_directory_path(ec) : fs::path(under);
    std::string pattern = (parent / "twinps-calibrate-input-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) return absl::InternalError("cannot create a scratch directory under " + parent.string());
    return Scratch(pattern);
  }
  Scratch(Scratch&& other) noexcept : dir_(std::move(other.dir_)) { other.dir_.clear(); }
  ~Scratch() {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

 private:
  explicit Scratch(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
};

// The model spec of `shape`, written as `name`.textproto; its path.
StatusOr<std::string> write_spec(const Scratch& scratch, const std::string& name, const DataShape& shape) {
  const std::string path = scratch.path(name + ".textproto");
  std::ofstream(path) << shape.spec_text();
  if (!fs::exists(path)) return absl::InternalError("cannot write " + path);
  return path;
}

// The schema the model of `shape` reads: its inputs, then the label.
StatusOr<data::Schema> schema_of(const DataShape& shape) {
  model::LoadedSpec loaded = model::parse_model_spec(shape.spec_text(), "calibration spec");
  if (!loaded.ok()) return absl::InternalError(loaded.errors.front().to_string());
  auto compiled = model::CompiledModel::compile(loaded.spec);
  if (!compiled.ok()) return compiled.status();
  return (*compiled)->graph().features().schema();
}

// Writes `shape`'s spec and `kRecords` records in the format `ext` says
// (".tfrecord", ".csv", "-idx" for MNIST's pair of files; ".gz" after it to
// compress), and loads them as the trainer does.
StatusOr<Loaded> write_data(const Scratch& scratch, const std::string& name, const DataShape& shape,
                            const std::string& ext, std::uint64_t seed) {
  auto spec = write_spec(scratch, name, shape);
  if (!spec.ok()) return spec.status();
  auto schema = schema_of(shape);
  if (!schema.ok()) return schema.status();
  const bool gz = ext.size() > 3 && ext.compare(ext.size() - 3, 3, ".gz") == 0;
  if (ext.rfind("-idx", 0) == 0) {
    const std::string images = scratch.path(name + "-images-idx2-ubyte" + (gz ? ".gz" : ""));
    const std::string labels = scratch.path(name + "-labels-idx1-ubyte" + (gz ? ".gz" : ""));
    TWINPS_RETURN_IF_ERROR(write_idx(images, labels, shape.wide, RandomStream(seed)));
    return load(*spec, {images}, {labels});
  }
  const std::string file = scratch.path(name + ext);
  const bool tfrecord = ext.rfind(".tfrecord", 0) == 0;
  TWINPS_RETURN_IF_ERROR(tfrecord ? write_tfrecord(file, *schema, RandomStream(seed))
                                  : write_csv(file, *schema, RandomStream(seed)));
  return load(*spec, {file}, {});
}

// The shapes each format is read at: a click log's columns (ctr), an image
// (fashion_mnist), a few scalars, and strings; MNIST's format holds images
// only.
const DataShape kTableShapes[] = {{13, 0, 26, 0, 256}, {0, 196, 0, 0, 64}, {4, 0, 0, 0, 32}, {2, 0, 0, 8, 128}};
const DataShape kImageShapes[] = {{0, 784, 0, 0, 64}, {0, 784, 0, 0, 256}, {0, 16, 0, 0, 256}, {0, 100, 0, 0, 32}};

using ReadsByKind = std::map<std::string, std::vector<ReadSubject>>;

Status add_read(ReadsByKind& reads, StatusOr<Loaded> loaded, const std::string& name, int batch,
                const FunctionRegistry& registry) {
  if (!loaded.ok()) return loaded.status();
  const std::string kind = loaded->train.read_kernel;
  auto subject = ReadSubject::open(name, std::move(*loaded), batch, registry);
  if (!subject.ok()) return subject.status();
  reads[kind].push_back(std::move(*subject));
  return absl::OkStatus();
}

Status add_reads(const Scratch& scratch, const FunctionRegistry& registry, ReadsByKind& reads) {
  int n = 0;
  for (const std::string ext : {".tfrecord", ".tfrecord.gz", ".csv", ".csv.gz", "-idx", "-idx.gz"}) {
    const bool idx = ext.rfind("-idx", 0) == 0;
    for (const DataShape& shape : idx ? kImageShapes : kTableShapes) {
      ++n;
      TWINPS_RETURN_IF_ERROR(add_read(reads, write_data(scratch, format("data%d", n), shape, ext, n),
                                      ext + ": " + shape.name(), shape.batch, registry));
    }
  }
  // The tutorial's records, generated in memory.
  for (int batch : {8, 64, 512}) {
    auto run = load_spec_and_data("", {kBuiltinTutorialData});
    if (!run.ok()) return run.status();
    TWINPS_RETURN_IF_ERROR(add_read(reads, Loaded{run->model, std::move(*run->train)},
                                    format("the tutorial's records, batch %d", batch), batch, registry));
  }
  return absl::OkStatus();
}

// The input layer's kinds, each on inputs of that kind alone.
Status add_features(const Scratch& scratch, const FunctionRegistry& registry, std::vector<FeatureSubject>& dense,
                    std::vector<FeatureSubject>& categorical) {
  const DataShape dense_shapes[] = {{4, 0, 0, 0, 32}, {0, 784, 0, 0, 64}, {13, 0, 0, 0, 256}, {0, 784, 0, 0, 256}};
  const DataShape categorical_shapes[] = {{0, 0, 26, 0, 256}, {0, 0, 0, 8, 128}, {0, 0, 4, 0, 32}, {0, 0, 0, 3, 16}};
  int n = 0;
  auto add = [&](const DataShape& shape, std::string_view kind, std::vector<FeatureSubject>& to) -> Status {
    ++n;
    auto loaded = write_data(scratch, format("features%d", n), shape, ".tfrecord", 100 + n);
    if (!loaded.ok()) return loaded.status();
    training::DatasetRequest request;
    request.batch_size = shape.batch;
    auto data = training::LocalData::open(registry, loaded->train, request, RandomStream(7));
    if (!data.ok()) return data.status();
    auto batch = data->next();
    if (!batch.ok()) return batch.status();
    to.push_back(FeatureSubject{shape.name(), kind, std::move(*loaded), data->schema(), std::move(*batch)});
    return absl::OkStatus();
  };
  for (const DataShape& shape : dense_shapes) TWINPS_RETURN_IF_ERROR(add(shape, model::kDenseFeaturesKernel, dense));
  for (const DataShape& shape : categorical_shapes)
    TWINPS_RETURN_IF_ERROR(add(shape, model::kCategoricalFeaturesKernel, categorical));
  return absl::OkStatus();
}

}  // namespace

Status measure_input_kernels(const CalibrationOptions& o, scenario::CostProfile& p, std::string* report) {
  auto scratch = Scratch::create(o.work_dir);
  if (!scratch.ok()) return scratch.status();
  FunctionRegistry registry;
  training::register_data_functions(registry);
  ReadsByKind reads;
  TWINPS_RETURN_IF_ERROR(add_reads(*scratch, registry, reads));
  std::vector<FeatureSubject> dense, categorical;
  TWINPS_RETURN_IF_ERROR(add_features(*scratch, registry, dense, categorical));
  const double seconds = o.seconds_per_batch / 4;
  for (auto& [kind, subjects] : reads) measure_kernel_kind(kind, o.repeats, seconds, subjects, p, report);
  measure_kernel_kind(model::kDenseFeaturesKernel, o.repeats, seconds, dense, p, report);
  measure_kernel_kind(model::kCategoricalFeaturesKernel, o.repeats, seconds, categorical, p, report);
  return absl::OkStatus();
}

}  // namespace twinps::cli
