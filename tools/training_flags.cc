#include "tools/training_flags.h"

#include <absl/strings/numbers.h>
#include <google/protobuf/text_format.h>

#include "core/data/file_dataset.h"
#include "core/model/spec_loader.h"
#include "core/models/tutorial/tutorial_spec.h"

namespace twinps::cli {

namespace {

constexpr char kFilesPrefix[] = "files:";

// The tutorial's data, as TensorFlow's tutorial generates it: 200 training
// records shuffled with a buffer of 200; 16 evaluation records from the next seed.
constexpr std::int64_t kTutorialRecords = 200;
constexpr std::int64_t kTutorialEvalRecords = 16;

template <typename T>
std::optional<T> flag(const po::variables_map& vm, const char* name) {
  if (!vm.count(name)) return std::nullopt;
  return vm[name].as<T>();
}

Status bad_flag(const std::string& message) { return absl::InvalidArgumentError(message); }

StatusOr<data::FileDatasetSpec::Format> parse_format(const std::string& f) {
  if (f == "auto") return data::FileDatasetSpec::FORMAT_FROM_NAMES;
  if (f == "csv") return data::FileDatasetSpec::CSV;
  if (f == "libsvm") return data::FileDatasetSpec::LIBSVM;
  if (f == "idx") return data::FileDatasetSpec::IDX;
  if (f == "tfrecord") return data::FileDatasetSpec::TFRECORD;
  return bad_flag("--format must be auto, csv, libsvm, idx or tfrecord, not '" + f + "'");
}

StatusOr<data::FileDatasetSpec::Sharding> parse_sharding(const std::string& s) {
  if (s == "auto") return data::FileDatasetSpec::AUTO;
  if (s == "file") return data::FileDatasetSpec::BY_FILE;
  if (s == "record") return data::FileDatasetSpec::BY_RECORD;
  if (s == "none") return data::FileDatasetSpec::NONE;
  return bad_flag("--sharding must be auto, file, record or none, not '" + s + "'");
}

std::string describe_patterns(const std::vector<std::string>& patterns) {
  std::string out;
  for (const auto& p : patterns) out += (out.empty() ? "" : " ") + p;
  return out;
}

// The data one of --train-data / --eval-data names.
StatusOr<training::DataSource> data_source(const ModelFlags& f, const model::CompiledModel& model,
                                           const std::vector<std::string>& patterns,
                                           const std::vector<std::string>& labels, bool eval, const char* flag_name,
                                           std::string* metadata) {
  if (patterns.size() == 1 && patterns.front() == kBuiltinTutorialData) {
    const std::uint64_t seed = eval ? f.seed + 1 : f.seed;
    const std::int64_t n = eval ? kTutorialEvalRecords : kTutorialRecords;
    if (metadata) *metadata = std::string(kBuiltinTutorialData) + ":" + std::to_string(seed) + ":" + std::to_string(n);
    return training::tutorial_data(seed, n, eval ? 0 : kTutorialRecords);
  }
  data::FileDatasetSpec spec;
  for (const auto& p : patterns) spec.add_patterns(p);
  auto format = parse_format(f.format);
  if (!format.ok()) return format.status();
  spec.set_format(*format);
  auto sharding = parse_sharding(f.sharding);
  if (!sharding.ok()) return sharding.status();
  spec.set_sharding(*sharding);
  spec.set_shuffle_buffer(f.shuffle_buffer);
  spec.set_skip_bad_records(f.skip_bad_records);
  if (f.csv_delimiter.size() != 1) return bad_flag("--csv-delimiter must be one character");
  spec.mutable_csv()->set_delimiter(f.csv_delimiter);
  auto resolved = *format;
  if (resolved == data::FileDatasetSpec::FORMAT_FROM_NAMES) {
    auto files = data::expand_patterns(patterns);
    if (!files.ok()) return Status(files.status().code(), std::string(flag_name) + ": " + std::string(files.status().message()));
    auto named = data::format_from_names(*files);
    if (!named.ok()) return Status(named.status().code(), std::string(flag_name) + ": " + std::string(named.status().message()) + " (say which with --format)");
    resolved = *named;
  }
  const data::Schema& schema = model.schema();
  const std::string label_column = model.spec().label().column();
  if (resolved == data::FileDatasetSpec::IDX) {
    // IDX files have two columns: the images (named as the model's float
    // input reads them) and the labels.
    for (const auto& c : schema.columns)
      if (c.type == data::ColumnType::kFloat && c.name != label_column) {
        spec.mutable_idx()->set_image_column(c.name);
        break;
      }
    spec.mutable_idx()->set_label_column(label_column);
    if (labels.empty()) return bad_flag(std::string(flag_name) + ": IDX images need their labels file: give --" +
                                        (eval ? "eval" : "train") + "-labels GLOB");
    for (const auto& l : labels) spec.mutable_idx()->add_labels_patterns(l);
  } else if (resolved == data::FileDatasetSpec::CSV || resolved == data::FileDatasetSpec::TFRECORD) {
    data::set_columns(schema, spec);
  }
  if (metadata) {
    std::string text;
    google::protobuf::TextFormat::PrintToString(spec, &text);
    *metadata = kFilesPrefix + text;
  }
  auto source = training::file_data(spec);
  if (!source.ok())
    return Status(source.status().code(), std::string(flag_name) + " " + describe_patterns(patterns) + ": " +
                                              std::string(source.status().message()));
  return source;
}

}  // namespace

void ModelFlags::add_model_options(po::options_description& opts) {
  opts.add_options()
      ("model", po::value(&model_path),
       "the model spec (Protobuf text, core/model/model_spec.proto; default: the built-in tutorial, "
       "examples/tutorial/model.textproto)")
      ("batch-size", po::value<std::int64_t>()->notifier(at_least(std::int64_t{1})),
       "examples per step (overrides the spec's batch_size)")
      ("learning-rate", po::value<double>()->notifier(positive()),
       "a constant learning rate for every optimizer group (overrides the spec's)")
      ("shards", po::value<std::int64_t>()->notifier(at_least(std::int64_t{1})),
       "shard every variable into N (the spec's partitioner becomes fixed_shards: N)")
      ("init-seed", po::value<std::uint64_t>(), "seed of the initial values (overrides the spec's init_seed)");
}

void ModelFlags::add_training_options(po::options_description& opts) {
  opts.add_options()
      ("epochs", po::value<int>()->notifier(at_least(1)), "epochs (overrides the spec's training.epochs)")
      ("steps-per-epoch", po::value<std::int64_t>()->notifier(at_least(std::int64_t{0})),
       "steps per epoch; 0: one pass over the training data")
      ("steps-per-execution", po::value<std::int64_t>()->notifier(at_least(std::int64_t{1})), "steps each closure runs")
      ("eval-every", po::value<int>()->notifier(at_least(0)), "evaluate after every N epochs (0: only after training)")
      ("eval-steps", po::value<std::int64_t>()->notifier(at_least(std::int64_t{0})),
       "batches of a distributed evaluation; 0: one pass")
      ("eval-mode", value_or(&eval_mode, std::string("distributed"))->notifier(one_of({"distributed", "direct"})),
       "distributed (eval closures on the workers, metrics on a ps) or direct (on the coordinator, every record once)")
      ("mode", po::value<std::string>(),
       "async (any idle worker runs the next closure), ssp (no worker more than --staleness-bound closures ahead "
       "of the slowest live one) or sync (every step's gradients averaged on the ps, one update per step); "
       "overrides the spec's training.mode")
      ("staleness-bound", po::value<std::int64_t>(), "--mode ssp: closures a worker may run ahead of the slowest (>= 0)")
      ("backup-workers", po::value<std::int64_t>(),
       "--mode sync: a step is applied once workers - B of its closures completed; the late ones' gradients are "
       "dropped (0 <= B < workers)")
      ("ps-failure-policy", po::value<std::string>(),
       "what a ps failure does: raise (the run fails, as TensorFlow's), restore (wait for the ps to come back and "
       "reload only its shards from the newest checkpoint) or rollback (every ps back to the newest checkpoint); "
       "overrides the spec's training.ps_failure")
      ("visitation", po::value<std::string>(),
       "at-least-once (TensorFlow's: each worker's iterator over its shard) or exactly-once (every training record "
       "once per pass over the data whatever workers die); overrides the spec's training.visitation");
}

void ModelFlags::add_data_options(po::options_description& opts, bool with_train) {
  if (with_train)
    opts.add_options()("train-data", po::value(&train_data)->multitoken(),
                       "training data files (globs), or builtin:tutorial (the tutorial's generated records)")
        ("train-labels", po::value(&train_labels)->multitoken(), "IDX: the labels files of --train-data (globs)");
  opts.add_options()
      ("eval-data", po::value(&eval_data)->multitoken(), "evaluation data files (globs), or builtin:tutorial")
      ("eval-labels", po::value(&eval_labels)->multitoken(), "IDX: the labels files of --eval-data (globs)")
      ("format", value_or(&format, std::string("auto"))->notifier(one_of({"auto", "csv", "libsvm", "idx", "tfrecord"})),
       "auto (from the file names), csv, libsvm, idx or tfrecord")
      ("sharding", value_or(&sharding, std::string("auto"))->notifier(one_of({"auto", "file", "record", "none"})),
       "how files are divided among workers: auto, file, record or none")
      ("shuffle-buffer", value_or(&shuffle_buffer, std::int64_t{10000})->notifier(at_least(std::int64_t{0})),
       "training records shuffled together (0: in order)")
      ("csv-delimiter", value_or(&csv_delimiter, std::string(",")), "CSV: the field delimiter (one character)")
      ("skip-bad-records", po::bool_switch(&skip_bad_records),
       "pass over corrupt or mistyped records (counted in the summary) instead of stopping");
}

StatusOr<model::spec::ModelSpec> load_spec(const ModelFlags& f, const po::variables_map& vm, std::string* source) {
  model::LoadedSpec loaded = f.model_path.empty()
                                 ? model::parse_model_spec(tutorial::spec_text(), tutorial::kSpecFileName)
                                 : model::load_model_spec_file(f.model_path);
  if (!loaded.ok()) return absl::InvalidArgumentError(loaded.error_text());
  if (source)
    *source = f.model_path.empty() ? std::string("the built-in tutorial (") + tutorial::kSpecFileName + ")" : f.model_path;
  model::spec::ModelSpec spec = std::move(loaded.spec);
  if (auto b = flag<std::int64_t>(vm, "batch-size")) {
    if (*b < 1 || *b > (1 << 30)) return bad_flag("--batch-size must be a positive count");
    spec.set_batch_size(static_cast<std::int32_t>(*b));
  }
  if (auto lr = flag<double>(vm, "learning-rate")) {
    if (!(*lr > 0)) return bad_flag("--learning-rate must be positive");
    if (spec.optimizer_size() == 0) spec.add_optimizer()->mutable_sgd();
    for (auto& g : *spec.mutable_optimizer()) g.mutable_learning_rate()->set_constant(*lr);
  }
  if (auto shards = flag<std::int64_t>(vm, "shards")) {
    if (*shards < 1) return bad_flag("--shards must be at least 1");
    spec.mutable_partitioner()->set_fixed_shards(*shards);
  }
  if (auto seed = flag<std::uint64_t>(vm, "init-seed")) {
    spec.set_init_seed(*seed);
  } else if (f.model_path.empty() && vm.count("seed") && !vm["seed"].defaulted()) {
    // The built-in tutorial draws its initial values from the run's seed + 1,
    // as `twinps train --seed S` always has (the spec's init_seed 2 is seed 1's).
    spec.set_init_seed(f.seed + 1);
  }
  // Checked again with the overrides in.
  auto errors = model::validate_model_spec(spec, source ? *source : f.model_path);
  if (!errors.empty()) {
    std::string text;
    for (const auto& e : errors) text += (text.empty() ? "" : "\n") + e.to_string();
    return absl::InvalidArgumentError(text);
  }
  return spec;
}

StatusOr<ModelRun> load_model_run(const ModelFlags& f, const po::variables_map& vm, bool need_train_data) {
  ModelRun run;
  auto spec = load_spec(f, vm, &run.spec_source);
  if (!spec.ok()) return spec.status();
  run.spec = std::move(*spec);
  auto compiled = model::CompiledModel::compile(run.spec);
  if (!compiled.ok())
    return Status(compiled.status().code(), run.spec_source + ": " + std::string(compiled.status().message()));
  run.model = *compiled;

  // Training options: the spec's `training`, then the flags.
  const auto& t = run.spec.training();
  auto& o = run.options;
  o.epochs = flag<int>(vm, "epochs").value_or(t.epochs());
  o.steps_per_epoch = flag<std::int64_t>(vm, "steps-per-epoch").value_or(t.steps_per_epoch());
  o.steps_per_execution = flag<std::int64_t>(vm, "steps-per-execution").value_or(t.steps_per_execution());
  o.eval_every_epochs = flag<int>(vm, "eval-every").value_or(t.eval_every_epochs());
  o.eval_steps = flag<std::int64_t>(vm, "eval-steps").value_or(t.eval_steps());
  if (o.epochs < 1) return bad_flag("--epochs must be at least 1");
  if (o.steps_per_epoch < 0) return bad_flag("--steps-per-epoch must not be negative (0: one pass)");
  if (o.steps_per_execution < 1) return bad_flag("--steps-per-execution must be at least 1");
  if (o.eval_every_epochs < 0) return bad_flag("--eval-every must not be negative");
  if (o.eval_steps < 0) return bad_flag("--eval-steps must not be negative (0: one pass)");
  if (f.eval_mode == "distributed") {
    o.eval_mode = training::EvalMode::kDistributed;
  } else if (f.eval_mode == "direct") {
    o.eval_mode = training::EvalMode::kDirect;
  } else {
    return bad_flag("--eval-mode must be distributed or direct, not '" + f.eval_mode + "'");
  }
  if (f.shuffle_buffer < 0) return bad_flag("--shuffle-buffer must not be negative");
  {
    // Already checked in the spec (training.mode); the flags override it.
    const std::string mode = flag<std::string>(vm, "mode").value_or(t.mode());
    if (mode != "async" && mode != "ssp" && mode != "sync")
      return bad_flag("--mode must be async, ssp or sync, not '" + mode + "'");
    run.mode = mode == "ssp" ? TrainingMode::kSsp : mode == "sync" ? TrainingMode::kSync : TrainingMode::kAsync;
    const auto bound = flag<std::int64_t>(vm, "staleness-bound");
    if (bound && *bound < 0) return bad_flag("--staleness-bound must not be negative");
    if (bound && run.mode != TrainingMode::kSsp) return bad_flag("--staleness-bound is for --mode ssp only");
    run.staleness_bound = run.mode == TrainingMode::kSsp ? bound.value_or(t.staleness_bound()) : 0;
    // Fewer than the workers is checked by the command, which knows them (check_backup_workers).
    const auto backup = flag<std::int64_t>(vm, "backup-workers");
    if (backup && *backup < 0) return bad_flag("--backup-workers must not be negative");
    if (backup && run.mode != TrainingMode::kSync) return bad_flag("--backup-workers is for --mode sync only");
    run.backup_workers = run.mode == TrainingMode::kSync ? backup.value_or(t.backup_workers()) : 0;
  }
  {
    // Already checked in the spec (training.ps_failure); the flag overrides it.
    const std::string policy = flag<std::string>(vm, "ps-failure-policy").value_or(t.ps_failure());
    const auto parsed = parse_ps_failure_policy(policy);
    if (!parsed) return bad_flag("--ps-failure-policy must be raise, restore or rollback, not '" + policy + "'");
    run.ps_failure = *parsed;
    run.ps_recovery_wait = from_seconds(t.ps_recovery_wait_s());
  }
  {
    // Already checked in the spec (training.visitation); the flag overrides it.
    std::string visitation = t.visitation() == "exactly_once" ? "exactly-once" : "at-least-once";
    if (auto v = flag<std::string>(vm, "visitation")) visitation = *v;
    if (visitation != "at-least-once" && visitation != "exactly-once")
      return bad_flag("--visitation must be at-least-once or exactly-once, not '" + visitation + "'");
    if (visitation == "exactly-once") {
      if (run.ps_failure != PsFailurePolicy::kRaise)
        return bad_flag("--visitation exactly-once needs --ps-failure-policy raise (a restore or rollback takes "
                        "applied records back)");
      if (run.backup_workers > 0)
        return bad_flag("--visitation exactly-once cannot have --backup-workers (their late gradients are dropped, "
                        "and their examples with them)");
      o.visitation = training::Visitation::kExactlyOnce;
    }
    o.data_seed = f.seed;
    o.shuffle_records = f.shuffle_buffer > 0;
  }

  // Data: the tutorial's generated records by default for the built-in tutorial.
  std::vector<std::string> train_patterns = f.train_data, eval_patterns = f.eval_data;
  if (f.model_path.empty() && train_patterns.empty() && vm.count("train-data") == 0) {
    train_patterns = {kBuiltinTutorialData};
    if (eval_patterns.empty()) eval_patterns = {kBuiltinTutorialData};
  }
  if (train_patterns.empty() && need_train_data)
    return bad_flag("--train-data is required with --model (files, or " + std::string(kBuiltinTutorialData) + ")");
  if (!train_patterns.empty()) {
    auto source = data_source(f, *run.model, train_patterns, f.train_labels, false, "--train-data", nullptr);
    if (!source.ok()) return source.status();
    TWINPS_RETURN_IF_ERROR(probe_data(*run.model, *source, "--train-data"));
    run.train = std::move(*source);
  }
  if (!eval_patterns.empty()) {
    std::string metadata;
    auto source = data_source(f, *run.model, eval_patterns, f.eval_labels, true, "--eval-data", &metadata);
    if (!source.ok()) return source.status();
    TWINPS_RETURN_IF_ERROR(probe_data(*run.model, *source, "--eval-data"));
    run.eval = std::move(*source);
    run.checkpoint_metadata[kEvalDataKey] = metadata;
  }
  return run;
}

StatusOr<ModelRun> load_spec_and_data(const std::string& model_path, std::vector<std::string> train_data,
                                      std::vector<std::string> train_labels) {
  ModelFlags flags;
  flags.model_path = model_path;
  flags.train_data = std::move(train_data);
  flags.train_labels = std::move(train_labels);
  return load_model_run(flags, po::variables_map{}, /*need_train_data=*/true);
}

Status probe_data(const model::CompiledModel& model, const training::DataSource& source, const std::string& flag) {
  FunctionRegistry registry;
  training::register_data_functions(registry);
  auto data = training::LocalData::open(registry, source, training::DatasetRequest{1, model.batch_size(), 1, false},
                                        RandomStream(0));
  if (!data.ok()) return Status(data.status().code(), flag + ": " + std::string(data.status().message()));
  auto batch = data->next();
  if (!batch.ok()) return Status(batch.status().code(), flag + ": " + std::string(batch.status().message()));
  auto features = model.graph().features().map(data->schema(), *batch);
  if (!features.ok())
    return Status(features.status().code(), flag + ": " + std::string(features.status().message()));
  return absl::OkStatus();
}

StatusOr<training::DataSource> data_from_metadata(const std::string& text) {
  const std::string tutorial_prefix = std::string(kBuiltinTutorialData) + ":";
  if (text.rfind(tutorial_prefix, 0) == 0) {
    const std::string rest = text.substr(tutorial_prefix.size());
    const auto colon = rest.find(':');
    if (colon == std::string::npos) return absl::InvalidArgumentError("bad tutorial data description '" + text + "'");
    std::uint64_t seed = 0;
    std::int64_t records = 0;
    if (!absl::SimpleAtoi(rest.substr(0, colon), &seed) || !absl::SimpleAtoi(rest.substr(colon + 1), &records) ||
        records < 1)
      return absl::InvalidArgumentError("bad tutorial data description '" + text + "'");
    return training::tutorial_data(seed, records, 0);
  }
  if (text.rfind(kFilesPrefix, 0) == 0) {
    data::FileDatasetSpec spec;
    if (!google::protobuf::TextFormat::ParseFromString(text.substr(sizeof(kFilesPrefix) - 1), &spec))
      return absl::InvalidArgumentError("the checkpoint's evaluation data description does not parse");
    return training::file_data(spec);
  }
  return absl::InvalidArgumentError("unknown evaluation data description '" + text.substr(0, 40) + "'");
}

void print_error(const char* command, const Status& status) {
  const std::string message(status.message());
  std::size_t start = 0;
  while (start <= message.size()) {
    const auto end = message.find('\n', start);
    const std::string line = message.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!line.empty()) std::fprintf(stderr, "twinps %s: %s\n", command, line.c_str());
    if (end == std::string::npos) break;
    start = end + 1;
  }
}

int exit_code_for(const Status& status) {
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kDataLoss:
    case StatusCode::kFailedPrecondition: return kExitBadInput;
    default: return kExitFailed;
  }
}

}  // namespace twinps::cli
