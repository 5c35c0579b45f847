#include "tools/commands/commands.h"

namespace twinps::cli {

const std::vector<Command>& commands() {
  static const std::vector<Command> all = {
      {"train", "run the coordinator: the tutorial model on a cluster", run_train},
      {"serve", "run a parameter-server or worker task", run_serve},
  };
  return all;
}

}  // namespace twinps::cli
