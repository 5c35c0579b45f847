#pragma once
// The flags every command that runs a model shares (train, sim, eval, tune):
// which model spec (--model, default the built-in tutorial), overrides of
// its fields, and where its data is. Flags override the spec; the result is
// one spec, compiled, with the data sources and the trainer's options.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/coordinator/training_mode.h"
#include "core/model/compiled_model.h"
#include "core/runtime/status.h"
#include "core/training/data_source.h"
#include "core/training/trainer.h"
#include "tools/cli.h"

namespace twinps::cli {

// The value of --train-data / --eval-data that means the tutorial's generated records.
inline constexpr char kBuiltinTutorialData[] = "builtin:tutorial";

struct ModelFlags {
  std::string model_path;  // empty: the built-in tutorial
  std::vector<std::string> train_data, eval_data, train_labels, eval_labels;
  std::string format = "auto";
  std::string sharding = "auto";
  std::string csv_delimiter = ",";
  std::int64_t shuffle_buffer = 10000;
  std::string eval_mode = "distributed";
  bool skip_bad_records = false;
  std::uint64_t seed = 1;  // data (the tutorial's records, shuffles)

  // --model and the spec overrides (--batch-size, --learning-rate, --shards, --init-seed).
  void add_model_options(po::options_description& opts);
  // --epochs, --steps-per-epoch, --steps-per-execution, --eval-every, --eval-steps, --eval-mode,
  // --mode, --staleness-bound, --backup-workers, --ps-failure-policy.
  void add_training_options(po::options_description& opts);
  // --train-data, --eval-data and how to read them.
  void add_data_options(po::options_description& opts, bool with_train = true);
};

struct ModelRun {
  model::spec::ModelSpec spec;  // with the flags applied: what every worker gets
  std::string spec_source;      // the file, or "the built-in tutorial (examples/tutorial/model.textproto)"
  std::shared_ptr<const model::CompiledModel> model;
  std::optional<training::DataSource> train;
  std::optional<training::DataSource> eval;
  // Epochs, steps and evaluation from the spec's `training` and the flags;
  // the caller adds checkpoints and progress.
  training::TrainerOptions options;
  // The spec's training.mode and staleness_bound, then --mode and
  // --staleness-bound: what the coordinator is given.
  TrainingMode mode = TrainingMode::kAsync;
  std::int64_t staleness_bound = 0;
  // The spec's training.backup_workers, then --backup-workers (mode sync).
  std::int64_t backup_workers = 0;
  // The spec's training.ps_failure, then --ps-failure-policy; and its
  // training.ps_recovery_wait_s.
  PsFailurePolicy ps_failure = PsFailurePolicy::kRaise;
  Duration ps_recovery_wait = 60 * kSecond;
  // Where the evaluation data is, for checkpoints (a side-car evaluator reads it).
  std::map<std::string, std::string> checkpoint_metadata;
};

// Reads the spec and builds the data sources the flags name (when
// `need_train_data`, training data is required with --model). INVALID_ARGUMENT
// or NOT_FOUND with a message naming the file, field, flag or record
// (several lines for a spec with several problems): the caller prints it
// and exits 2.
StatusOr<ModelRun> load_model_run(const ModelFlags& flags, const po::variables_map& vm, bool need_train_data);
// A spec file (empty: the built-in tutorial) and its training data, loaded as
// `twinps train --model PATH --train-data ... [--train-labels ...]` loads
// them, every other flag at its default.
StatusOr<ModelRun> load_spec_and_data(const std::string& model_path, std::vector<std::string> train_data,
                                      std::vector<std::string> train_labels = {});

// The spec alone: --model's file or the built-in tutorial, with the overrides.
StatusOr<model::spec::ModelSpec> load_spec(const ModelFlags& flags, const po::variables_map& vm,
                                           std::string* source = nullptr);

// Reads the first batch of `source` and maps it through the model's input
// layer, so that a column missing or of the wrong type fails before any
// closure runs, naming the file, the column and the record.
Status probe_data(const model::CompiledModel& model, const training::DataSource& source, const std::string& flag);

// The checkpoint metadata key holding the evaluation data, and the data it describes.
inline constexpr char kEvalDataKey[] = "eval_data";
StatusOr<training::DataSource> data_from_metadata(const std::string& text);

// Prints a Status's message line by line as "twinps CMD: line" on stderr.
void print_error(const char* command, const Status& status);

// Exit code for an error out of training: 2 for bad input (data, model,
// checkpoints that do not fit), 1 otherwise.
int exit_code_for(const Status& status);

}  // namespace twinps::cli
