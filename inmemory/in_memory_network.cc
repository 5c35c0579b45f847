#include "inmemory/in_memory_network.h"

#include <optional>
#include <utility>

namespace twinps {

struct InMemoryNetwork::PendingCall {
  std::uint64_t id = 0;
  TaskId from, to;
  DeterministicEngine::NodeSlot caller_slot = 0;
  std::uint32_t caller_incarnation = 0;
  ResponseCallback done;
  bool finished = false;
  TimerId deadline_timer = kNoTimer;
  CancelRegistration cancel_registration;
  CancellationSource callee_cancel;  // tells the handler the caller gave up
  // Kept here rather than in the events that carry them, so those events'
  // callbacks stay small enough to be stored without an allocation.
  Request request;
  RequestId request_id = 0;
  Time deadline = kTimeNever;
  std::size_t bytes = 0;
  MessageShape request_shape;  // asynchronous link models only
  std::optional<StatusOr<Response>> reply;
};

class InMemoryNetwork::Endpoint final : public Transport {
 public:
  Endpoint(InMemoryNetwork& net, const TaskId& task, NodeExecutor& ex) : net_(net), task_(task), executor_(ex) {}
  ~Endpoint() override { net_.detach(task_, this); }

  void call(const TaskId& to, Request request, CallOptions options, ResponseCallback done) override {
    net_.start_call(*this, to, std::move(request), std::move(options), std::move(done));
  }
  void serve(CallHandler handler) override { handler_ = std::move(handler); }

  const TaskId& task() const { return task_; }
  NodeExecutor& executor() { return executor_; }
  const CallHandler& handler() const { return handler_; }

