#pragma once
// A worker task: builds per-worker resources and runs registered step
// functions when the coordinator asks. It holds no training state of its own
// beyond its resources: variables live on the parameter servers.
#include <map>
#include <memory>

#include "core/runtime/runtime.h"
#include "core/runtime/task.h"
#include "core/variables/directory.h"
#include "core/worker/function_registry.h"
#include "core/worker/resource.h"

namespace twinps {

struct WorkerOptions {
  // Deadline of each call a step function makes to a parameter server. A
  // call that passes it fails the closure with DEADLINE_EXCEEDED (spec C18).
  Duration ps_call_timeout = 30 * kSecond;
  // Setup waits until every parameter server in the directory answers (a
  // restarted ps may still be unreachable over a stale connection); it gives
  // up after this long, or at the setup call's own deadline if sooner.
  Duration ps_connect_timeout = 30 * kSecond;
};

class WorkerNode {
 public:
  WorkerNode(Runtime& runtime, const FunctionRegistry& registry, WorkerOptions options = {});
  WorkerNode(const WorkerNode&) = delete;
  WorkerNode& operator=(const WorkerNode&) = delete;

  std::size_t resource_count() const { return resources_.size(); }
  std::uint64_t closures_run() const { return closures_run_; }

 private:
  void handle(IncomingCall call, Responder respond);
  Task<void> setup(IncomingCall call, Responder respond);
  StatusOr<Response> create_resource(const CreateResourceRequest& req);
  Task<void> run_closure(IncomingCall call, Responder respond);

  Runtime& runtime_;
  const FunctionRegistry& registry_;
  WorkerOptions options_;
  TaskScope scope_;
  bool set_up_ = false;
  Fence fence_;
  // Shared with the steps running now: a SetupWorker that arrives while one
  // runs (a recovery after a partition, a restarted coordinator) replaces the
  // directory for later steps and leaves the running ones theirs.
  std::shared_ptr<const VariableDirectory> variables_ = std::make_shared<const VariableDirectory>();
  std::map<ResourceId, std::unique_ptr<Resource>> resources_;
  std::uint64_t closures_run_ = 0;
  std::uint64_t push_counter_ = 0;  // numbers this task's pushes (request ids)
};

}  // namespace twinps
