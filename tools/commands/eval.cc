// twinps eval: the side-car evaluator. It follows a checkpoint directory and
// evaluates every new checkpoint on the evaluation data, on this machine
// (no parameter server: the checkpoint holds every variable), and stops
// after the checkpoint of the last epoch (or a timeout). It never talks to
// the training cluster. What it needs comes from the checkpoint the trainer
// wrote — the model spec, the evaluation data, the epoch count — unless a
// flag says otherwise (--model, --eval-data, --epochs).
#include <chrono>
#include <cstdio>
#include <set>
#include <thread>

#include <google/protobuf/text_format.h>

#include "core/checkpoint/checkpoint_manager.h"
#include "core/model/spec_loader.h"
#include "core/training/model_functions.h"
#include "core/training/trainer.h"
#include "tools/cli.h"
#include "tools/commands/commands.h"
#include "tools/training_flags.h"

namespace twinps::cli {

namespace {

// What evaluating a checkpoint takes, read from the first checkpoint (or the flags).
struct Evaluator {
  std::shared_ptr<const model::CompiledModel> model;
  model::CompiledModel::Variables variables;  // on one ps: restoring reshards every variable there
  training::DataSource data;
  int epochs = 0;
};

StatusOr<Evaluator> make_evaluator(const ModelFlags& flags, const po::variables_map& vm,
                                   const std::map<std::string, std::string>& metadata) {
  Evaluator e;
  model::spec::ModelSpec spec;
  auto from_metadata = metadata.find(training::Trainer::kSpecKey);
  if (vm.count("model") || from_metadata == metadata.end()) {
    auto loaded = load_spec(flags, vm);
    if (!loaded.ok()) return loaded.status();
    spec = std::move(*loaded);
  } else {
    model::LoadedSpec loaded = model::parse_model_spec(from_metadata->second, "the checkpoint's model spec");
    if (!loaded.ok()) return absl::InvalidArgumentError(loaded.error_text());
    spec = std::move(loaded.spec);
  }
  auto compiled = model::CompiledModel::compile(spec);
  if (!compiled.ok()) return compiled.status();
  e.model = *compiled;
  auto variables = e.model->build_variables(1);
  if (!variables.ok()) return variables.status();
  e.variables = std::move(*variables);
  if (vm.count("eval-data")) {
    // Read as `twinps train` would read it, with this model's columns.
    auto run = load_model_run(flags, vm, /*need_train_data=*/false);
    if (!run.ok()) return run.status();
    if (!run->eval) return absl::InvalidArgumentError("--eval-data names no data");
    e.data = *run->eval;
  } else if (auto d = metadata.find(kEvalDataKey); d != metadata.end()) {
    auto data = data_from_metadata(d->second);
    if (!data.ok()) return data.status();
    e.data = std::move(*data);
  } else {
    return absl::InvalidArgumentError("the checkpoints name no evaluation data (train with --eval-data), "
                                      "and --eval-data is not given");
  }
  auto epochs = metadata.find(training::Trainer::kEpochsKey);
  e.epochs = vm.count("epochs") ? vm["epochs"].as<int>()
             : epochs != metadata.end() ? std::atoi(epochs->second.c_str())
                                       : 0;
  return e;
}

StatusOr<model::MetricValues> evaluate(const Evaluator& e, const std::vector<ShardState>& shards) {
  FunctionRegistry registry;
  training::register_data_functions(registry);
  auto data = training::LocalData::open(registry, e.data,
                                        training::DatasetRequest{1, e.model->batch_size(), 1, false}, RandomStream(0));
  if (!data.ok()) return data.status();
  const auto values = training::full_values(e.variables.layouts, shards);
  model::LocalEvaluator evaluator(e.model);
  for (;;) {
    auto batch = data->next();
    if (!batch.ok()) {
      if (batch.status().code() == StatusCode::kOutOfRange) break;
      return batch.status();
    }
    TWINPS_RETURN_IF_ERROR(evaluator.add(values, data->schema(), *batch));
  }
  return evaluator.result();
}

std::string metrics_text(const model::MetricValues& m) {
  std::string out;
  if (m.accuracy) out += format("accuracy %f", *m.accuracy);
  if (m.auc) out += format("%sauc %f", out.empty() ? "" : ", ", *m.auc);
  out += format("%sloss %f", out.empty() ? "" : ", ", m.loss);
  return out;
}

}  // namespace

int run_eval(int argc, char** argv) {
  std::string dir;
  ModelFlags flags;
  double timeout = 600, poll = 0.2;
  po::options_description opts("twinps eval options");
  opts.add_options()("help,h", "show this help")
      ("checkpoint-dir", po::value(&dir)->required(), "directory the training run saves checkpoints in")
      ("epochs", po::value<int>(), "stop after evaluating the checkpoint of this epoch count (default: the run's)")
      ("seed", po::value(&flags.seed)->default_value(1), "with --eval-data builtin:tutorial: the training run's seed")
      ("timeout", po::value(&timeout)->default_value(600), "seconds to wait for the last checkpoint")
      ("poll", po::value(&poll)->default_value(0.2), "seconds between looks at the directory");
  flags.add_model_options(opts);
  flags.add_data_options(opts, /*with_train=*/false);
  po::variables_map vm;
  if (int rc = parse(argc, argv, "usage: twinps eval --checkpoint-dir DIR [--model M] [--eval-data GLOB] [options]",
                     opts, vm);
      rc >= 0)
    return rc;
  std::optional<Evaluator> evaluator;
  const auto start = std::chrono::steady_clock::now();
  std::set<std::string> done;
  for (;;) {
    auto storage = LocalDiskStorage::open(dir, /*create=*/false);
    if (storage.ok()) {
      CheckpointManager manager(**storage, 0);
      auto list = manager.list();
      for (const auto& info : list.ok() ? *list : std::vector<CheckpointInfo>{}) {
        if (done.count(info.name)) continue;
        if (!evaluator) {
          // The first checkpoint says what to evaluate (with --model and
          // --eval-data, it only needs to hold the model's variables).
          auto probe = manager.restore(info.name, {}, OptimizerConfig{});
          std::map<std::string, std::string> metadata;
          if (probe.ok()) metadata = probe->metadata;
          auto made = make_evaluator(flags, vm, metadata);
          if (!made.ok()) {
            print_error("eval", made.status());
            return kExitBadInput;
          }
          evaluator = std::move(*made);
        }
        auto restored = manager.restore(info.name, evaluator->variables.layouts, evaluator->variables.optimizer);
        if (!restored.ok()) {
          // Training may delete an old checkpoint (keep-N) while we read it, or
          // a file may be damaged: say so and go on with the next one.
          std::fprintf(stderr, "twinps eval: skipped %s: %s\n", info.name.c_str(), describe(restored.status()).c_str());
          done.insert(info.name);
          continue;
        }
        auto metrics = evaluate(*evaluator, restored->shards);
        if (!metrics.ok()) {
          print_error("eval", metrics.status());
          return exit_code_for(metrics.status());
        }
        const auto epoch_it = restored->metadata.find(training::Trainer::kEpochKey);
        // A checkpoint saved within an epoch (--checkpoint-every-steps/-seconds) names no epoch.
        const int epoch = epoch_it == restored->metadata.end() ? -1 : std::atoi(epoch_it->second.c_str());
        const std::string when = epoch < 0 ? "within an epoch" : "epoch " + std::to_string(epoch);
        std::printf("Evaluated %s (%s, iterations %lld): %s\n", info.name.c_str(), when.c_str(),
                    static_cast<long long>(restored->step), metrics_text(*metrics).c_str());
        std::fflush(stdout);
        done.insert(info.name);
        if (evaluator->epochs > 0 && epoch + 1 >= evaluator->epochs) return kExitOk;
      }
    }
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > timeout) {
      std::fprintf(stderr, "twinps eval: no checkpoint of the last epoch in '%s' within %.0f s\n", dir.c_str(), timeout);
      return kExitFailed;
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(poll));
  }
}

}  // namespace twinps::cli
