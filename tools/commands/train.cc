// twinps train: the coordinator program — the tutorial model's training loop.
#include <cstdio>
#include <iostream>

#include "core/local/local_cluster.h"
#include "core/models/tutorial/tutorial.h"
#include "tools/cli.h"
#include "tools/commands/commands.h"

namespace twinps::cli {
namespace {

void print_epoch(const tutorial::EpochReport& e) {
  std::printf("Finished epoch %d, accuracy is %f.\n", e.epoch, e.accuracy);
  std::fflush(stdout);
}

void print_result(const tutorial::Result& r, const CoordinatorStats& stats, double sim_seconds) {
  std::printf("Final loss is %f\n", r.final_loss);
  std::printf("Evaluation accuracy: %f (direct), %f (distributed)\n", r.direct_eval_accuracy,
              r.distributed_eval_accuracy);
  Table t;
  t.row("closures scheduled", std::to_string(stats.scheduled));
  t.row("closures completed", std::to_string(stats.completed));
  t.row("closures retried", std::to_string(stats.retried));
  t.row("closures cancelled", std::to_string(stats.cancelled));
  t.row("worker failures", std::to_string(stats.worker_failures));
  if (sim_seconds >= 0) t.row("clock at the end", format("%.6f s", sim_seconds));
  std::printf("\nsummary:\n");
  t.print();
}

int train_in_memory(const tutorial::Config& config, const ClusterShape& shape, std::uint64_t seed) {
  FunctionRegistry registry;
  tutorial::register_functions(registry);
  LocalClusterOptions o;
  o.shape = shape;
  o.seed = seed;
  LocalCluster cluster(registry, o);
  auto model = tutorial::build_model(shape.ps, config);
  if (!model.ok()) {
    std::fprintf(stderr, "twinps train: %s\n", describe(model.status()).c_str());
    return kExitBadInput;
  }
  auto& c = cluster.coordinator();
  auto started = cluster.run(c.start(model->variables, model->optimizer, model->initial));
  if (!started || !started->ok()) {
    std::fprintf(stderr, "twinps train: %s\n", started ? describe(*started).c_str() : "the cluster did not start");
    return kExitFailed;
  }
  auto result = cluster.run(tutorial::train(c, config, 0, print_epoch));
  if (!result || !result->ok()) {
    std::fprintf(stderr, "twinps train: %s\n", result ? describe(result->status()).c_str() : "training did not finish");
    return kExitFailed;
  }
  print_result(**result, c.stats(), to_seconds(cluster.engine().now()));
  return kExitOk;
}

}  // namespace

int run_train(int argc, char** argv) {
  tutorial::Config config;
  ClusterShape shape{3, 2};
  std::uint64_t seed = 1;
  po::options_description opts("twinps train options");
  opts.add_options()("help,h", "show this help")
      ("in-memory", "run every task in this process on the deterministic in-memory transport")
      ("workers", po::value(&shape.workers)->default_value(3), "worker tasks")
      ("ps", po::value(&shape.ps)->default_value(2), "parameter-server tasks")
      ("epochs", po::value(&config.epochs)->default_value(4), "epochs")
      ("steps-per-epoch", po::value(&config.steps_per_epoch)->default_value(5), "steps scheduled per epoch")
      ("batch-size", po::value(&config.batch_size)->default_value(8), "examples per step")
      ("learning-rate", po::value(&config.learning_rate)->default_value(0.1), "RMSprop learning rate")
      ("shards", po::value(&config.num_shards)->default_value(-1), "FixedShardsPartitioner shards (default: --ps)")
      ("seed", po::value(&seed)->default_value(1), "seed of the run (data, initial values, shuffles)");
  po::variables_map vm;
  if (int rc = parse(argc, argv, "usage: twinps train --in-memory [options]", opts, vm); rc >= 0) return rc;
  if (shape.workers < 1 || shape.ps < 1) {
    std::fprintf(stderr, "twinps train: --workers and --ps must be at least 1\n");
    return kExitBadInput;
  }
  if (config.epochs < 1 || config.steps_per_epoch < 1 || config.batch_size < 1 || config.learning_rate <= 0) {
    std::fprintf(stderr, "twinps train: --epochs, --steps-per-epoch, --batch-size and --learning-rate must be positive\n");
    return kExitBadInput;
  }
  if (config.num_shards < 0) config.num_shards = shape.ps;
  config.data_seed = seed;
  config.init_seed = seed + 1;
  if (vm.count("in-memory")) return train_in_memory(config, shape, seed);
  std::fprintf(stderr, "twinps train: choose where the cluster runs: --in-memory\n");
  return kExitBadInput;
}

}  // namespace twinps::cli
