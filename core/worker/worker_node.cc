#include "core/worker/worker_node.h"

#include <set>

#include "core/worker/parameter_client.h"
#include "core/worker/step_context.h"

namespace twinps {

WorkerNode::WorkerNode(Runtime& runtime, const FunctionRegistry& registry, WorkerOptions options)
    : runtime_(runtime), registry_(registry), options_(options), scope_(runtime.executor) {
  runtime_.transport.serve([this](IncomingCall call, Responder respond) { handle(std::move(call), std::move(respond)); });
}

void WorkerNode::handle(IncomingCall call, Responder respond) {
  if (std::holds_alternative<RunClosureRequest>(call.request)) {
    scope_.spawn(run_closure(std::move(call), std::move(respond)));
    return;
  }
  if (std::holds_alternative<HealthRequest>(call.request)) {
    respond(Response(HealthResponse{runtime_.self, runtime_.incarnation}));
  } else if (std::holds_alternative<SetupWorkerRequest>(call.request)) {
    scope_.spawn(setup(std::move(call), std::move(respond)));
  } else if (auto* create = std::get_if<CreateResourceRequest>(&call.request)) {
    const Time start = runtime_.executor.now();
    respond(create_resource(*create));
    runtime_.trace.span(runtime_.self, "worker", "create_resource", start, runtime_.executor.now() - start,
                        {TraceArg{"resource", static_cast<double>(create->id)}, TraceArg{"fn", 0, create->fn}});
  } else {
    respond(absl::InvalidArgumentError(runtime_.self.short_name() + " does not serve " + request_name(call.request)));
  }
}

Task<void> WorkerNode::setup(IncomingCall call, Responder respond) {
  auto& req = std::get<SetupWorkerRequest>(call.request);
  // Like TensorFlow's cluster update, setup completes only when this worker
  // can reach every parameter server its closures will use.
  std::set<int> ps;
  for (const auto& v : req.variables)
    for (const auto& s : v.shards) ps.insert(s.ps);
  // Give up early enough for the answer to reach the caller before its deadline.
  const Time now = runtime_.executor.now();
  Duration patience = options_.ps_connect_timeout;
  if (call.deadline != kTimeNever) patience = std::min(patience, (call.deadline - now) * 3 / 4);
  const Time give_up = add_saturating(now, patience);
  for (int p : ps) {
    for (;;) {
      CallOptions opts;
      opts.deadline = std::min(give_up, add_saturating(runtime_.executor.now(), kSecond));
      opts.cancel = call.cancelled;
      auto r = co_await call_async(runtime_.executor, runtime_.transport, TaskId::ps(p), HealthRequest{}, opts);
      if (r.ok()) break;
      if (runtime_.executor.now() >= give_up || call.cancelled.cancelled()) {
        // Attributed to the ps: the coordinator treats it as a ps failure. The
        // transport's message (which names the address tried) is kept without
        // its code and failed-task suffix, which the relayed status carries.
        respond(with_failed_task(Status(r.status().code(), runtime_.self.short_name() + " cannot reach ps:" +
                                                               std::to_string(p) + ": " +
                                                               std::string(r.status().message())),
                                 TaskId::ps(p)));
        co_return;
      }
      co_await sleep_for(runtime_.executor, 50 * kMillisecond);
    }
  }
  // A new coordinator (or the same one after recovery) re-sends the directory;
  // a different coordinator's resources are of no use to this one.
  if (req.fence.coordinator != fence_.coordinator) resources_.clear();
  fence_ = req.fence;
  variables_ = std::make_shared<const VariableDirectory>(req.variables);
  set_up_ = true;
  respond(Response(EmptyResponse{}));
}

StatusOr<Response> WorkerNode::create_resource(const CreateResourceRequest& req) {
  const ResourceFunction* fn = registry_.resource(req.fn);
  if (!fn) return absl::InvalidArgumentError("no resource function registered as \"" + req.fn + "\"");
  Resource* parent = nullptr;
  if (req.parent != 0) {
    auto it = resources_.find(req.parent);
    if (it == resources_.end()) {
      // The parent is gone only if this worker restarted since the coordinator built it.
      return with_error_kind(absl::AbortedError(runtime_.self.short_name() + " has no resource " +
                                                std::to_string(req.parent) + " (it restarted)"),
                             ErrorKind::kStaleIncarnation);
    }
    parent = it->second.get();
  }
  ResourceContext ctx{runtime_.self.index, req.args, parent, runtime_.random.fork("resource", req.id)};
  auto made = (*fn)(ctx);
  if (!made.ok()) return made.status();
  resources_[req.id] = std::move(*made);
  return Response(EmptyResponse{});
}

Task<void> WorkerNode::run_closure(IncomingCall call, Responder respond) {
  auto& req = std::get<RunClosureRequest>(call.request);
  const Time start = runtime_.executor.now();
  auto fail = [&](Status s) { respond(std::move(s)); };
  if (req.worker_incarnation != runtime_.incarnation || !set_up_) {
    fail(with_error_kind(absl::AbortedError(runtime_.self.short_name() + " restarted since the coordinator set it up"),
                         ErrorKind::kStaleIncarnation));
    co_return;
  }
  const StepFunction* fn = registry_.step(req.fn);
  if (!fn) {
    fail(absl::InvalidArgumentError("no step function registered as \"" + req.fn + "\""));
    co_return;
  }
  std::vector<Resource*> resolved(req.args.size(), nullptr);
  for (std::size_t i = 0; i < req.args.size(); ++i) {
    if (auto* ref = std::get_if<ResourceRef>(&req.args[i])) {
      auto it = resources_.find(ref->id);
      if (it == resources_.end()) {
        fail(with_error_kind(absl::AbortedError(runtime_.self.short_name() + " has no resource " +
                                                std::to_string(ref->id)),
                             ErrorKind::kStaleIncarnation));
        co_return;
      }
      resolved[i] = it->second.get();
    }
  }
  ++closures_run_;
  ParameterClient ps(runtime_, req.fence, call.cancelled, options_.ps_call_timeout, push_counter_);
  ps.set_sync_step(req.sync_step);
  const std::shared_ptr<const VariableDirectory> variables = variables_;
  StepContext ctx(runtime_, *variables, std::move(req.args), std::move(resolved), ps, call.cancelled,
                  runtime_.random.fork("closure", req.id));
  StatusOr<Value> result = co_await (*fn)(ctx);
  const StalenessHistogram& staleness = ps.staleness();
  runtime_.trace.span(runtime_.self, "worker", req.fn, start, runtime_.executor.now() - start,
                      {TraceArg{"closure", static_cast<double>(req.id)}, TraceArg{"ok", result.ok() ? 1.0 : 0.0},
                       TraceArg{"gradients", static_cast<double>(staleness.total)},
                       TraceArg{"max_staleness", static_cast<double>(staleness.max)}});
  if (result.ok()) {
    respond(Response(RunClosureResponse{std::move(*result), staleness}));
  } else {
    respond(result.status());
  }
}

}  // namespace twinps
