#include "tools/commands/commands.h"

namespace twinps::cli {

const std::vector<Command>& commands() {
  static const std::vector<Command> all = {
      {"train", "run the coordinator: the tutorial model on a cluster", run_train},
      {"serve", "run a parameter-server or worker task", run_serve},
      {"eval", "side-car evaluator: evaluate each new checkpoint", run_eval},
      // Temporary names until `twinps bench <target>` dispatches to them.
      {"bench-ps", "benchmark: push/pull throughput against ps processes", run_bench_ps},
      {"bench-train", "benchmark: tutorial training throughput in real mode", run_bench_train},
  };
  return all;
}

}  // namespace twinps::cli
