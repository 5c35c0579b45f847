// twinps eval: the side-car evaluator (TensorFlow's evaluator task). It
// follows a checkpoint directory, evaluates every new checkpoint on the
// evaluation data on this machine (no parameter server: a checkpoint holds
// every variable, resharded into one full-size shard each), and stops after
// the checkpoint of the run's last epoch (or a timeout). It never talks to
// the training cluster: what it needs — the model spec, the evaluation data,
// the run's epoch count — it reads from each checkpoint's metadata, which
// the trainer records (core/training/trainer.h), unless a flag says
// otherwise (--model, --eval-data, --epochs).
//
// TF_CONFIG (or --tf-config) is optional; when given, its task must be the
// evaluator (type "evaluator"), which may leave the cluster out. It names no
// checkpoint directory (neither does TensorFlow's), so --checkpoint-dir is
// always needed.
//
// While it waits it says on stderr what for, and again every
// --progress-every seconds, so a mistyped directory is noticed at once.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include <absl/strings/numbers.h>

#include "core/checkpoint/checkpoint_manager.h"
#include "core/model/spec_loader.h"
#include "core/training/model_functions.h"
#include "core/training/trainer.h"
#include "tools/cli.h"
#include "tools/commands/commands.h"
#include "tools/tf_config.h"
#include "tools/training_flags.h"

namespace twinps::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// This task's name from TF_CONFIG ("evaluator:0"); an empty string when there
// is no TF_CONFIG; an error (bad input) when it is malformed or names another task.
StatusOr<std::string> evaluator_task(const std::string& tf_config_flag) {
  if (tf_config_flag.empty() && !std::getenv("TF_CONFIG")) return std::string();
  auto tfc = load_tf_config(tf_config_flag);
  if (!tfc.ok()) return tfc.status();
  if (!tfc->task) return std::string("evaluator");
  if (tfc->task->job != Job::kEvaluator)
    return absl::InvalidArgumentError(
        "TF_CONFIG's task is " + tfc->task->short_name() + "; twinps eval runs the evaluator task (type \"evaluator\"); " +
        (tfc->task->job == Job::kChief ? "the chief runs twinps train" : "ps and worker tasks run twinps serve"));
  return tfc->task->short_name();
}

// What evaluating a checkpoint takes: the model, its variables on one ps, the
// data, the run's epoch count. Built from a checkpoint's metadata (and the
// flags), again only when another checkpoint describes another run.
struct Evaluator {
  std::string described_by;  // the metadata it was built from (spec + data)
  std::shared_ptr<const model::CompiledModel> model;
  model::CompiledModel::Variables variables;
  training::DataSource data;
  int epochs = 0;  // 0: unknown (evaluate until the timeout)
};

std::string metadata_value(const std::map<std::string, std::string>& m, const std::string& key) {
  auto it = m.find(key);
  return it == m.end() ? std::string() : it->second;
}

StatusOr<Evaluator> make_evaluator(const ModelFlags& flags, const po::variables_map& vm,
                                   const std::map<std::string, std::string>& metadata) {
  const std::string spec_text = metadata_value(metadata, training::Trainer::kSpecKey);
  const std::string data_text = metadata_value(metadata, kEvalDataKey);
  if (!vm.count("model") && spec_text.empty())
    return absl::InvalidArgumentError(std::string("records no training configuration (no \"") +
                                      training::Trainer::kSpecKey + "\": not saved by twinps train; give --model)");
  Evaluator e;
  e.described_by = spec_text + "\n" + data_text;
  model::spec::ModelSpec spec;
  if (vm.count("model")) {
    auto loaded = load_spec(flags, vm);
    if (!loaded.ok()) return loaded.status();
    spec = std::move(*loaded);
  } else {
    model::LoadedSpec loaded = model::parse_model_spec(spec_text, "the checkpoint's model spec");
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
  } else if (!data_text.empty()) {
    auto data = data_from_metadata(data_text);
    if (!data.ok()) return data.status();
    e.data = std::move(*data);
  } else {
    return absl::InvalidArgumentError(
        "the checkpoint names no evaluation data (the run had no --eval-data): give --eval-data");
  }
  if (vm.count("epochs")) {
    e.epochs = vm["epochs"].as<int>();
  } else if (int epochs = 0; absl::SimpleAtoi(metadata_value(metadata, training::Trainer::kEpochsKey), &epochs)) {
    e.epochs = epochs;
  }
  return e;
}

