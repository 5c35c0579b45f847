#include "tools/transport_cut.h"

#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/faults/faulty_transport.h"
#include "sim/task_names.h"

namespace twinps::cli {

std::unique_ptr<Transport> TransportCut::wrap(Executor& executor, Transport& inner, Duration loss_detection) const {
  CallFaultPlan plan;
  plan.drop_request = 1;  // every call the plan applies to is lost ...
  plan.loss_detection = loss_detection;
  std::shared_ptr<const std::set<TaskId>> cut = cut_;
  plan.applies = [cut](const TaskId& to, const Request&) { return cut->count(to) > 0; };  // ... if its callee is cut off
  return std::make_unique<FaultyTransport>(inner, executor, std::move(plan), RandomStream(1));
}

namespace {
std::string task_name(const TaskId& t) { return t == TaskId::chief() ? std::string("chief") : t.short_name(); }
}  // namespace

Status write_cut_file(const std::string& path, const std::set<TaskId>& tasks) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    for (const auto& t : tasks) out << task_name(t) << "\n";
    if (!out) return absl::UnavailableError("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return absl::UnavailableError("cannot rename " + tmp + " to " + path);
  return absl::OkStatus();
}

StatusOr<std::set<TaskId>> read_cut_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError("cannot read the cut file " + path);
  std::set<TaskId> out;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    auto t = sim::parse_task_name(line);
    if (!t.ok()) return absl::InvalidArgumentError(path + ":" + std::to_string(number) + ": " + std::string(t.status().message()));
    out.insert(*t);
  }
  return out;
}

bool CutFileWatcher::reload() {
  struct stat st {};
  std::string stamp = "absent";
  if (::stat(path_.c_str(), &st) == 0)
    stamp = std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) + "/" +
            std::to_string(st.st_size) + "/" + std::to_string(st.st_ino);
  if (stamp == last_stamp_) return false;
  last_stamp_ = stamp;
  auto tasks = stamp == "absent" ? StatusOr<std::set<TaskId>>(std::set<TaskId>{}) : read_cut_file(path_);
  if (!tasks.ok() || *tasks == cut_.tasks()) return false;
  cut_.set(std::move(*tasks));
  return true;
}

}  // namespace twinps::cli
