// twinps tf-config: checks the TF_CONFIG a launcher (the Kubeflow training
// operator's TFJob, a StatefulSet entrypoint, a script) gives a task, with
// the parser every twinps task uses, and says what the task will do. For
// `kubectl exec POD -- twinps tf-config` and for the deployment tests.
#include <cstdio>

#include "tools/cli.h"
#include "tools/commands/commands.h"
#include "tools/serving_flags.h"
#include "tools/tf_config.h"

namespace twinps::cli {

int run_tf_config(int argc, char** argv) {
  std::string tf_config, bind;
  po::options_description opts("twinps tf-config options");
  opts.add_options()("help,h", "show this help")
      ("tf-config", po::value(&tf_config), "cluster as TF_CONFIG JSON (default: the TF_CONFIG variable)")
      ("bind", po::value(&bind), "the --bind the task will get (default: every interface)");
  po::variables_map vm;
  if (int rc = parse(argc, argv,
                     "usage: twinps tf-config [--tf-config JSON]\n"
                     "Checks TF_CONFIG as twinps reads it and prints the task's role, where it listens and the "
                     "command it runs; exit 2 naming the field when it is wrong.",
                     opts, vm);
      rc >= 0)
    return rc;
  auto tfc = load_tf_config(tf_config);
  if (!tfc.ok()) {
    std::fprintf(stderr, "twinps tf-config: %s\n", std::string(tfc.status().message()).c_str());
    return kExitBadInput;
  }
  if (!tfc->task) {
    std::fprintf(stderr, "twinps tf-config: TF_CONFIG has no \"task\": a launcher gives every task its own\n");
    return kExitBadInput;
  }
  const TaskId task = *tfc->task;
  const ClusterSpec& cluster = tfc->cluster;
  std::printf("task: %s\n", task.short_name().c_str());
  std::printf("cluster: %d chief, %d worker(s), %d ps, %d evaluator\n", cluster.num_tasks(Job::kChief),
              cluster.num_workers(), cluster.num_ps(), cluster.num_tasks(Job::kEvaluator));
  switch (task.job) {
    case Job::kPs:
    case Job::kWorker: {
      ServingFlags serving;
      serving.bind = bind;
      auto listen = serving.listen_address(*cluster.address(task));
      if (!listen.ok()) {
        std::fprintf(stderr, "twinps tf-config: %s\n", std::string(listen.status().message()).c_str());
        return kExitBadInput;
      }
      std::printf("address: %s (listens on %s)\nruns: twinps serve\n", cluster.address(task)->c_str(),
                  listen->c_str());
      break;
    }
    case Job::kChief:
      if (Status v = validate_for_training(cluster); !v.ok()) {
        std::fprintf(stderr, "twinps tf-config: %s\n", std::string(v.message()).c_str());
        return kExitBadInput;
      }
      std::printf("address: %s (the coordinator calls out; it listens only for --metrics-port)\nruns: twinps train\n",
                  cluster.address(task)->c_str());
      break;
    case Job::kEvaluator:
      // The training operator leaves the evaluator out of "cluster": it reads checkpoints, not tasks.
      std::printf("runs: twinps eval (reads the chief's checkpoints; talks to no task)\n");
      break;
  }
  return kExitOk;
}

}  // namespace twinps::cli
