#include "tools/commands/commands.h"

namespace twinps::cli {

const std::vector<Command>& commands() {
  static const std::vector<Command> all = {
      {"train", "run the coordinator: train a model spec (default: the tutorial) on a cluster", run_train},
      {"serve", "run a parameter-server or worker task", run_serve},
      {"eval", "side-car evaluator: evaluate each new checkpoint", run_eval},
      {"sim", "run a scenario on the deterministic simulator and check its expectations", run_sim},
      {"tune", "sweep ps count x partitioner x shards by simulation and recommend one", run_tune},
      {"calibrate", "measure this machine's costs with real processes and write a CostProfile for the simulator",
       run_calibrate},
      {"bench", "performance measurements (targets: sim, ps, train)", run_bench},
      {"model", "check a model spec; show its layers, variables per ps, and a step's FLOPs and bytes", run_model},
      {"datagen", "write a synthetic dataset (kinds: ctr)", run_datagen},
      {"tf-config", "check the TF_CONFIG a launcher gives a task; show its role and command", run_tf_config},
      {"trace", "merge the trace files of a cluster's tasks into one timeline", run_trace},
  };
  return all;
}

}  // namespace twinps::cli
