#pragma once
// Task names as scenarios and traces spell them: "chief", "worker:3", "ps:0".
#include <string>

#include "core/cluster/task_id.h"
#include "core/runtime/status.h"

namespace twinps::sim {

StatusOr<TaskId> parse_task_name(const std::string& name);

}  // namespace twinps::sim
