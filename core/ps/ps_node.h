#pragma once
// A parameter-server task: serves the ps requests of core/messages/messages.h
// from a ParameterStore over the node's transport. Requests are answered at
// once, on the node's executor; an invalid request is answered with its error
// and the node keeps serving. Errors are not attributed to this task as a
// failed task (status.h): a refused request is the caller's mistake or a
// fence, not a ps failure, and must not be classified as one.
#include "core/ps/parameter_store.h"
#include "core/runtime/runtime.h"

namespace twinps {

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

 private:
  void handle(IncomingCall call, Responder respond);
  StatusOr<Response> dispatch(IncomingCall& call);

  Runtime& runtime_;
  ParameterStore store_;
};

}  // namespace twinps
