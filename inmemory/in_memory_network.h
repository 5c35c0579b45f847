#pragma once
// Calls between tasks that share one DeterministicEngine. Messages are moved, never
// serialised. Delivery time comes from a LinkModel: zero latency by default;
// the simulator plugs in its topology with bandwidth and queueing. This class
// keeps the transport contract (transport.h): done exactly once on the
// caller's executor, deadlines, cancellation, and failing calls to a task
// that is down — at once for new calls, and for calls in flight when it dies.
#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <optional>

#include <absl/container/btree_map.h>

#include "inmemory/deterministic_engine.h"
#include "core/runtime/transport.h"

namespace twinps {

class LinkModel {
 public:
  virtual ~LinkModel() = default;
  // When a message of `bytes` sent now from `from` arrives at `to`, or
  // nullopt if the network loses it (a partition): the caller then sees only
  // its deadline pass.
  virtual std::optional<Time> deliver(const TaskId& from, const TaskId& to, std::size_t bytes, Time now) = 0;
  // When a message is lost, how long until the caller's transport gives up on
  // the connection and fails the call with UNAVAILABLE (gRPC's keepalive
  // noticing that the peer stopped answering), unless its deadline comes
  // first. nullopt: only the deadline ends the call.
  virtual std::optional<Duration> loss_detection_delay() const { return std::nullopt; }

  // Models whose delivery time depends on what happens after the send —
  // flows sharing a link, CPU work at both ends on cores other tasks use —
  // say so here and take messages through send() instead of deliver().
  virtual bool asynchronous() const { return false; }
  // Carries a message of `shape` from `from` to `to`: calls `arrived` from an
  // event of the model's own when the receiver can handle it, or returns
  // false if the network loses it (the caller then sees only its deadline or
  // the loss detection delay).
  virtual bool send(const TaskId& from, const TaskId& to, const MessageShape& shape, Callback arrived) {
    (void)from, (void)to, (void)shape, (void)arrived;
    return false;
  }
};

class InMemoryNetwork {
 public:
  explicit InMemoryNetwork(DeterministicEngine& engine, LinkModel* links = nullptr) : engine_(engine), links_(links) {}
  InMemoryNetwork(const InMemoryNetwork&) = delete;
  InMemoryNetwork& operator=(const InMemoryNetwork&) = delete;

  // The transport of `task` for one incarnation. While it exists the task is
  // reachable; destroying it takes the task down and fails the calls in flight to it.
  std::unique_ptr<Transport> attach(const TaskId& task, NodeExecutor& executor);

  bool is_up(const TaskId& task) const { return find_endpoint(task) != nullptr; }

  // Test hook: the next `count` calls to `to` (any caller) fail with `status`
  // instead of being delivered. The status is attributed to `to`.
  void fail_next_calls(const TaskId& to, Status status, int count = 1);

  std::uint64_t messages_delivered() const { return delivered_; }
  std::uint64_t bytes_delivered() const { return bytes_; }

 private:
  class Endpoint;
  struct PendingCall;

  void start_call(Endpoint& caller, const TaskId& to, Request request, CallOptions options, ResponseCallback done);
  void finish(const std::shared_ptr<PendingCall>& call, StatusOr<Response> result);
  // The request has reached its callee: hand it to the handler.
  void arrive(const std::shared_ptr<PendingCall>& call);
  void detach(const TaskId& task, Endpoint* endpoint);
  std::optional<Time> delivery_time(const TaskId& from, const TaskId& to, std::size_t bytes);
  // A message of `call` was lost: fail it once the link model notices, if it does.
  void on_lost(const std::shared_ptr<PendingCall>& call);

  DeterministicEngine& engine_;
  LinkModel* links_;
  Endpoint* find_endpoint(const TaskId& task) const;
  Endpoint*& endpoint_slot(const TaskId& task);

  // Attached endpoints by job, then task index (null: none). Every call looks
  // up its callee, so this is an array rather than a tree.
  std::vector<Endpoint*> endpoints_[std::size(kAllJobs)];
  std::map<TaskId, std::pair<Status, int>> injected_failures_;
  // Calls in flight by task (under both caller and callee), then call id, for
  // failing a task's calls when it detaches: indexed by task so that a run
  // whose 11,000 tasks all detach at its end does not scan every call in
  // flight for each (that was a fifth of a 10,000-worker run's time).
  // By job, then task index, as endpoints_ (a tree keyed by task cost a
  // tenth of such a run in lookups). A B-tree: every call is added and
  // removed twice, and a node per call cost 6 % of a 1,000 x 100 run in
  // allocation and rebalancing; iterated in call id order when a task detaches.
  using CallsById = absl::btree_map<std::uint64_t, std::shared_ptr<PendingCall>>;
  std::vector<CallsById> pending_[std::size(kAllJobs)];
  CallsById* calls_of(const TaskId& task);  // null for a task that cannot exist (negative index)
  void remember(const std::shared_ptr<PendingCall>& call);
  void forget(const PendingCall& call);
  std::uint64_t next_call_id_ = 1;
  std::uint64_t delivered_ = 0;
  std::uint64_t bytes_ = 0;
};

}  // namespace twinps
