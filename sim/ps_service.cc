#include "sim/ps_service.h"

#include <algorithm>
#include <cmath>

namespace twinps::sim {

PsServiceTransport::PsServiceTransport(TaskId self, Executor& executor, std::unique_ptr<Transport> inner,
                                       const PsServiceModel& model, PsServiceStats& stats, TraceSink& trace,
                                       std::function<std::uint64_t()> rows_updated, std::vector<PushRecord>* pushes)
    : self_(self),
      executor_(executor),
      inner_(std::move(inner)),
      model_(model),
      stats_(stats),
      trace_(trace),
      rows_updated_(std::move(rows_updated)),
      pushes_(pushes) {}

void PsServiceTransport::serve(CallHandler handler) {
  handler_ = std::move(handler);
  if (!handler_) {
    inner_->serve(nullptr);
    return;
  }
  inner_->serve([this](IncomingCall call, Responder respond) { arrive(std::move(call), std::move(respond)); });
}

void PsServiceTransport::arrive(IncomingCall call, Responder respond) {
  queue_.push_back(Waiting{std::move(call), std::move(respond), executor_.now()});
  stats_.max_queue = std::max(stats_.max_queue, queue_.size());
  start_next();
}

void PsServiceTransport::start_next() {
  while (busy_ < model_.threads && !queue_.empty() && handler_) {
    Waiting w = std::move(queue_.front());
    queue_.pop_front();
    serve_one(std::move(w));
  }
}

void PsServiceTransport::serve_one(Waiting w) {
  const Time start = executor_.now();
  const Duration waited = start - w.arrived;
  stats_.total_wait += waited;
  stats_.max_wait = std::max(stats_.max_wait, waited);
  ++stats_.requests;
  if (w.call.cancelled.cancelled()) {
    // The caller already gave up: a server drops it without working on it.
    w.respond(absl::CancelledError("the caller cancelled the request"));
    return;
  }
  ++busy_;
  const std::size_t request_bytes = wire_size(w.call.request);
  const std::uint64_t rows_before = rows_updated_();
  const char* name = request_name(w.call.request);
  const auto* push = std::get_if<PushRequest>(&w.call.request);
  const Fence fence = push ? push->fence : Fence{};
  Responder respond = std::move(w.respond);
  handler_(std::move(w.call), [this, respond = std::move(respond), start, waited, request_bytes, rows_before, name,
                               push = push != nullptr, fence](StatusOr<Response> result) mutable {
    const std::size_t reply_bytes = wire_size(result.ok() ? *result : Response(EmptyResponse{}));
    const std::uint64_t rows = rows_updated_() - rows_before;
    if (push && pushes_) pushes_->push_back(PushRecord{start, self_.index, fence, result.ok()});
    const Duration service =
        model_.per_request +
        static_cast<Duration>(std::llround(model_.per_byte_ns * static_cast<double>(request_bytes + reply_bytes) +
                                           model_.per_row_ns * static_cast<double>(rows)));
    stats_.bytes_in += request_bytes;
    stats_.bytes_out += reply_bytes;
    stats_.rows_updated += rows;
    stats_.busy += service;
    trace_.span(self_, "ps_service", name, start, service,
                {TraceArg{"queued_us", static_cast<double>(waited) / 1000.0}, TraceArg{"rows", static_cast<double>(rows)},
                 TraceArg{"ok", result.ok() ? 1.0 : 0.0}});
    executor_.post_after(service, [this, respond = std::move(respond), result = std::move(result)]() mutable {
      --busy_;
      respond(std::move(result));
      start_next();
    });
  });
}

}  // namespace twinps::sim
