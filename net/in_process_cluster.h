#pragma once
// The seeds' in-process cluster over real gRPC: every parameter server and
// worker in this process, each with its own executor thread and a server on
// a free loopback port, plus a coordinator node the caller drives.
#include <map>
#include <memory>
#include <vector>

#include "core/cluster/cluster_spec.h"
#include "net/real_node.h"

namespace twinps::net {

struct InProcessClusterOptions {
  int workers = 3;
  int ps = 2;
  std::string host = "127.0.0.1";
  const FunctionRegistry* registry = nullptr;
  TraceSink* trace = nullptr;  // shared by every node: must be thread-safe
  WorkerOptions worker;
  GrpcTransportOptions transport;
};

class InProcessCluster {
 public:
  static StatusOr<std::unique_ptr<InProcessCluster>> start(InProcessClusterOptions options);
  ~InProcessCluster();

  // The coordinator's node: its executor runs on whichever thread drives it.
  RealNode& coordinator() { return *coordinator_; }
  RealNode& node(const TaskId& task) { return *servers_.at(task); }
  const ClusterSpec& spec() const { return spec_; }

 private:
  InProcessCluster() = default;
  ClusterSpec spec_;
  std::map<TaskId, std::string> addresses_;
  std::map<TaskId, std::unique_ptr<RealNode>> servers_;
  std::unique_ptr<RealNode> coordinator_;
};

}  // namespace twinps::net