 private:
  InMemoryNetwork& net_;
  TaskId task_;
  NodeExecutor& executor_;
  CallHandler handler_;
};

InMemoryNetwork::Endpoint* InMemoryNetwork::find_endpoint(const TaskId& task) const {
  const auto& by_index = endpoints_[static_cast<std::size_t>(task.job)];
  if (task.index < 0 || static_cast<std::size_t>(task.index) >= by_index.size()) return nullptr;
  return by_index[static_cast<std::size_t>(task.index)];
}

InMemoryNetwork::Endpoint*& InMemoryNetwork::endpoint_slot(const TaskId& task) {
  auto& by_index = endpoints_[static_cast<std::size_t>(task.job)];
  if (static_cast<std::size_t>(task.index) >= by_index.size()) by_index.resize(static_cast<std::size_t>(task.index) + 1);
  return by_index[static_cast<std::size_t>(task.index)];
}

std::unique_ptr<Transport> InMemoryNetwork::attach(const TaskId& task, NodeExecutor& executor) {
  auto ep = std::make_unique<Endpoint>(*this, task, executor);
  endpoint_slot(task) = ep.get();
  return ep;
}

void InMemoryNetwork::fail_next_calls(const TaskId& to, Status status, int count) {
  injected_failures_[to] = {std::move(status), count};
}

std::optional<Time> InMemoryNetwork::delivery_time(const TaskId& from, const TaskId& to, std::size_t bytes) {
  if (!links_) return engine_.now();
  return links_->deliver(from, to, bytes, engine_.now());
}

void InMemoryNetwork::finish(const std::shared_ptr<PendingCall>& call, StatusOr<Response> result) {
  if (call->finished) return;
  call->finished = true;
  if (call->deadline_timer != kNoTimer) engine_.cancel(call->deadline_timer);
  call->cancel_registration.reset();
  forget(*call);
  auto done = std::move(call->done);
  done(std::move(result));
}

void InMemoryNetwork::start_call(Endpoint& caller, const TaskId& to, Request request, CallOptions options,
                                 ResponseCallback done) {
  auto call = std::make_shared<PendingCall>();
  call->id = next_call_id_++;
  call->from = caller.task();
  call->to = to;
  call->caller_slot = caller.executor().node();
  call->caller_incarnation = engine_.incarnation(call->caller_slot);
  call->done = std::move(done);
  remember(call);

  // Completes the call from an event on the caller's node (never inside call()).
  auto complete_at = [this](const std::shared_ptr<PendingCall>& c, Time when, StatusOr<Response> result) {
    return engine_.post_at(c->caller_slot, c->caller_incarnation, when,
                           [this, c, r = std::move(result)]() mutable { finish(c, std::move(r)); });
  };

  Endpoint* callee = find_endpoint(to);
  if (callee == nullptr) {
    complete_at(call, engine_.now(),
                with_failed_task(absl::UnavailableError(to.short_name() + " is not reachable (connection refused)"), to));
    return;
  }
  if (auto inj = injected_failures_.find(to); inj != injected_failures_.end() && inj->second.second != 0) {
    Status st = with_failed_task(inj->second.first, to);
    if (inj->second.second > 0 && --inj->second.second == 0) injected_failures_.erase(inj);
    complete_at(call, engine_.now(), std::move(st));
    return;
  }
  if (options.cancel.cancelled()) {
    complete_at(call, engine_.now(),
                with_failed_task(absl::CancelledError("call to " + to.short_name() + " was cancelled"), to));
    return;
  }
  if (options.deadline != kTimeNever) {
    // Most deadlines are met: the error is built only if this one fires.
    call->deadline_timer = engine_.post_at(call->caller_slot, call->caller_incarnation, options.deadline, [this, call] {
      finish(call, with_failed_task(
                       absl::DeadlineExceededError("call to " + call->to.short_name() + " passed its deadline"), call->to));
    });
  }
  if (options.cancel.can_be_cancelled()) {
    std::weak_ptr<PendingCall> weak = call;
    call->cancel_registration = options.cancel.on_cancel([this, weak, complete_at] {
      auto c = weak.lock();
      if (!c || c->finished) return;
      c->callee_cancel.cancel();
      complete_at(c, engine_.now(),
                  with_failed_task(absl::CancelledError("call to " + c->to.short_name() + " was cancelled"), c->to));
    });
  }

  const bool async = links_ && links_->asynchronous();
  const MessageShape shape = async ? message_shape(request) : MessageShape{};
  const std::size_t bytes = async ? shape.bytes : links_ ? wire_size(request) : 0;
  const auto callee_slot = callee->executor().node();
  call->request = std::move(request);
  call->request_id = options.request_id;
  call->deadline = options.deadline;
  call->bytes = bytes;
  call->request_shape = shape;
  if (async) {
    const auto callee_incarnation = engine_.incarnation(callee_slot);
    // A callee that restarted meanwhile never sees the message: its
    // connection went down with it (detach() failed the call).
    if (!links_->send(call->from, to, shape, [this, call, callee_slot, callee_incarnation] {
          if (engine_.incarnation(callee_slot) == callee_incarnation) arrive(call);
        }))
      on_lost(call);
    return;
  }
  auto arrival = delivery_time(call->from, to, bytes);
  if (!arrival) {  // lost in a partition
    on_lost(call);
    return;
  }
  engine_.post_at(callee_slot, engine_.incarnation(callee_slot), *arrival, [this, call] { arrive(call); });
}

void InMemoryNetwork::arrive(const std::shared_ptr<PendingCall>& call) {
  Endpoint* target = find_endpoint(call->to);
  if (call->finished || target == nullptr || !target->handler()) {
    if (!call->finished) {
      engine_.post_at(call->caller_slot, call->caller_incarnation, engine_.now(), [this, call] {
        finish(call, with_failed_task(absl::UnavailableError(call->to.short_name() + " has no service running"),
                                      call->to));
      });
    }
    return;
  }
  ++delivered_;
  bytes_ += call->bytes;
  IncomingCall incoming{call->from, std::move(call->request), call->request_id, call->deadline,
                        call->callee_cancel.token(), nullptr};
  Responder respond = [this, call](StatusOr<Response> result) mutable {
    if (call->finished) return;
    if (links_ && links_->asynchronous()) {
      const MessageShape shape = message_shape(result.ok() ? *result : Response(EmptyResponse{}), call->request_shape);
      ++delivered_;
      bytes_ += shape.bytes;
      call->reply.emplace(std::move(result));
      if (!links_->send(call->to, call->from, shape, [this, call] {
            if (engine_.incarnation(call->caller_slot) == call->caller_incarnation && call->reply)
              finish(call, std::move(*call->reply));
          }))
        on_lost(call);
      return;
    }
    std::size_t resp_bytes = (links_ && result.ok()) ? wire_size(*result) : 0;
    auto back = delivery_time(call->to, call->from, resp_bytes);
    if (!back) {  // reply lost
      on_lost(call);
      return;
    }
    ++delivered_;
    bytes_ += resp_bytes;
    call->reply.emplace(std::move(result));
    engine_.post_at(call->caller_slot, call->caller_incarnation, *back, [this, call] {
      if (call->reply) finish(call, std::move(*call->reply));
    });
  };
  target->handler()(std::move(incoming), std::move(respond));
}

void InMemoryNetwork::on_lost(const std::shared_ptr<PendingCall>& call) {
  const auto delay = links_ ? links_->loss_detection_delay() : std::nullopt;
  if (!delay) return;
  const Time when = add_saturating(engine_.now(), *delay);
  engine_.post_at(call->caller_slot, call->caller_incarnation, when, [this, call] {
    finish(call, with_failed_task(absl::UnavailableError("connection to " + call->to.short_name() +
                                                         " timed out (no answer from the peer)"),
                                  call->to));
  });
}

InMemoryNetwork::CallsById* InMemoryNetwork::calls_of(const TaskId& task) {
  if (task.index < 0) return nullptr;
  auto& by_index = pending_[static_cast<std::size_t>(task.job)];
  if (static_cast<std::size_t>(task.index) >= by_index.size()) by_index.resize(static_cast<std::size_t>(task.index) + 1);
  return &by_index[static_cast<std::size_t>(task.index)];
}

void InMemoryNetwork::remember(const std::shared_ptr<PendingCall>& call) {
  for (const TaskId* t : {&call->from, &call->to})
    if (CallsById* calls = calls_of(*t)) calls->emplace(call->id, call);
}

void InMemoryNetwork::forget(const PendingCall& call) {
  for (const TaskId* t : {&call.from, &call.to})
    if (CallsById* calls = calls_of(*t)) calls->erase(call.id);
}

void InMemoryNetwork::detach(const TaskId& task, Endpoint* endpoint) {
  if (find_endpoint(task) != endpoint) return;
  endpoint_slot(task) = nullptr;
  // Calls in flight to the dead task fail as a reset connection would; calls it
  // made can never be answered to it, so they are dropped.
  std::vector<std::shared_ptr<PendingCall>> affected;  // in call id order
  if (CallsById* calls = calls_of(task))
    for (auto& [id, call] : *calls) affected.push_back(call);
  for (auto& call : affected) {
    if (call->from == task) {
      call->finished = true;
      if (call->deadline_timer != kNoTimer) engine_.cancel(call->deadline_timer);
      call->cancel_registration.reset();
      forget(*call);
      continue;
    }
    engine_.post_at(call->caller_slot, call->caller_incarnation, engine_.now(), [this, call, task] {
      finish(call, with_failed_task(absl::UnavailableError(task.short_name() + " went down (connection reset)"), task));
    });
  }
}

}  // namespace twinps