StatusOr<model::MetricValues> evaluate_values(const Evaluator& e, const std::vector<ShardState>& shards) {
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

// A checkpoint evaluated: whether it is the run's last, and the run's epoch count.
struct Evaluation {
  bool last = false;
  int epochs = 0;
};

// Reads `name`'s metadata, (re)builds the evaluator it describes, restores
// the checkpoint and prints its metrics.
StatusOr<Evaluation> evaluate(const CheckpointManager& manager, const std::string& name, const ModelFlags& flags,
                              const po::variables_map& vm, std::optional<Evaluator>& evaluator) {
  // First the metadata alone (no variables asked for), to learn the run.
  auto header = manager.restore(name, {}, OptimizerConfig{});
  if (!header.ok()) return header.status();
  const std::string described_by = metadata_value(header->metadata, training::Trainer::kSpecKey) + "\n" +
                                   metadata_value(header->metadata, kEvalDataKey);
  if (!evaluator || evaluator->described_by != described_by) {
    auto made = make_evaluator(flags, vm, header->metadata);
    if (!made.ok()) return made.status();
    evaluator = std::move(*made);
  }
  auto restored = manager.restore(name, evaluator->variables.layouts, evaluator->variables.optimizer);
  if (!restored.ok()) return restored.status();
  auto metrics = evaluate_values(*evaluator, restored->shards);
  if (!metrics.ok()) return metrics.status();
  int epoch = -1;  // a checkpoint saved within an epoch (--checkpoint-every-steps/-seconds) names none
  if (!absl::SimpleAtoi(metadata_value(restored->metadata, training::Trainer::kEpochKey), &epoch)) epoch = -1;
  const std::string when = epoch < 0 ? "within an epoch" : "epoch " + std::to_string(epoch);
  std::printf("Evaluated %s (%s, iterations %lld): %s\n", name.c_str(), when.c_str(),
              static_cast<long long>(restored->step), metrics_text(*metrics).c_str());
  std::fflush(stdout);
  return Evaluation{evaluator->epochs > 0 && epoch + 1 >= evaluator->epochs, evaluator->epochs};
}

}  // namespace

