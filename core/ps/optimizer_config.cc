#include "core/ps/optimizer_config.h"

namespace twinps {

std::string optimizer_name(OptimizerConfig::Kind kind) {
  switch (kind) {
    case OptimizerConfig::Kind::kSgd: return "sgd";
    case OptimizerConfig::Kind::kAdagrad: return "adagrad";
    case OptimizerConfig::Kind::kRmsprop: return "rmsprop";
    case OptimizerConfig::Kind::kAdam: return "adam";
  }
  return "?";
}

}  // namespace twinps
