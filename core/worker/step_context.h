#pragma once
// What a step function sees while it runs on a worker: its arguments (with
// per-worker resources resolved), the variable directory, a client for the
// parameter servers bound to this closure's fence and cancellation, and the
// worker's executor and random stream.
#include <string>
#include <string_view>
#include <vector>

#include "core/messages/messages.h"
#include "core/runtime/modelled_work.h"
#include "core/runtime/runtime.h"
#include "core/runtime/sync.h"
#include "core/runtime/task.h"
#include "core/variables/directory.h"
#include "core/worker/parameter_client.h"
#include "core/worker/resource.h"

namespace twinps {

class StepContext {
 public:
  StepContext(Runtime& runtime, const VariableDirectory& variables, std::vector<Value> args,
              std::vector<Resource*> resources, ParameterClient& ps, CancelToken cancelled, RandomStream random)
      : runtime_(runtime),
        variables_(variables),
        args_(std::move(args)),
        resources_(std::move(resources)),
        ps_(ps),
        cancelled_(std::move(cancelled)),
        random_(random) {}

  int worker_index() const { return runtime_.self.index; }
  const TaskId& task() const { return runtime_.self; }
  const std::vector<Value>& args() const { return args_; }

  // The resource passed as argument `i`, as type R, or INVALID_ARGUMENT.
  template <typename R>
  StatusOr<R*> resource(std::size_t i) const {
    if (i >= resources_.size() || resources_[i] == nullptr)
      return absl::InvalidArgumentError("argument " + std::to_string(i) + " is not a per-worker resource");
    auto* r = dynamic_cast<R*>(resources_[i]);
    if (!r) return absl::InvalidArgumentError("argument " + std::to_string(i) + " is a resource of another type");
    return r;
  }

  // The variable `name`, or INVALID_ARGUMENT if the coordinator created none by that name.
  StatusOr<const VariableLayout*> variable(std::string_view name) const {
    if (const auto* v = variables_.find(name)) return v;
    return absl::InvalidArgumentError("no variable named \"" + std::string(name) + "\" was created");
  }

  ParameterClient& ps() { return ps_; }

  // Marks where the step computes. With a cost model (the simulator) the
  // modelled duration passes on the clock here; on real hardware the work
  // itself took the time and this returns at once.
  Task<void> compute(ComputeCost cost) {
    if (!runtime_.cost) co_return;
    const Duration d = runtime_.cost->compute(runtime_.self, cost);
    if (d > 0) co_await spend_modelled(runtime_, d);
  }
  Executor& executor() { return runtime_.executor; }
  TraceSink& trace() { return runtime_.trace; }
  RandomStream& random() { return random_; }
  const CancelToken& cancelled() const { return cancelled_; }

 private:
  Runtime& runtime_;
  const VariableDirectory& variables_;
  std::vector<Value> args_;
  std::vector<Resource*> resources_;
  ParameterClient& ps_;
  CancelToken cancelled_;
  RandomStream random_;
};

}  // namespace twinps
