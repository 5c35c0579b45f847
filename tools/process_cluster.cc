#include "tools/process_cluster.h"

#include <csignal>

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "core/cluster/cluster_spec.h"
#include "tools/serving_line.h"
#include "tools/tf_config.h"

namespace twinps::cli {

namespace {

std::string log_name(const TaskId& t, int start) {
  return std::string(job_name(t.job)) + std::to_string(t.index) + (start > 1 ? ".start" + std::to_string(start) : "");
}

constexpr Duration kDutyPeriod = 100 * kMillisecond;

}  // namespace

StatusOr<std::unique_ptr<ProcessCluster>> ProcessCluster::start(int workers, int ps,
                                                                const std::vector<std::string>& ps_args,
                                                                const std::vector<std::string>& worker_args,
                                                                const std::string& log_dir,
                                                                const std::map<TaskId, std::vector<std::string>>& task_args) {
  ProcessClusterOptions o;
  o.workers = workers;
  o.ps = ps;
  o.ps_args = ps_args;
  o.worker_args = worker_args;
  o.log_dir = log_dir;
  o.task_args = task_args;
  return start(std::move(o));
}

StatusOr<std::unique_ptr<ProcessCluster>> ProcessCluster::start(ProcessClusterOptions options) {
  std::unique_ptr<ProcessCluster> c(new ProcessCluster());
  c->options_ = std::move(options);
  const auto& o = c->options_;
  // Placeholders for the addresses not known yet: distinct, never dialled.
  int placeholder = 0;
  auto address_of = [&](TaskId t) {
    auto& a = c->addresses_[t];
    if (a.empty()) a = "127.0.0.1:" + std::to_string(++placeholder);
    return a;
  };
  (void)make_cluster(o.workers, o.ps, /*chief=*/true, address_of);
  // Parameter servers first, then the workers, who are told where they are.
  for (Job job : {Job::kPs, Job::kWorker}) {
    const int n = job == Job::kPs ? o.ps : o.workers;
    for (int i = 0; i < n; ++i) TWINPS_RETURN_IF_ERROR(c->launch(TaskId{job, i}, 0));
    for (int i = 0; i < n; ++i) TWINPS_RETURN_IF_ERROR(c->await_ready(TaskId{job, i}, std::chrono::seconds(60)));
  }
  return c;
}

ProcessCluster::~ProcessCluster() {
  // A stopped process only acts on SIGTERM once it runs again.
  for (auto& [task, s] : servers_) {
    ++s.cycle;
    s.child.kill(SIGCONT);
  }
  // Signal every server first, so they wind down together rather than one
  // after the other as each Child's destructor waits for its own.
  for (auto& [task, s] : servers_) s.child.terminate();
}

ProcessCluster::Server* ProcessCluster::server(const TaskId& t) {
  auto it = servers_.find(t);
  return it == servers_.end() ? nullptr : &it->second;
}

std::string ProcessCluster::cut_file(const TaskId& t) const {
  return options_.log_dir + "/" + log_name(t, 1) + ".cut";
}

Status ProcessCluster::launch(const TaskId& t, int port) {
  Server& s = servers_[t];
  if (s.args.empty()) {
    TfConfig own;
    own.cluster = make_cluster(options_.workers, options_.ps, /*chief=*/true,
                               [&](TaskId other) { return addresses_.at(other); });
    own.task = t;
    s.tf_config = own.to_json();
    s.args = {self_binary(), "serve"};
    const auto& extra = t.job == Job::kPs ? options_.ps_args : options_.worker_args;
    s.args.insert(s.args.end(), extra.begin(), extra.end());
    if (auto own_args = options_.task_args.find(t); own_args != options_.task_args.end())
      s.args.insert(s.args.end(), own_args->second.begin(), own_args->second.end());
    if (options_.cut_detection) {
      TWINPS_RETURN_IF_ERROR(write_cut_file(cut_file(t), {}));
      s.args.insert(s.args.end(), {"--cut-file", cut_file(t), "--cut-detection",
                                   std::to_string(to_seconds(*options_.cut_detection))});
    }
  }
  std::vector<std::string> args = s.args;
  args.insert(args.end(), {"--port", std::to_string(port)});
  try {  // Child::start throws when the machine is out of processes
    s.child = Child::start(args, {"TF_CONFIG=" + s.tf_config}, options_.log_dir, log_name(t, ++s.starts));
  } catch (const std::exception& e) {
    return absl::UnavailableError("cannot start " + t.short_name() + ": " + e.what());
  }
  s.up = true;
  s.paused = false;
  s.cycle_stopped = false;
  return absl::OkStatus();
}

Status ProcessCluster::await_ready(const TaskId& t, std::chrono::milliseconds timeout) {
  Server& s = servers_.at(t);
  if (!s.child.wait_for_output("serving on", timeout))
    return absl::UnavailableError(t.short_name() + " did not start serving: " + s.child.err());
  const int port = serving_port(s.child.err() + s.child.out());
  if (port <= 0) return absl::UnavailableError(t.short_name() + " did not say its port: " + s.child.err());
  addresses_[t] = "127.0.0.1:" + std::to_string(port);
  return absl::OkStatus();
}

int ProcessCluster::pid(const TaskId& t) const {
  auto it = servers_.find(t);
  return it == servers_.end() || !it->second.up ? -1 : it->second.child.pid();
}

Status ProcessCluster::check_alive() {
  for (auto& [task, s] : servers_) {
    if (s.up && s.child.wait(std::chrono::milliseconds(0)))
      return absl::UnavailableError(task.short_name() + " exited (code " + std::to_string(s.child.exit_code()) +
                                    "): " + s.child.err());
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------- actuators

Status ProcessCluster::kill(const TaskId& t) {
  Server* s = server(t);
  if (!s) return absl::InvalidArgumentError("no process runs " + t.short_name() + " (the chief is this process)");
  if (!s->up) return absl::OkStatus();
  ++s->cycle;  // a slow task's duty cycle ends with it
  s->child.kill(SIGKILL);
  if (!s->child.wait(std::chrono::seconds(10)))
    return absl::InternalError(t.short_name() + " (pid " + std::to_string(s->child.pid()) + ") outlived SIGKILL");
  s->up = false;
  s->slow = 1;
  // Its address must be free for its restart: hold the port from now on (a
  // port another socket took in the microseconds since the kill is not held,
  // and the restart then fails loudly in watch_restart).
  const std::string& address = addresses_.at(t);
  s->held_port.emplace(std::stoi(address.substr(address.rfind(':') + 1)));
  if (!s->held_port->held()) s->held_port.reset();
  return absl::OkStatus();
}

Status ProcessCluster::restart(const TaskId& t) {
  Server* s = server(t);
  if (!s) return absl::InvalidArgumentError("no process runs " + t.short_name());
  if (s->up) return absl::OkStatus();
  if (!executor_) return absl::FailedPreconditionError("ProcessCluster::restart needs attach(executor)");
  // The same address: callers keep the one they were given.
  const std::string& address = addresses_.at(t);
  TWINPS_RETURN_IF_ERROR(launch(t, std::stoi(address.substr(address.rfind(':') + 1))));
  // The coordinator does not wait for it (a restarted simulated task is up at
  // once, and its executor must go on); whether it came up is checked here.
  watch_restart(t, 600);
  return absl::OkStatus();
}

void ProcessCluster::watch_restart(const TaskId& t, int polls_left) {
  Server& s = servers_.at(t);
  const std::string out = s.child.err() + s.child.out();
  if (out.find("serving on") != std::string::npos) {
    s.held_port.reset();  // it listens there itself now
    return;
  }
  if (!s.child.running() || polls_left == 0) {
    s.held_port.reset();
    problems_.push_back(t.short_name() + " restarted on " + addresses_.at(t) + " did not serve: " + s.child.err());
    return;
  }
  executor_->post_after(50 * kMillisecond, [this, t, polls_left] { watch_restart(t, polls_left - 1); });
}

Status ProcessCluster::pause(const TaskId& t) {
  Server* s = server(t);
  if (!s) return absl::InvalidArgumentError("no process runs " + t.short_name() + " (the chief is this process)");
  s->paused = true;
  s->child.kill(SIGSTOP);
  return absl::OkStatus();
}

Status ProcessCluster::resume(const TaskId& t) {
  Server* s = server(t);
  if (!s) return absl::InvalidArgumentError("no process runs " + t.short_name());
  s->paused = false;
  if (!s->cycle_stopped) s->child.kill(SIGCONT);
  return absl::OkStatus();
}

Status ProcessCluster::slow(const TaskId& t, double factor) {
  Server* s = server(t);
  if (!s) return absl::InvalidArgumentError("no process runs " + t.short_name() + " (the chief is this process)");
  if (factor <= 1) return absl::InvalidArgumentError("a slowdown factor must be > 1");
  if (!executor_) return absl::FailedPreconditionError("ProcessCluster::slow needs attach(executor)");
  const bool was_running = s->slow > 1;
  s->slow *= factor;
  if (!was_running) duty_cycle(t, ++s->cycle);
  return absl::OkStatus();
}

Status ProcessCluster::unslow(const TaskId& t, double factor) {
  Server* s = server(t);
  if (!s) return absl::InvalidArgumentError("no process runs " + t.short_name());
  s->slow /= factor;
  if (s->slow <= 1 + 1e-9) {
    s->slow = 1;
    ++s->cycle;  // the cycle stops ...
    if (s->cycle_stopped && !s->paused && s->up) s->child.kill(SIGCONT);  // ... with the task running
    s->cycle_stopped = false;
  }
  return absl::OkStatus();
}

// One period: the task runs period / factor, then is stopped for the rest.
void ProcessCluster::duty_cycle(const TaskId& t, std::uint64_t generation) {
  Server& s = servers_.at(t);
  if (s.cycle != generation || !s.up) return;
  const Duration run = static_cast<Duration>(static_cast<double>(kDutyPeriod) / s.slow);
  if (!s.paused) s.child.kill(SIGCONT);
  s.cycle_stopped = false;
  executor_->post_after(run, [this, t, generation, run] {
    Server& s = servers_.at(t);
    if (s.cycle != generation || !s.up) return;
    s.child.kill(SIGSTOP);
    s.cycle_stopped = true;
    executor_->post_after(kDutyPeriod - run, [this, t, generation] { duty_cycle(t, generation); });
  });
}

StatusOr<ClusterControl::PartitionId> ProcessCluster::partition(const std::vector<TaskId>& a,
                                                                 const std::vector<TaskId>& b) {
  if (!options_.cut_detection)
    return absl::FailedPreconditionError("the cluster was started without partitions (ProcessClusterOptions::cut_detection)");
  const PartitionId id = next_partition_++;
  partitions_[id] = {a, b};
  TWINPS_RETURN_IF_ERROR(apply_cuts());
  return id;
}

Status ProcessCluster::heal(PartitionId id) {
  partitions_.erase(id);
  return apply_cuts();
}

// Every task's cut set from the partitions in force: each side is cut from
// the other, and each cuts its own calls.
Status ProcessCluster::apply_cuts() {
  std::vector<TaskId> all{TaskId::chief()};
  for (const auto& [t, s] : servers_) all.push_back(t);
  std::map<TaskId, std::set<TaskId>> cut;
  for (const auto& [id, sides] : partitions_) {
    const auto& a = sides.first;
    std::vector<TaskId> b = sides.second;
    auto in_a = [&](const TaskId& t) { return std::find(a.begin(), a.end(), t) != a.end(); };
    if (b.empty())
      for (const auto& t : all)
        if (!in_a(t)) b.push_back(t);
    for (const auto& x : a)
      for (const auto& y : b) {
        cut[x].insert(y);
        cut[y].insert(x);
      }
  }
  chief_cut_.set(cut[TaskId::chief()]);
  for (const auto& [t, s] : servers_) TWINPS_RETURN_IF_ERROR(write_cut_file(cut_file(t), cut[t]));
  return absl::OkStatus();
}

}  // namespace twinps::cli
