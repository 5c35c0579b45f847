#include "sim/ps_service.h"

#include <algorithm>
#include <cmath>

#include "sim/network.h"

namespace twinps::sim {

PsServiceTransport::PsServiceTransport(TaskId self, Executor& executor, std::unique_ptr<Transport> inner,
                                       const PsServiceModel& model, PsServiceStats& stats, TraceSink& trace,
                                       std::function<std::uint64_t()> rows_updated, std::vector<PushRecord>* pushes,
                                       NetworkModel* network)
    : self_(self),
      executor_(executor),
      inner_(std::move(inner)),
      model_(model),
      stats_(stats),
      trace_(trace),
      rows_updated_(std::move(rows_updated)),
      pushes_(pushes),
      network_(network),
      free_at_(static_cast<std::size_t>(std::max(model.threads, 1)), 0) {}

void PsServiceTransport::serve(CallHandler handler) {
  handler_ = std::move(handler);
  if (!handler_) {
    inner_->serve(nullptr);
    return;
  }
  inner_->serve([this](IncomingCall call, Responder respond) { arrive(std::move(call), std::move(respond)); });
}

void PsServiceTransport::arrive(IncomingCall call, Responder respond) {
  // Health checks are answered at once, outside the service queue and its
  // counters: the queue models the threads that apply pulls and pushes, and
  // the coordinator's heartbeats test whether the ps is alive, not how busy
  // it is (a hot ps must not be taken for a hung one).
  if (std::holds_alternative<HealthRequest>(call.request)) {
    handler_(std::move(call), std::move(respond));
    return;
  }
  queue_.push_back(Waiting{std::move(call), std::move(respond), executor_.now()});
  stats_.max_queue = std::max(stats_.max_queue, queue_.size());
  start_next();
}

void PsServiceTransport::start_next() {
  while (!queue_.empty() && handler_) {
    const Time now = executor_.now();
    // The lowest-numbered free thread takes the head of the queue.
    const auto earliest = std::min_element(free_at_.begin(), free_at_.end());
    if (*earliest > now) {
      if (wake_ == kNoTimer) wake_ = executor_.post_at(*earliest, [this] {
        wake_ = kNoTimer;
        start_next();
      });
      return;
    }
    Waiting w = std::move(queue_.front());
    queue_.pop_front();
    serve_one(std::move(w), static_cast<std::size_t>(earliest - free_at_.begin()));
  }
}

void PsServiceTransport::serve_one(Waiting w, std::size_t thread) {
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
  const std::size_t request_bytes = wire_size(w.call.request);
  const std::uint64_t rows_before = rows_updated_();
  const char* name = request_name(w.call.request);
  const auto* push = std::get_if<PushRequest>(&w.call.request);
  const Fence fence = push ? push->fence : Fence{};
  Responder respond = std::move(w.respond);
  handler_(std::move(w.call), [this, respond = std::move(respond), start, waited, request_bytes, rows_before, name,
                               push = push != nullptr, fence, thread](StatusOr<Response> result) mutable {
    const std::size_t reply_bytes = wire_size(result.ok() ? *result : Response(EmptyResponse{}));
    const std::uint64_t rows = rows_updated_() - rows_before;
    if (push && pushes_) pushes_->push_back(PushRecord{start, self_.index, fence, result.ok()});
    const Duration service =
        model_.per_request +
        static_cast<Duration>(std::llround(model_.per_byte_ns * static_cast<double>(request_bytes + reply_bytes) +
                                           model_.per_row_ns * static_cast<double>(rows)));
    free_at_[thread] = start + service;
    stats_.bytes_in += request_bytes;
    stats_.bytes_out += reply_bytes;
    stats_.rows_updated += rows;
    stats_.busy += service;
    trace_.span(self_, "ps_service", name, start, service,
                {TraceArg{"queued_us", static_cast<double>(waited) / 1000.0}, TraceArg{"rows", static_cast<double>(rows)},
                 TraceArg{"ok", result.ok() ? 1.0 : 0.0}});
    const Duration remaining = start + service - executor_.now();
    if (network_) {
      network_->depart_later(self_, remaining);
      respond(std::move(result));
    } else {
      executor_.post_after(remaining, [respond = std::move(respond), result = std::move(result)]() mutable {
        respond(std::move(result));
      });
    }
  });
}

}  // namespace twinps::sim
