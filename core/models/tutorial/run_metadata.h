#pragma once
// The tutorial run's configuration as checkpoint metadata. `twinps train`
// records it in every checkpoint it saves, so that the side-car evaluator
// (`twinps eval`) rebuilds the same model and evaluation examples, and knows
// which checkpoint is the run's last, from the checkpoint alone: no flag has
// to be repeated in step with the training run.
#include <map>
#include <string>

#include "core/models/tutorial/tutorial.h"
#include "core/runtime/status.h"

namespace twinps::tutorial {

// Every field of `config` under "tutorial.<field>" (and "model": "tutorial").
std::map<std::string, std::string> run_metadata(const Config& config);

// Reads what run_metadata() wrote. INVALID_ARGUMENT naming the key when one is
// missing or malformed (e.g. a checkpoint written before the metadata existed).
StatusOr<Config> config_from_metadata(const std::map<std::string, std::string>& metadata);

}  // namespace twinps::tutorial
