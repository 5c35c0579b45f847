#pragma once
// The second half of core's runtime seam: request/response calls between
// tasks. The simulator delivers messages after modelled latency, bandwidth and
// queueing (or fails them when the peer is down or partitioned); net/ uses
// gRPC with deadlines. Contract for every implementation:
//   * `done` runs exactly once, on the caller's executor, never inside call();
//   * an error the transport itself produced (peer unreachable, deadline,
//     cancelled) carries the callee as its failed task (status.h); an error the
//     callee's handler returned arrives unchanged, payloads included;
//   * cancelling `options.cancel` completes the call with CANCELLED promptly
//     and tells the callee's handler through IncomingCall::cancelled.
#include <cstdint>
#include <cstddef>
#include <functional>
#include <memory>

#include "core/cluster/task_id.h"
#include "core/messages/messages.h"
#include "core/runtime/cancellation.h"
#include "core/runtime/status.h"
#include "core/runtime/sync.h"
#include "core/runtime/time.h"
#include "core/runtime/unique_function.h"

namespace twinps {

struct CallOptions {
  Time deadline = kTimeNever;  // absolute, on the caller's clock
  CancelToken cancel;
  RequestId request_id = 0;  // lets the callee drop a duplicate (0 = none)
};

// A callee's view of a request's tensor bytes while they arrive, for work
// that can start before the whole message is in (a ps computing an update
// from the part of a gradient already received). A transport that receives
// messages whole (the simulator's, gRPC) never asks for one.
class ArrivalObserver {
 public:
  virtual ~ArrivalObserver() = default;
  // `bytes` bytes have been written at `at`, inside the memory of one of the
  // request's tensors; each tensor's bytes come in order, front to back. Only
  // tensors sent apart from the request's metadata are shown (the data plane
  // sends small ones inside it, and they are there when the hook is called).
  virtual void arrived(const char* at, std::size_t bytes) = 0;
};

struct IncomingCall {
  TaskId from;
  Request request;
  RequestId request_id = 0;
  Time deadline = kTimeNever;  // on the callee's clock
  CancelToken cancelled;       // fires if the caller gives up
  std::shared_ptr<ArrivalObserver> arrival;  // what the ArrivalHook gave for this call, if anything
};

using ResponseCallback = UniqueFunction<void(StatusOr<Response>)>;
using Responder = UniqueFunction<void(StatusOr<Response>)>;
// Called on the callee's executor; must call the responder exactly once, now or later.
using CallHandler = std::function<void(IncomingCall, Responder)>;
// Called on the callee's executor once a request's metadata is in and its
// tensors are allocated but not yet filled (`request`'s tensors are where the
// bytes will land); null or a null result: nothing to observe.
using ArrivalHook =
    std::function<std::shared_ptr<ArrivalObserver>(const TaskId& from, RequestId request_id, const Request& request)>;

class Transport {
 public:
  virtual ~Transport() = default;
  virtual void call(const TaskId& to, Request request, CallOptions options, ResponseCallback done) = 0;
  // Installs the handler for calls addressed to this task (replacing any earlier one).
  virtual void serve(CallHandler handler) = 0;
  // Installs (or, with null, removes) the hook for requests whose bytes this
  // transport receives piece by piece. Default: it receives messages whole.
  virtual void observe_arrivals(ArrivalHook /*hook*/) {}
};

// Awaitable form of Transport::call.
inline Future<StatusOr<Response>> call_async(Executor& ex, Transport& transport, const TaskId& to, Request request,
                                             CallOptions options = {}) {
  Promise<StatusOr<Response>> promise(ex);
  auto future = promise.future();
  // `done` is an event of its own on this executor (the transport contract),
  // so the awaiting coroutine resumes right there rather than one event later.
  transport.call(to, std::move(request), std::move(options),
                 [promise = std::move(promise)](StatusOr<Response> r) mutable { promise.set_and_resume(std::move(r)); });
  return future;
}

// Unpacks a response of the expected type, or an INTERNAL error naming the mismatch.
template <typename T>
StatusOr<T> response_as(StatusOr<Response> r) {
  if (!r.ok()) return r.status();
  if (auto* v = std::get_if<T>(&*r)) return std::move(*v);
  return absl::InternalError("unexpected response type");
}

}  // namespace twinps
