#include "inmemory/in_memory_cluster.h"

namespace twinps {

InMemoryCluster::InMemoryCluster(const FunctionRegistry& registry, InMemoryClusterOptions options)
    : registry_(registry), options_(options), network_(engine_, options.links), random_(options.seed) {
  start_node(TaskId::chief());
  for (int i = 0; i < options_.shape.ps; ++i) start_node(TaskId::ps(i));
  for (int i = 0; i < options_.shape.workers; ++i) start_node(TaskId::worker(i));
  coordinator_ = std::make_unique<ClusterCoordinator>(runtime(TaskId::chief()), options_.shape, registry_,
                                                      options_.coordinator);
}

InMemoryCluster::~InMemoryCluster() {
  coordinator_.reset();
  nodes_.clear();
}

Runtime& InMemoryCluster::runtime(const TaskId& task) { return *nodes_.at(task)->runtime; }

void InMemoryCluster::start_node(const TaskId& task) {
  auto& slot = nodes_[task];
  if (!slot) {
    slot = std::make_unique<Node>();
    slot->slot = engine_.add_node();
  }
  Node& n = *slot;
  ++n.starts;
  n.executor = std::make_unique<NodeExecutor>(engine_, n.slot);
  n.transport = network_.attach(task, *n.executor);
  if (options_.wrap_transport) n.transport = options_.wrap_transport(task, *n.executor, std::move(n.transport));
  // Each start is a new incarnation with its own random stream, as a new process would be.
  RandomStream node_random = random_.fork("task", static_cast<std::uint64_t>(task.job) * 1000003u + task.index)
                                 .fork("start", static_cast<std::uint64_t>(n.starts));
  const Incarnation incarnation = node_random.fork("incarnation").next_u64() | 1;
  n.runtime.reset(new Runtime{task, incarnation, *n.executor, *n.transport,
                              options_.trace ? *options_.trace : static_cast<TraceSink&>(null_trace_), node_random,
                              options_.cost});
  if (task.job == Job::kWorker) n.worker = std::make_unique<WorkerNode>(*n.runtime, registry_, options_.worker);
  if (task.job == Job::kPs) n.ps = std::make_unique<ParameterServerNode>(*n.runtime);
}

void InMemoryCluster::kill(const TaskId& task) {
  auto it = nodes_.find(task);
  if (it == nodes_.end() || !it->second->executor) return;
  Node& n = *it->second;
  if (task.job == Job::kChief) coordinator_.reset();
  // Objects go first (they may still post while being destroyed), then the
  // incarnation bump makes every event queued for them a no-op.
  n.worker.reset();
  n.ps.reset();
  n.transport.reset();  // the network fails calls in flight to it
  n.runtime.reset();
  engine_.bump_incarnation(n.slot);
  n.executor.reset();
}

void InMemoryCluster::restart(const TaskId& task) {
  if (is_up(task)) return;
  start_node(task);
  if (task.job == Job::kChief) {
    coordinator_ = std::make_unique<ClusterCoordinator>(*nodes_.at(task)->runtime, options_.shape, registry_,
                                                        options_.coordinator);
  }
}

void InMemoryCluster::restart_coordinator() {
  kill(TaskId::chief());
  restart(TaskId::chief());
}

void InMemoryCluster::pause(const TaskId& task) {
  auto it = nodes_.find(task);
  if (it != nodes_.end() && it->second->executor) engine_.pause(it->second->slot);
}

void InMemoryCluster::resume(const TaskId& task) {
  auto it = nodes_.find(task);
  if (it != nodes_.end()) engine_.resume(it->second->slot);
}

bool InMemoryCluster::is_up(const TaskId& task) const {
  auto it = nodes_.find(task);
  return it != nodes_.end() && it->second->executor != nullptr;
}

WorkerNode* InMemoryCluster::worker(int i) {
  auto it = nodes_.find(TaskId::worker(i));
  return it == nodes_.end() ? nullptr : it->second->worker.get();
}

ParameterServerNode* InMemoryCluster::ps(int i) {
  auto it = nodes_.find(TaskId::ps(i));
  return it == nodes_.end() ? nullptr : it->second->ps.get();
}

}  // namespace twinps
