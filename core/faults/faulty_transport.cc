#include "core/faults/faulty_transport.h"

#include <memory>
#include <optional>
#include <utility>
#include <variant>
#include <vector>

#include "core/runtime/cancellation.h"
#include "core/runtime/status.h"

namespace twinps {

// One call's state, shared by its timers and the inner transport's callbacks.
struct FaultyTransport::Pending {
  Executor* executor = nullptr;
  TaskId to;
  CallOptions options;
  ResponseCallback done;
  bool finished = false;
  std::vector<TimerId> timers;  // deadline, loss detection, a held-back send
  CancelRegistration on_cancel;

  // Completes the call once; later outcomes (a reply after the deadline, the
  // inner transport's own deadline) are ignored.
  void finish(StatusOr<Response> result) {
    if (finished) return;
    finished = true;
    for (TimerId t : timers) executor->cancel(t);
    on_cancel.reset();
    auto callback = std::move(done);
    callback(std::move(result));
  }
};

FaultyTransport::FaultyTransport(Transport& inner, Executor& executor, CallFaultPlan plan, RandomStream random)
    : inner_(inner), executor_(executor), plan_(std::move(plan)), random_(std::move(random)) {}

FaultyTransport::FaultyTransport(std::unique_ptr<Transport> inner, Executor& executor, CallFaultPlan plan,
                                 RandomStream random)
    : owned_(std::move(inner)), inner_(*owned_), executor_(executor), plan_(std::move(plan)), random_(std::move(random)) {}

FaultyTransport::~FaultyTransport() { *alive_ = false; }

bool is_pull_or_push(const TaskId&, const Request& request) {
  return std::holds_alternative<PullRequest>(request) || std::holds_alternative<PushRequest>(request);
}

void FaultyTransport::count(std::uint64_t CallFaultCounts::*field) {
  ++(counts_.*field);
  if (totals_) ++((*totals_).*field);
}

Duration FaultyTransport::draw_delay() {
  // Both numbers are drawn whatever the outcome, so each call consumes the
  // same amount of the stream and one decision never shifts the next call's.
  const bool held = random_.uniform() < plan_.delay;
  const double fraction = random_.uniform();
  return held ? static_cast<Duration>(fraction * static_cast<double>(plan_.max_delay)) : 0;
}

FaultyTransport::Decision FaultyTransport::decide() {
  Decision d;
  d.drop_request = random_.uniform() < plan_.drop_request;
  d.drop_reply = random_.uniform() < plan_.drop_reply;
  d.duplicate = random_.uniform() < plan_.duplicate;
  d.delay = draw_delay();
  d.duplicate_delay = draw_delay();
  return d;
}

void FaultyTransport::call(const TaskId& to, Request request, CallOptions options, ResponseCallback done) {
  if (plan_.applies && !plan_.applies(to, request)) {
    inner_.call(to, std::move(request), std::move(options), std::move(done));
    return;
  }
  count(&CallFaultCounts::calls);
  const Decision d = decide();
  auto pending = std::make_shared<Pending>();
  pending->executor = &executor_;
  pending->to = to;
  pending->options = options;
  pending->done = std::move(done);

  if (options.deadline != kTimeNever) {
    pending->timers.push_back(executor_.post_at(options.deadline, [pending] {
      pending->finish(with_failed_task(
          absl::DeadlineExceededError("deadline exceeded calling " + pending->to.short_name()), pending->to));
    }));
  }
  // A held-back or lost call must still end promptly when cancelled; the
  // completion is posted, as done never runs inside cancel() or call().
  pending->on_cancel = options.cancel.on_cancel([executor = &executor_, weak = std::weak_ptr<Pending>(pending)] {
    executor->post([weak] {
      if (auto p = weak.lock()) p->finish(absl::CancelledError("the call was cancelled"));
    });
  });

  std::optional<Request> copy;
  if (d.duplicate) copy = request;
  if (d.drop_request) {
    count(&CallFaultCounts::requests_dropped);
    fail_when_noticed(pending);
  } else {
    if (d.delay > 0) count(&CallFaultCounts::delayed);
    if (d.drop_reply) {
      count(&CallFaultCounts::replies_dropped);
      fail_when_noticed(pending);
    }
    forward(pending, d.delay, std::move(request), /*reply_counts=*/!d.drop_reply);
  }
  if (copy) {
    count(&CallFaultCounts::duplicated);
    forward(pending, d.duplicate_delay, std::move(*copy), /*reply_counts=*/false);
  }
}

void FaultyTransport::forward(const std::shared_ptr<Pending>& pending, Duration delay, Request request,
                              bool reply_counts) {
  auto send = [inner = &inner_, alive = alive_, pending, request = std::move(request), reply_counts]() mutable {
    if (!*alive) return;
    // The call itself ended while its request was held back (cancelled,
    // deadline): the request is not sent. A duplicate goes out regardless,
    // as a retransmission can reach the callee after the reply came back.
    if (reply_counts && pending->finished) return;
    inner->call(pending->to, std::move(request), pending->options, [pending, reply_counts](StatusOr<Response> r) {
      if (reply_counts) pending->finish(std::move(r));
    });
  };
  if (delay == 0) {
    send();
    return;
  }
  const TimerId timer = executor_.post_after(delay, std::move(send));
  if (reply_counts) pending->timers.push_back(timer);
}

void FaultyTransport::fail_when_noticed(const std::shared_ptr<Pending>& pending) {
  const Time noticed = add_saturating(executor_.now(), plan_.loss_detection);
  if (pending->options.deadline <= noticed) return;  // the deadline ends the call first
  pending->timers.push_back(executor_.post_at(noticed, [pending] {
    pending->finish(with_failed_task(
        absl::UnavailableError(pending->to.short_name() + " did not answer: a message was lost"), pending->to));
  }));
}

}  // namespace twinps
