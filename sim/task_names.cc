#include "sim/task_names.h"

#include <charconv>

namespace twinps::sim {

StatusOr<TaskId> parse_task_name(const std::string& name) {
  if (name == "chief") return TaskId::chief();
  auto bad = [&] {
    return absl::InvalidArgumentError("\"" + name + "\" is not a task name (\"chief\", \"worker:N\" or \"ps:N\")");
  };
  const auto colon = name.find(':');
  if (colon == std::string::npos) return bad();
  const std::string job = name.substr(0, colon);
  if (job != "worker" && job != "ps") return bad();
  int index = -1;
  const char* begin = name.data() + colon + 1;
  const char* end = name.data() + name.size();
  auto [ptr, ec] = std::from_chars(begin, end, index);
  if (ec != std::errc() || ptr != end || begin == end || index < 0) return bad();
  return job == "worker" ? TaskId::worker(index) : TaskId::ps(index);
}

}  // namespace twinps::sim
