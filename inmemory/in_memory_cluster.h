#pragma once
// A whole cluster — coordinator, workers, parameter servers — in one process
// on one deterministic DeterministicEngine, talking through an InMemoryNetwork. Tasks
// can be killed and restarted: killing destroys the task's objects (its memory
// is gone, as with a crashed process) and bumps its incarnation so nothing
// queued for it runs. Core's tests and the in-memory demo use it; the
// simulator adds a network model, cost models and scheduled faults around it.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>

#include "core/coordinator/cluster_coordinator.h"
#include "inmemory/in_memory_network.h"
#include "inmemory/deterministic_engine.h"
#include "core/ps/ps_node.h"
#include "core/runtime/block_on.h"
#include "core/runtime/runtime.h"
#include "core/worker/function_registry.h"
#include "core/worker/worker_node.h"

namespace twinps {

struct InMemoryClusterOptions {
  ClusterShape shape;
  std::uint64_t seed = 1;
  CoordinatorOptions coordinator;
  WorkerOptions worker;
  LinkModel* links = nullptr;   // nullptr: zero-latency delivery
  TraceSink* trace = nullptr;   // nullptr: no tracing
  CostModel* cost = nullptr;    // nullptr: computation takes no clock time
  // Wraps each task's transport at every start (nullptr: none). The simulator
  // puts a parameter server's service time and queueing here, as a decorator
  // core never sees. The wrapper lives and dies with that incarnation.
  std::function<std::unique_ptr<Transport>(const TaskId&, Executor&, std::unique_ptr<Transport>)> wrap_transport;
};

class InMemoryCluster {
 public:
  InMemoryCluster(const FunctionRegistry& registry, InMemoryClusterOptions options);
  ~InMemoryCluster();
  InMemoryCluster(const InMemoryCluster&) = delete;
  InMemoryCluster& operator=(const InMemoryCluster&) = delete;

  DeterministicEngine& engine() { return engine_; }
  InMemoryNetwork& network() { return network_; }
  ClusterCoordinator& coordinator() { return *coordinator_; }
  Runtime& runtime(const TaskId& task);
  Executor& coordinator_executor() { return *nodes_.at(TaskId::chief())->executor; }

  // Crash a task: its objects are destroyed and its pending events dropped.
  void kill(const TaskId& task);
  // Start a killed task again as a new incarnation (a fresh process).
  void restart(const TaskId& task);
  // Replace the coordinator by a fresh one (after a coordinator crash).
  void restart_coordinator();
  bool is_up(const TaskId& task) const;
  // Stop and continue a task (SIGSTOP / SIGCONT): it keeps its memory and its
  // connections, but runs nothing — timers and messages to it wait — until
  // it resumes. Killing a paused task ends the pause.
  void pause(const TaskId& task);
  void resume(const TaskId& task);

  WorkerNode* worker(int i);
  ParameterServerNode* ps(int i);

  // Runs `program` on the coordinator until it finishes (true) or `limit` passes (false).
  template <typename T>
  std::optional<T> run(Task<T> program, Time limit = kTimeNever) {
    return block_on(coordinator_executor(), std::move(program), limit);
  }
  // Runs events until `when` on the simulated clock.
  void run_until_time(Time when) { engine_.run(when); }

 private:
  struct Node {
    DeterministicEngine::NodeSlot slot = 0;
    int starts = 0;
    std::unique_ptr<NodeExecutor> executor;
    std::unique_ptr<Transport> transport;
    std::unique_ptr<Runtime> runtime;
    std::unique_ptr<WorkerNode> worker;
    std::unique_ptr<ParameterServerNode> ps;
  };
  void start_node(const TaskId& task);

  const FunctionRegistry& registry_;
  InMemoryClusterOptions options_;
  NullTraceSink null_trace_;
  DeterministicEngine engine_;
  InMemoryNetwork network_;
  RandomStream random_;
  std::map<TaskId, std::unique_ptr<Node>> nodes_;
  std::unique_ptr<ClusterCoordinator> coordinator_;
};

}  // namespace twinps
