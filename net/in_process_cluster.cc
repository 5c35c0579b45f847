#include "net/in_process_cluster.h"

namespace twinps::net {

StatusOr<std::unique_ptr<InProcessCluster>> InProcessCluster::start(InProcessClusterOptions options) {
  std::unique_ptr<InProcessCluster> cluster(new InProcessCluster());
  // Servers bind port 0 and report the port they got, so no port is guessed;
  // the resolver reads the map, which is complete before any call is made.
  auto addresses = std::make_shared<std::map<TaskId, std::string>>();
  auto resolve = [addresses](const TaskId& t) {
    auto it = addresses->find(t);
    return it == addresses->end() ? std::string() : it->second;
  };
  // One clock for every task: their trace records share one timeline.
  const auto epoch = std::chrono::steady_clock::now();
  std::vector<TaskId> tasks;
  for (int i = 0; i < options.ps; ++i) tasks.push_back(TaskId::ps(i));
  for (int i = 0; i < options.workers; ++i) tasks.push_back(TaskId::worker(i));
  for (const auto& t : tasks) {
    RealNodeOptions o;
    o.task = t;
    o.listen_address = options.host + ":0";
    o.resolve = resolve;
    o.registry = options.registry;
    o.trace = options.trace;
    o.worker = options.worker;
    o.transport = options.transport;
    o.clock_epoch = epoch;
    auto node = RealNode::create(std::move(o));
    if (!node.ok()) return node.status();
    (*addresses)[t] = options.host + ":" + std::to_string((*node)->port());
    cluster->servers_[t] = std::move(*node);
  }
  RealNodeOptions co;
  co.task = TaskId::chief();
  co.resolve = resolve;
  co.trace = options.trace;
  co.transport = options.transport;
  co.clock_epoch = epoch;
  auto coordinator = RealNode::create(std::move(co));
  if (!coordinator.ok()) return coordinator.status();
  cluster->coordinator_ = std::move(*coordinator);
  cluster->addresses_ = *addresses;
  cluster->spec_ = make_cluster(options.workers, options.ps, /*chief=*/false,
                                [&](const TaskId& t) { return (*addresses)[t]; });
  for (auto& [t, node] : cluster->servers_) node->start_thread();
  return cluster;
}

InProcessCluster::~InProcessCluster() {
  coordinator_.reset();
  servers_.clear();
}

}  // namespace twinps::net