int run_eval(int argc, char** argv) {
  std::string dir, tf_config;
  double timeout = 600, poll = 0.2, progress_every = 10;
  ModelFlags flags;
  po::options_description opts("twinps eval options");
  opts.add_options()("help,h", "show this help")
      ("checkpoint-dir", po::value(&dir), "directory the training run saves checkpoints in (twinps train --checkpoint-dir)")
      ("tf-config", po::value(&tf_config),
       "TF_CONFIG JSON of this evaluator task (default: the TF_CONFIG variable, if set); its task type must be "
       "\"evaluator\"")
      ("timeout", value_or(&timeout, timeout)->notifier(positive()),
       "seconds to wait for the checkpoint of the run's last epoch")
      ("poll", value_or(&poll, poll)->notifier(positive()), "seconds between looks at the directory")
      ("progress-every", value_or(&progress_every, progress_every)->notifier(positive()),
       "seconds between \"still waiting\" lines on stderr")
      ("epochs", po::value<int>()->notifier(at_least(1)),
       "stop after evaluating the checkpoint of this epoch count (default: the run's, from the checkpoints)")
      ("seed", value_or(&flags.seed, std::uint64_t{1}),
       "with --eval-data builtin:tutorial: the training run's seed");
  flags.add_model_options(opts);
  flags.add_data_options(opts, /*with_train=*/false);
  po::variables_map vm;
  if (int rc = parse(argc, argv,
                     "usage: twinps eval --checkpoint-dir DIR [--model M.textproto] [--eval-data GLOB] [options]\n"
                     "Evaluates each new checkpoint of a `twinps train` run as it appears, and stops after the\n"
                     "checkpoint of the run's last epoch. The model spec, the evaluation data and the epoch count\n"
                     "come from the checkpoints' metadata unless --model, --eval-data or --epochs say otherwise.",
                     opts, vm);
      rc >= 0)
    return rc;
  auto task = evaluator_task(tf_config);
  if (!task.ok()) {
    std::fprintf(stderr, "twinps eval: %s\n", std::string(task.status().message()).c_str());
    return kExitBadInput;
  }
  if (dir.empty()) {
    std::fprintf(stderr,
                 "twinps eval: --checkpoint-dir is required: the directory the chief saves to (twinps train "
                 "--checkpoint-dir DIR)%s\n(see twinps eval --help)\n",
                 task->empty() ? "" : "; TF_CONFIG names this task, not where the checkpoints are");
    return kExitBadInput;
  }
  if (vm.count("model")) {
    // A spec named on the command line is checked before waiting for anything.
    if (auto spec = load_spec(flags, vm); !spec.ok()) {
      print_error("eval", spec.status());
      return kExitBadInput;
    }
  }
  const std::string who = task->empty() ? "" : *task + ": ";
  std::fprintf(stderr, "twinps eval: %sfollowing checkpoints in %s until the run's last epoch is saved (at most %s s)\n",
               who.c_str(), dir.c_str(), shown(timeout).c_str());

  const auto start = Clock::now();
  auto last_said = start;
  std::set<std::string> done;
  std::string last_evaluated;
  std::optional<Evaluator> evaluator;
  int epochs = 0;     // the run's, once a checkpoint said it
  int announced = 0;  // the kind of wait last announced
  for (;;) {
    // What we wait for, in words, and which kind of wait it is (announced when it changes).
    std::string waiting_for;
    int kind = 0;
    std::error_code ec;
    if (!std::filesystem::exists(dir, ec)) {
      waiting_for = dir + " to appear (it does not exist)";
      kind = 1;
    } else if (auto storage = LocalDiskStorage::open(dir, /*create=*/false); !storage.ok()) {
      std::fprintf(stderr, "twinps eval: %s\n", describe(storage.status()).c_str());
      return kExitBadInput;
    } else {
      CheckpointManager manager(**storage, 0);
      auto list = manager.list();
      for (const auto& info : list.ok() ? *list : std::vector<CheckpointInfo>{}) {
        if (done.count(info.name)) continue;
        done.insert(info.name);
        auto evaluated = evaluate(manager, info.name, flags, vm, evaluator);
        if (!evaluated.ok()) {
          // Training may delete an old checkpoint (keep-N) while we read it, or
          // a file may be damaged or not a run's: say so and go on.
          std::fprintf(stderr, "twinps eval: skipped %s: %s\n", info.name.c_str(),
                       describe(evaluated.status()).c_str());
          continue;
        }
        last_evaluated = info.name;
        epochs = evaluated->epochs;
        if (evaluated->last) {
          std::fprintf(stderr, "twinps eval: %s is the checkpoint of the run's last epoch (%d of %d): done\n",
                       info.name.c_str(), epochs - 1, epochs);
          return kExitOk;
        }
      }
      waiting_for = last_evaluated.empty() ? "a checkpoint in " + dir + " (none yet)"
                    : epochs > 0 ? format("the checkpoint of epoch %d, the run's last (newest evaluated: %s)",
                                          epochs - 1, last_evaluated.c_str())
                                 : format("more checkpoints (the run's epoch count is unknown; newest evaluated: %s)",
                                          last_evaluated.c_str());
      kind = last_evaluated.empty() ? 2 : 3;
    }
    const double waited = seconds_since(start);
    if (kind != announced) {
      std::fprintf(stderr, "twinps eval: waiting for %s\n", waiting_for.c_str());
      announced = kind;
      last_said = Clock::now();
    } else if (std::chrono::duration<double>(Clock::now() - last_said).count() >= progress_every) {
      std::fprintf(stderr, "twinps eval: still waiting for %s: %.0f s of %s s\n", waiting_for.c_str(), waited,
                   shown(timeout).c_str());
      last_said = Clock::now();
    }
    if (waited >= timeout) {
      std::fprintf(stderr, "twinps eval: gave up after %s s (--timeout) waiting for %s\n", shown(timeout).c_str(),
                   waiting_for.c_str());
      return kExitFailed;
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(std::min(poll, std::max(0.0, timeout - waited))));
  }
}

}  // namespace twinps::cli
