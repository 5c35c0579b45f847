#pragma once
// FaultyTransport: a Transport that wraps another and, under a seeded plan,
// loses requests, loses replies, delays calls (so later calls overtake
// earlier ones) and delivers requests twice. It is the message half of the
// fault actuators (docs/design.md, "Faults are actuators"): the same wrapper
// goes around the simulator's in-memory transport or a real process's gRPC
// transport, so a fault plan means the same in both modes.
//
// What the caller sees keeps the transport contract (transport.h):
//   * a lost request or reply ends the call with UNAVAILABLE after the plan's
//     loss-detection delay (gRPC's keepalive noticing a silent peer), or with
//     DEADLINE_EXCEEDED at the deadline if that comes first; either names the
//     callee as the failed task;
//   * a duplicate carries the same request id, so a ps drops the second push
//     (CallOptions::request_id); only the first reply reaches the caller;
//   * cancelling a held-back call completes it with CANCELLED at once.
// Every decision is drawn from the plan's RandomStream in call order, so a
// simulated run with a fault plan replays exactly.
#include <cstdint>
#include <functional>
#include <memory>

#include "core/runtime/executor.h"
#include "core/runtime/random.h"
#include "core/runtime/transport.h"

namespace twinps {

struct CallFaultPlan {
  double drop_request = 0;   // probability the request never reaches the callee
  double drop_reply = 0;     // probability the callee runs the call but its reply is lost
  double duplicate = 0;      // probability the request is delivered a second time
  double delay = 0;          // probability a request is held back ...
  Duration max_delay = 0;    // ... for a time drawn uniformly from [0, max_delay]
  Duration loss_detection = 5 * kSecond;  // a lost message surfaces as UNAVAILABLE after this
  // Which calls the plan applies to (default: all). Control-plane calls can
  // be spared, for example, to fault only pulls and pushes.
  std::function<bool(const TaskId& to, const Request& request)> applies;
};

struct CallFaultCounts {
  std::uint64_t calls = 0;  // calls the plan applied to
  std::uint64_t requests_dropped = 0;
  std::uint64_t replies_dropped = 0;
  std::uint64_t duplicated = 0;
  std::uint64_t delayed = 0;
};

// Only pulls and pushes: the data plane between workers and parameter servers.
bool is_pull_or_push(const TaskId& to, const Request& request);

class FaultyTransport final : public Transport {
 public:
  // `inner` and `executor` (the caller's) must outlive this transport.
  FaultyTransport(Transport& inner, Executor& executor, CallFaultPlan plan, RandomStream random);
  // The same, owning `inner`: a task's transport wrapped for its lifetime.
  FaultyTransport(std::unique_ptr<Transport> inner, Executor& executor, CallFaultPlan plan, RandomStream random);
  ~FaultyTransport() override;
  FaultyTransport(const FaultyTransport&) = delete;
  FaultyTransport& operator=(const FaultyTransport&) = delete;

  void call(const TaskId& to, Request request, CallOptions options, ResponseCallback done) override;
  void serve(CallHandler handler) override { inner_.serve(std::move(handler)); }
  void observe_arrivals(ArrivalHook hook) override { inner_.observe_arrivals(std::move(hook)); }

  const CallFaultCounts& counts() const { return counts_; }
  // Every count is also added here (transports of several tasks, or of one
  // task's successive incarnations, summed in one place).
  void also_count_in(std::shared_ptr<CallFaultCounts> totals) { totals_ = std::move(totals); }

 private:
  struct Pending;
  struct Decision {
    bool drop_request = false, drop_reply = false, duplicate = false;
    Duration delay = 0, duplicate_delay = 0;
  };

  Decision decide();
  Duration draw_delay();
  void count(std::uint64_t CallFaultCounts::*field);
  // Sends `request` to the inner transport after `delay`; its reply goes to
  // `pending` unless `reply_counts` is false (a duplicate, a lost reply).
  void forward(const std::shared_ptr<Pending>& pending, Duration delay, Request request, bool reply_counts);
  // A message of this call was lost: fail the call once the loss is noticed.
  void fail_when_noticed(const std::shared_ptr<Pending>& pending);

  std::unique_ptr<Transport> owned_;  // null when the caller owns the inner transport
  Transport& inner_;
  Executor& executor_;
  CallFaultPlan plan_;
  RandomStream random_;
  CallFaultCounts counts_;
  std::shared_ptr<CallFaultCounts> totals_;
  // Held-back sends still queued on the executor check it: a transport torn
  // down with its task sends nothing more.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace twinps
