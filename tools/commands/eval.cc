// twinps eval: the side-car evaluator. It follows a checkpoint directory,
// evaluates every new checkpoint of the tutorial model on the evaluation
// examples, and stops after the checkpoint of the last epoch (or a timeout).
// It never talks to the training cluster.
#include <chrono>
#include <cstdio>
#include <set>
#include <thread>

#include "core/checkpoint/checkpoint_manager.h"
#include "core/models/tutorial/tutorial.h"
#include "core/variables/placement.h"
#include "tools/cli.h"
#include "tools/commands/commands.h"

namespace twinps::cli {

int run_eval(int argc, char** argv) {
  std::string dir;
  tutorial::Config config;
  std::uint64_t seed = 1;
  double timeout = 600, poll = 0.2;
  po::options_description opts("twinps eval options");
  opts.add_options()("help,h", "show this help")
      ("checkpoint-dir", po::value(&dir)->required(), "directory the training run saves checkpoints in")
      ("epochs", po::value(&config.epochs)->default_value(4), "stop after evaluating the checkpoint of this epoch count")
      ("seed", po::value(&seed)->default_value(1), "seed of the training run (the evaluation examples derive from it)")
      ("timeout", po::value(&timeout)->default_value(600), "seconds to wait for the last checkpoint")
      ("poll", po::value(&poll)->default_value(0.2), "seconds between looks at the directory");
  po::variables_map vm;
  if (int rc = parse(argc, argv, "usage: twinps eval --checkpoint-dir DIR [options]", opts, vm); rc >= 0) return rc;
  config.data_seed = seed;
  config.init_seed = seed + 1;
  // One ps, no partitioner: restoring reshards every variable into a single
  // full-size shard, whatever the training cluster's layout was.
  config.num_shards = 1;
  auto model = tutorial::build_model(1, config);
  if (!model.ok()) {
    std::fprintf(stderr, "twinps eval: %s\n", describe(model.status()).c_str());
    return kExitBadInput;
  }
  auto find = [&](const char* name) -> const VariableLayout& {
    for (const auto& v : model->variables)
      if (v.name == name) return v;
    std::abort();
  };
  const auto examples = tutorial::eval_examples(config);
  const auto start = std::chrono::steady_clock::now();
  std::set<std::string> done;
  for (;;) {
    auto storage = LocalDiskStorage::open(dir, /*create=*/false);
    if (storage.ok()) {
      CheckpointManager manager(**storage, 0);
      auto list = manager.list();
      for (const auto& info : list.ok() ? *list : std::vector<CheckpointInfo>{}) {
        if (done.count(info.name)) continue;
        auto restored = manager.restore(info.name, model->variables, model->optimizer);
        if (!restored.ok()) {
          // Training may delete an old checkpoint (keep-N) while we read it, or
          // a file may be damaged: say so and go on with the next one.
          std::fprintf(stderr, "twinps eval: skipped %s: %s\n", info.name.c_str(), describe(restored.status()).c_str());
          done.insert(info.name);
          continue;
        }
        auto value = [&](const char* name) -> const Matrix& {
          const ShardId id = find(name).shards.front().id;
          for (const auto& s : restored->shards)
            if (s.spec.id == id) return s.value;
          std::abort();
        };
        const double acc = tutorial::accuracy(value(tutorial::kEmbedding), value(tutorial::kKernel),
                                              value(tutorial::kBias)(0, 0), examples);
        const auto epoch_it = restored->metadata.find("epoch");
        // A checkpoint saved within an epoch (--checkpoint-every-steps/-seconds) names no epoch.
        const int epoch = epoch_it == restored->metadata.end() ? -1 : std::atoi(epoch_it->second.c_str());
        const std::string when = epoch < 0 ? "within an epoch" : "epoch " + std::to_string(epoch);
        std::printf("Evaluated %s (%s, iterations %lld): accuracy %f\n", info.name.c_str(), when.c_str(),
                    static_cast<long long>(restored->step), acc);
        std::fflush(stdout);
        done.insert(info.name);
        if (epoch + 1 >= config.epochs) return kExitOk;
      }
    }
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > timeout) {
      std::fprintf(stderr, "twinps eval: no checkpoint of epoch %d in '%s' within %.0f s\n", config.epochs - 1,
                   dir.c_str(), timeout);
      return kExitFailed;
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(poll));
  }
}

}  // namespace twinps::cli
