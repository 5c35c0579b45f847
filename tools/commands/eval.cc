// twinps eval: the side-car evaluator (TensorFlow's evaluator task). It
// follows a checkpoint directory, evaluates every new checkpoint of the
// tutorial model on the evaluation examples, and stops after the checkpoint
// of the run's last epoch (or a timeout). It never talks to the training
// cluster: what it needs — the model's configuration, the seeds the
// evaluation examples derive from, the run's epoch count — it reads from each
// checkpoint's metadata, which `twinps train` records.
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
#include <set>
#include <thread>

#include "core/checkpoint/checkpoint_manager.h"
#include "core/models/tutorial/run_metadata.h"
#include "core/models/tutorial/tutorial.h"
#include "tools/cli.h"
#include "tools/commands/commands.h"
#include "tools/tf_config.h"

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

// A checkpoint evaluated: the line users read, and whether it is the run's last.
struct Evaluation {
  bool last = false;
  int epochs = 0;  // of the run, as its metadata says
};

// Reads `name`'s metadata, rebuilds the model it describes, restores the
// checkpoint into one full-size shard per variable and prints its accuracy.
StatusOr<Evaluation> evaluate(const CheckpointManager& manager, const std::string& name) {
  // First the metadata alone (no variables asked for), to learn the model.
  auto header = manager.restore(name, {}, OptimizerConfig{});
  if (!header.ok()) return header.status();
  auto config = tutorial::config_from_metadata(header->metadata);
  if (!config.ok()) return config.status();
  // One ps, no partitioner: restoring reshards every variable into a single
  // full-size shard, whatever the training cluster's layout was.
  config->num_shards = 1;
  auto model = tutorial::build_model(1, *config);
  if (!model.ok()) return model.status();
  auto restored = manager.restore(name, model->variables, model->optimizer);
  if (!restored.ok()) return restored.status();
  auto value = [&](const char* variable) -> const Matrix* {
    for (const auto& v : model->variables) {
      if (v.name != variable) continue;
      for (const auto& s : restored->shards)
        if (s.spec.id == v.shards.front().id) return &s.value;
    }
    return nullptr;
  };
  const Matrix* embedding = value(tutorial::kEmbedding);
  const Matrix* kernel = value(tutorial::kKernel);
  const Matrix* bias = value(tutorial::kBias);
  if (!embedding || !kernel || !bias) return absl::DataLossError("a variable of the tutorial model is missing");
  const double acc = tutorial::accuracy(*embedding, *kernel, (*bias)(0, 0), tutorial::eval_examples(*config));
  const auto epoch_it = restored->metadata.find("epoch");
  // A checkpoint saved within an epoch (--checkpoint-every-steps/-seconds) names no epoch.
  const int epoch = epoch_it == restored->metadata.end() ? -1 : std::atoi(epoch_it->second.c_str());
  const std::string when = epoch < 0 ? "within an epoch" : "epoch " + std::to_string(epoch);
  std::printf("Evaluated %s (%s, iterations %lld): accuracy %f\n", name.c_str(), when.c_str(),
              static_cast<long long>(restored->step), acc);
  std::fflush(stdout);
  return Evaluation{epoch + 1 >= config->epochs, config->epochs};
}

}  // namespace

int run_eval(int argc, char** argv) {
  std::string dir, tf_config;
  double timeout = 600, poll = 0.2, progress_every = 10;
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
       "seconds between \"still waiting\" lines on stderr");
  po::variables_map vm;
  if (int rc = parse(argc, argv,
                     "usage: twinps eval --checkpoint-dir DIR [options]\n"
                     "Evaluates each new checkpoint of a `twinps train` run as it appears, and stops after the\n"
                     "checkpoint of the run's last epoch. The model, the evaluation examples' seed and the epoch\n"
                     "count come from the checkpoints' metadata.",
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
  const std::string who = task->empty() ? "" : *task + ": ";
  std::fprintf(stderr, "twinps eval: %sfollowing checkpoints in %s until the run's last epoch is saved (at most %s s)\n",
               who.c_str(), dir.c_str(), shown(timeout).c_str());

  const auto start = Clock::now();
  auto last_said = start;
  std::set<std::string> done;
  std::string last_evaluated;
  int epochs = 0;  // the run's, once a checkpoint said it
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
        auto evaluated = evaluate(manager, info.name);
        if (!evaluated.ok()) {
          // Training may delete an old checkpoint (keep-N) while we read it, or
          // a file may be damaged or not the tutorial's: say so and go on.
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
      waiting_for = last_evaluated.empty()
                        ? "a checkpoint in " + dir + " (none yet)"
                        : format("the checkpoint of epoch %d, the run's last (newest evaluated: %s)", epochs - 1,
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
