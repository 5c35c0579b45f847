#include "net/real_node.h"

#include <chrono>
#include <random>

namespace twinps::net {

Incarnation new_incarnation() {
  // Real mode needs distinct incarnations across process starts, not
  // reproducibility: mix the OS's entropy with the clock.
  std::random_device rd;
  std::uint64_t x = (static_cast<std::uint64_t>(rd()) << 32) ^ rd() ^
                    static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  return splitmix64(x) | 1;
}

StatusOr<std::unique_ptr<RealNode>> RealNode::create(RealNodeOptions options) {
  if (options.task.job == Job::kWorker && !options.registry)
    return absl::InvalidArgumentError("a worker node needs a function registry");
  std::unique_ptr<RealNode> node(new RealNode());
  node->executor_ = options.clock_epoch ? std::make_unique<AsioExecutor>(*options.clock_epoch)
                                        : std::make_unique<AsioExecutor>();
  GrpcTransportOptions topts = options.transport;
  topts.listen_address = options.listen_address;
  topts.resolve = options.resolve;
  auto transport = GrpcTransport::create(options.task, *node->executor_, std::move(topts));
  if (!transport.ok()) return transport.status();
  node->transport_ = std::move(*transport);
  if (options.wrap_transport) node->wrapper_ = options.wrap_transport(*node->executor_, *node->transport_);
  Transport& calls = node->wrapper_ ? *node->wrapper_ : static_cast<Transport&>(*node->transport_);
  const Incarnation incarnation = new_incarnation();
  node->runtime_.reset(new Runtime{options.task, incarnation, *node->executor_, calls,
                                   options.trace ? *options.trace : static_cast<TraceSink&>(node->null_trace_),
                                   RandomStream(incarnation), options.cost});
  if (options.task.job == Job::kWorker)
    node->worker_ = std::make_unique<WorkerNode>(*node->runtime_, *options.registry, options.worker);
  if (options.task.job == Job::kPs) node->ps_ = std::make_unique<ParameterServerNode>(*node->runtime_);
  return node;
}

RealNode::~RealNode() {
  if (executor_) executor_->stop();
  // The loop no longer runs, so the node's objects can go from this thread.
  worker_.reset();
  ps_.reset();
  if (transport_) transport_->stop_serving();
  runtime_.reset();
  wrapper_.reset();
  transport_.reset();
  executor_.reset();
}

}  // namespace twinps::net
