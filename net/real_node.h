#pragma once
// One task of a real cluster: an Asio executor, a transport (gRPC control
// plane + TCP data plane, net/grpc_transport.h) and the
// task's node (a parameter server, a worker, or nothing for the coordinator,
// which runs its program on the runtime). `twinps serve` hosts one per
// process; the in-process cluster hosts several, one thread each.
#include <chrono>
#include <functional>
#include <optional>
#include <memory>
#include <string>

#include "core/ps/ps_node.h"
#include "core/runtime/runtime.h"
#include "core/worker/function_registry.h"
#include "core/worker/worker_node.h"
#include "net/asio_executor.h"
#include "net/grpc_transport.h"

namespace twinps::net {

struct RealNodeOptions {
  TaskId task;
  std::string listen_address;  // "host:port" (port 0 = any); "" = only call out
  std::function<std::string(const TaskId&)> resolve;
  const FunctionRegistry* registry = nullptr;  // required for workers
  TraceSink* trace = nullptr;                  // thread-safe if shared; nullptr = none
  CostModel* cost = nullptr;                   // fault injection: extra step time; nullptr = none
  WorkerOptions worker;
  GrpcTransportOptions transport;  // listen_address and resolve are filled from above
  // Wraps the node's outgoing transport (a FaultyTransport cutting calls to
  // partitioned tasks, core/faults/): the node calls out through what it
  // returns, which must not outlive `inner`. Empty: the gRPC transport itself.
  std::function<std::unique_ptr<Transport>(Executor& executor, Transport& inner)> wrap_transport;
  // Where the node's clock starts (default: when it is created); nodes given
  // the same epoch write traces on one timeline.
  std::optional<std::chrono::steady_clock::time_point> clock_epoch;
};

class RealNode {
 public:
  static StatusOr<std::unique_ptr<RealNode>> create(RealNodeOptions options);
  // Stops the executor thread (if started), then tears the node down.
  ~RealNode();
  RealNode(const RealNode&) = delete;
  RealNode& operator=(const RealNode&) = delete;

  const TaskId& task() const { return runtime_->self; }
  AsioExecutor& executor() { return *executor_; }
  Runtime& runtime() { return *runtime_; }
  GrpcTransport& transport() { return *transport_; }
  int port() const { return transport_->port(); }
  Incarnation incarnation() const { return runtime_->incarnation; }
  // The task's node, by role (nullptr for the others): for metrics.
  const ParameterServerNode* ps() const { return ps_.get(); }
  const WorkerNode* worker() const { return worker_.get(); }

  // Runs the executor on its own thread (servers). Without it, the owner
  // drives the executor with run_until / block_on (the coordinator).
  void start_thread() { executor_->start(); }

 private:
  RealNode() = default;
  NullTraceSink null_trace_;
  std::unique_ptr<AsioExecutor> executor_;
  std::unique_ptr<GrpcTransport> transport_;
  std::unique_ptr<Transport> wrapper_;  // RealNodeOptions::wrap_transport's, around transport_
  std::unique_ptr<Runtime> runtime_;
  std::unique_ptr<WorkerNode> worker_;
  std::unique_ptr<ParameterServerNode> ps_;
};

// A fresh incarnation number for a process start: random, never 0.
Incarnation new_incarnation();

}  // namespace twinps::net
