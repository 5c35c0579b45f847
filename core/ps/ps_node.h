#pragma once
// A parameter-server task: serves the ps requests of core/messages/messages.h
// from a ParameterStore over the node's transport. Requests are answered at
// once, on the node's executor; an invalid request is answered with its error
// and the node keeps serving. Errors are not attributed to this task as a
// failed task (status.h): a refused request is the caller's mistake or a
// fence, not a ps failure, and must not be classified as one.
#include <array>
#include <cstdint>

#include "core/ps/parameter_store.h"
#include "core/runtime/runtime.h"

namespace twinps {

// How long accepted pushes took to apply, on the task's clock, as counts in
// fixed buckets (what a metrics endpoint exports as a histogram).
struct ApplyLatency {
  static constexpr std::array<Duration, 14> kBounds = {
      10 * kMicrosecond, 25 * kMicrosecond, 50 * kMicrosecond, 100 * kMicrosecond, 250 * kMicrosecond,
      500 * kMicrosecond, kMillisecond, 2500 * kMicrosecond, 5 * kMillisecond, 10 * kMillisecond,
      25 * kMillisecond, 50 * kMillisecond, 100 * kMillisecond, kSecond};
  std::array<std::uint64_t, kBounds.size() + 1> counts{};  // the last: above every bound
  Duration sum = 0;
  void record(Duration d);
};

class ParameterServerNode {
 public:
  // Starts serving on runtime.transport. An empty `options.name` becomes the
  // task's short name ("ps:0"), so errors say which ps refused.
  explicit ParameterServerNode(Runtime& runtime, ParameterStore::Options options = {});
  // Stops serving: later calls fail as to a task with no service running.
  ~ParameterServerNode();
  ParameterServerNode(const ParameterServerNode&) = delete;
  ParameterServerNode& operator=(const ParameterServerNode&) = delete;

  ParameterStore& store() { return store_; }
  const ParameterStore& store() const { return store_; }
  const ApplyLatency& apply_latency() const { return apply_latency_; }

 private:
  void handle(IncomingCall call, Responder respond);
  StatusOr<Response> dispatch(IncomingCall& call);

  Runtime& runtime_;
  ParameterStore store_;
  ApplyLatency apply_latency_;
};

}  // namespace twinps
