#include "core/ps/ps_node.h"

#include <string>
#include <utility>

namespace twinps {
namespace {

ParameterStore::Options with_default_name(ParameterStore::Options options, const TaskId& self) {
  if (options.name.empty()) options.name = self.short_name();
  return options;
}

}  // namespace

void ApplyLatency::record(Duration d) {
  std::size_t i = 0;
  while (i < kBounds.size() && d > kBounds[i]) ++i;
  ++counts[i];
  sum += d;
}

ParameterServerNode::ParameterServerNode(Runtime& runtime, ParameterStore::Options options)
    : runtime_(runtime), store_(with_default_name(std::move(options), runtime.self)) {
  runtime_.transport.serve([this](IncomingCall call, Responder respond) { handle(std::move(call), std::move(respond)); });
  // A large gradient's update is computed while the rest of it is still arriving.
  runtime_.transport.observe_arrivals(
      [this](const TaskId& from, RequestId request_id, const Request& request) -> std::shared_ptr<ArrivalObserver> {
        auto* push = std::get_if<PushRequest>(&request);
        if (!push) return nullptr;
        return store_.begin_arriving_push(*push, request_id, from);
      });
}

ParameterServerNode::~ParameterServerNode() {
  runtime_.transport.observe_arrivals(nullptr);
  runtime_.transport.serve(nullptr);
}

StatusOr<Response> ParameterServerNode::dispatch(IncomingCall& call) {
  Request& request = call.request;
  if (std::holds_alternative<HealthRequest>(request))
    return Response(HealthResponse{runtime_.self, runtime_.incarnation});
  if (auto* r = std::get_if<CreateShardsRequest>(&request)) {
    TWINPS_RETURN_IF_ERROR(store_.create_shards(*r));
    return Response(EmptyResponse{});
  }
  if (auto* r = std::get_if<PullRequest>(&request)) {
    auto pulled = store_.pull(*r);
    if (!pulled.ok()) return pulled.status();
    return Response(std::move(*pulled));
  }
  if (auto* r = std::get_if<PushRequest>(&request)) {
    // Made by this node's arrival hook (observe_arrivals), if any.
    auto* arrived = dynamic_cast<ParameterStore::ArrivingPush*>(call.arrival.get());
    auto pushed = store_.push(*r, call.request_id, call.from, arrived);
    if (!pushed.ok()) return pushed.status();
    return Response(*pushed);
  }
  if (auto* r = std::get_if<ExportShardsRequest>(&request)) {
    auto exported = store_.export_shards(*r);
    if (!exported.ok()) return exported.status();
    return Response(std::move(*exported));
  }
  if (auto* r = std::get_if<ApplySyncStepRequest>(&request)) {
    TWINPS_RETURN_IF_ERROR(store_.apply_sync_step(*r));
    return Response(EmptyResponse{});
  }
  if (auto* r = std::get_if<FenceRequest>(&request)) {
    TWINPS_RETURN_IF_ERROR(store_.set_fence(r->fence));
    return Response(EmptyResponse{});
  }
  return absl::InvalidArgumentError(runtime_.self.short_name() + " does not serve " + request_name(request));
}

void ParameterServerNode::handle(IncomingCall call, Responder respond) {
  const Time start = runtime_.executor.now();
  const std::string name = request_name(call.request);
  const double request_bytes = static_cast<double>(wire_size(call.request));
  const bool push = std::holds_alternative<PushRequest>(call.request);
  StatusOr<Response> result = dispatch(call);
  if (push && result.ok()) apply_latency_.record(runtime_.executor.now() - start);
  const std::string code = absl::StatusCodeToString(result.status().code());
  const PushResponse* pushed = result.ok() ? std::get_if<PushResponse>(&*result) : nullptr;
  if (pushed && pushed->staleness.total > 0) {
    runtime_.trace.span(runtime_.self, "ps", name, start, runtime_.executor.now() - start,
                        {TraceArg{"request_bytes", request_bytes}, TraceArg{"status", 0, code},
                         TraceArg{"gradients", static_cast<double>(pushed->staleness.total)},
                         TraceArg{"max_staleness", static_cast<double>(pushed->staleness.max)}});
  } else {
    runtime_.trace.span(runtime_.self, "ps", name, start, runtime_.executor.now() - start,
                        {TraceArg{"request_bytes", request_bytes}, TraceArg{"status", 0, code}});
  }
  respond(std::move(result));
}

}  // namespace twinps
