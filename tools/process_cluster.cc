#include "tools/process_cluster.h"

#include <chrono>
#include <stdexcept>

#include "core/cluster/cluster_spec.h"

namespace twinps::cli {

StatusOr<std::unique_ptr<ProcessCluster>> ProcessCluster::start(int workers, int ps,
                                                                const std::vector<std::string>& ps_args,
                                                                const std::vector<std::string>& worker_args,
                                                                const std::string& log_dir,
                                                                const std::map<TaskId, std::vector<std::string>>& task_args) {
  std::unique_ptr<ProcessCluster> c(new ProcessCluster());
  try {  // free_port and Child::start throw when the machine is out of ports or processes
    auto port_of = [&](TaskId t) {
      auto& a = c->addresses_[t];
      if (a.empty()) a = "127.0.0.1:" + std::to_string(free_port());
      return a;
    };
    TfConfig config;
    config.cluster = make_cluster(workers, ps, /*chief=*/true, port_of);
    const std::string self = self_binary();
    for (const auto& [task, address] : c->addresses_) {
      if (task.job == Job::kChief) continue;
      TfConfig own = config;
      own.task = task;
      std::vector<std::string> args{self, "serve"};
      const auto& extra = task.job == Job::kPs ? ps_args : worker_args;
      args.insert(args.end(), extra.begin(), extra.end());
      if (auto own_args = task_args.find(task); own_args != task_args.end())
        args.insert(args.end(), own_args->second.begin(), own_args->second.end());
      c->servers_[task] = Child::start(args, {"TF_CONFIG=" + own.to_json()}, log_dir,
                                       std::string(job_name(task.job)) + std::to_string(task.index));
    }
  } catch (const std::exception& e) {
    return absl::UnavailableError(std::string("cannot start the cluster: ") + e.what());
  }
  for (auto& [task, child] : c->servers_) {
    if (!child.wait_for_output("serving on", std::chrono::seconds(30)))
      return absl::UnavailableError(task.short_name() + " did not start serving: " + child.err());
  }
  return c;
}

ProcessCluster::~ProcessCluster() {
  // Signal every server first, so they wind down together rather than one
  // after the other as each Child's destructor waits for its own.
  for (auto& [task, child] : servers_) child.terminate();
}

int ProcessCluster::pid(const TaskId& t) const {
  auto it = servers_.find(t);
  return it == servers_.end() ? -1 : it->second.pid();
}

Status ProcessCluster::check_alive() {
  for (auto& [task, child] : servers_) {
    if (child.wait(std::chrono::milliseconds(0)))
      return absl::UnavailableError(task.short_name() + " exited (code " + std::to_string(child.exit_code()) +
                                    "): " + child.err());
  }
  return absl::OkStatus();
}

}  // namespace twinps::cli
