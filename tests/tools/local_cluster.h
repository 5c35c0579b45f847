#pragma once
// A TF_CONFIG cluster of real `twinps serve` processes on 127.0.0.1 for the
// integration tests, whose ports nobody guesses:
//
//  - A task listens on a port the OS picks (`twinps serve --port 0`) and
//    reports it on its readiness line (tools/serving_line.h); its address is
//    127.0.0.1 at that port from then on. Probing for a free port and binding
//    it later is a race on a loaded machine: another process may take the
//    port in between.
//  - Until a task has reported, its address is a placeholder, as in
//    tools/process_cluster.h, which `twinps sim --real` uses: one nothing
//    dials, as the chief (`twinps train`) only calls out, a ps calls nobody
//    and a worker only the ps. So the ps start first and the workers are told
//    where they are; the chief, started last, is told every address.
//  - A task that must keep its address across a restart, or an address
//    where nothing may listen, gets a port the test holds (ReservedPort):
//    the task listens on it as its TF_CONFIG port.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/cluster/cluster_spec.h"
#include "tests/tools/process.h"
#include "tools/serving_line.h"

namespace twinps::testing {

// The gRPC and data-plane ports a `twinps serve` reported on its readiness line (0: not yet).
inline int serving_port(const Process& p) { return cli::serving_port(p.err()); }
inline int data_port_of(const Process& p) { return cli::data_plane_port(p.err()); }
// The port of a "host:port" address.
inline int port_of(const std::string& address) { return std::stoi(address.substr(address.rfind(':') + 1)); }

// A port this test holds (cli::ReservedPort, tools/subprocess.h: bound,
// never listening), or the test stops.
class ReservedPort : public cli::ReservedPort {
 public:
  ReservedPort() {
    if (!held()) throw std::runtime_error("ReservedPort: cannot bind a port");
  }
};

class LocalCluster {
 public:
  // `dir`: where the processes' output files go, named after each task
  // ("" = a temp dir of each process's own).
  LocalCluster(int workers, int ps, std::string dir = "") : workers_(workers), ps_(ps), dir_(std::move(dir)) {
    int placeholder = 0;  // distinct, never dialled (see above)
    (void)make_cluster(workers, ps, /*chief=*/true,
                       [&](TaskId t) { return addresses_[t] = "127.0.0.1:" + std::to_string(++placeholder); });
  }

  // TF_CONFIG with the addresses known so far, for `task` (none: the cluster alone).
  std::string tf_config(std::optional<TaskId> task) const {
    TfConfig tfc;
    tfc.cluster = make_cluster(workers_, ps_, /*chief=*/true, [&](TaskId t) { return addresses_.at(t); });
    tfc.task = task;
    return tfc.to_json();
  }
  const std::string& address(const TaskId& t) const { return addresses_.at(t); }

  // From now on `t`'s address is a port this cluster holds (ReservedPort):
  // nothing listens there until `t` starts, which then listens on it (its
  // TF_CONFIG port, no --port), and it stays `t`'s when `t` is killed, so
  // start(t) can restart it at the same address.
  void reserve_port(const TaskId& t) {
    addresses_.at(t) = reserved_.try_emplace(t).first->second.address();
  }

  // Starts `twinps serve` for `t` with `args` and `env` added and waits for
  // its readiness line; a task without a reserved port listens on the one the
  // OS picks and that becomes its address. A worker needs every ps to have
  // its address first. Again for a task that ran before: a restart at the
  // same address, which needs reserve_port() before the first start.
  ::testing::AssertionResult start(const TaskId& t, std::vector<std::string> args = {},
                                   std::vector<std::string> env = {}) {
    const bool reserved = reserved_.count(t) > 0;
    if (servers_.count(t) && !reserved)
      return ::testing::AssertionFailure() << "restarting " << t.short_name()
                                           << " at its address needs reserve_port() before its first start";
    if (t.job == Job::kWorker)
      for (int i = 0; i < ps_; ++i)
        if (!has_address(TaskId::ps(i)))
          return ::testing::AssertionFailure() << t.short_name() << " calls ps:" << i
                                               << ", which has no address yet: start the ps first";
    args.insert(args.begin(), {twinps_binary(), "serve"});
    if (!reserved) args.insert(args.end(), {"--port", "0"});
    env.push_back("TF_CONFIG=" + tf_config(t));
    const int run = ++starts_[t];
    const std::string name = t.short_name() + (run > 1 ? ".start" + std::to_string(run) : "");
    Process& p = servers_[t] = Process::start(args, env, dir_, dir_.empty() ? "child" : name);
    if (!p.wait_for_output("serving on", std::chrono::seconds(60)))
      return ::testing::AssertionFailure() << t.short_name() << " did not start serving: " << p.err();
    const int port = serving_port(p);
    if (port <= 0) return ::testing::AssertionFailure() << t.short_name() << " did not say its port: " << p.err();
    if (reserved && port != reserved_.at(t).port())
      return ::testing::AssertionFailure() << t.short_name() << " serves on " << port << ", not its reserved port "
                                           << reserved_.at(t).port();
    addresses_.at(t) = "127.0.0.1:" + std::to_string(port);
    known_.insert(t);
    return ::testing::AssertionSuccess();
  }
  // Every ps, then every worker.
  ::testing::AssertionResult start_all(const std::vector<std::string>& worker_args = {},
                                       const std::vector<std::string>& worker_env = {}) {
    for (int i = 0; i < ps_; ++i)
      if (auto r = start(TaskId::ps(i)); !r) return r;
    for (int i = 0; i < workers_; ++i)
      if (auto r = start(TaskId::worker(i), worker_args, worker_env); !r) return r;
    return ::testing::AssertionSuccess();
  }
  Process& server(const TaskId& t) { return servers_.at(t); }

  // `twinps train` as the chief of this cluster (output named "chief" under the cluster's dir).
  Process train(std::vector<std::string> args, std::vector<std::string> env = {}) const {
    args.insert(args.begin(), {twinps_binary(), "train"});
    env.push_back("TF_CONFIG=" + tf_config(TaskId::chief()));
    return Process::start(args, env, dir_, dir_.empty() ? "child" : "chief");
  }

 private:
  bool has_address(const TaskId& t) const { return reserved_.count(t) || known_.count(t); }

  int workers_, ps_;
  std::string dir_;
  std::map<TaskId, std::string> addresses_;
  std::map<TaskId, ReservedPort> reserved_;
  std::set<TaskId> known_;  // tasks that reported their port
  std::map<TaskId, Process> servers_;
  std::map<TaskId, int> starts_;
};

}  // namespace twinps::testing
