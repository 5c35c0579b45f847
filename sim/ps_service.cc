#include "sim/ps_service.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>

#include "sim/hosts.h"
#include "sim/network.h"

namespace twinps::sim {

PsServiceTransport::PsServiceTransport(TaskId self, Executor& executor, std::unique_ptr<Transport> inner,
                                       const PsServiceModel& model, PsServiceStats& stats, TraceSink& trace,
                                       std::function<std::uint64_t()> rows_updated, std::vector<PushRecord>* pushes,
                                       NetworkModel* network, HostModel* hosts)
    : self_(self),
      executor_(executor),
      inner_(std::move(inner)),
      model_(model),
      stats_(stats),
      trace_(trace),
      rows_updated_(std::move(rows_updated)),
      pushes_(pushes),
      network_(network),
      hosts_(hosts),
      free_at_(static_cast<std::size_t>(std::max(model.threads, 1)), 0) {}

void PsServiceTransport::serve(CallHandler handler) {
  handler_ = std::move(handler);
  if (!handler_) {
    inner_->serve(nullptr);
    return;
  }
  inner_->serve([this](IncomingCall call, Responder respond) { arrive(std::move(call), std::move(respond)); });
}

Duration PsServiceModel::service(std::size_t request_bytes, std::size_t reply_bytes, std::uint64_t rows,
                                 std::int64_t items, bool push, std::size_t row_bytes,
                                 std::size_t pushed_row_bytes, Wake woke, Duration idle, std::int64_t items_by_id,
                                 std::int64_t items_pushed_by_id) const {
  const double bytes = static_cast<double>(request_bytes + reply_bytes);
  double ns = per_row_ns * static_cast<double>(rows) + per_item_ns * static_cast<double>(items) +
              per_item_by_id_ns * static_cast<double>(items_by_id) +
              apply_per_item_by_id_ns * static_cast<double>(items_pushed_by_id);
  ns += bytes_curve.empty() ? per_byte_ns * bytes : curve_cost(bytes_curve, bytes);
  if (push) {
    const double pushed = static_cast<double>(request_bytes);
    ns += (apply_curve.empty() ? apply_per_byte_ns * pushed : curve_cost(apply_curve, pushed)) +
          apply_per_row_ns * static_cast<double>(rows);
  }
  ns += per_row_byte_ns * static_cast<double>(row_bytes) + apply_per_row_byte_ns * static_cast<double>(pushed_row_bytes);
  return fixed_price(woke, idle) + static_cast<Duration>(std::llround(ns));
}

Duration PsServiceModel::fixed_price(Wake woke, Duration idle) const {
  if (woke == Wake::kNothing && per_request_when_awake) return *per_request_when_awake;
  if (woke == Wake::kBusyCore && per_request_on_busy_host) return *per_request_on_busy_host;
  if (woke != Wake::kNothing && !per_request_by_idle.empty())
    return static_cast<Duration>(std::llround(level_curve_cost(per_request_by_idle, static_cast<double>(idle))));
  return per_request;
}

namespace {

std::size_t values_bytes(const Matrix& values, const std::optional<MetaTensor>& meta) {
  return byte_size(values) + (meta ? byte_size(*meta) : 0);
}

void add_pulled_by_id(const PullRequest& pull, RowValues& out) {
  for (std::size_t i = 0; i < pull.items.size(); ++i)
    if (!pull.items[i].all_rows) out.pulled_items.push_back(i);
}

}  // namespace

RowValues row_values(const Request& request) {
  RowValues out;
  if (const auto* pull = std::get_if<PullRequest>(&request)) add_pulled_by_id(*pull, out);
  if (const auto* push = std::get_if<PushRequest>(&request)) {
    for (const auto& u : push->updates)
      if (u.sparse) out.pushed += values_bytes(u.values, u.meta);
    add_pulled_by_id(push->then_pull, out);
  }
  return out;
}

std::size_t RowValues::pulled(const StatusOr<Response>& reply) const {
  if (pulled_items.empty() || !reply.ok()) return 0;
  const PullResponse* pulled = std::get_if<PullResponse>(&*reply);
  if (const auto* push = std::get_if<PushResponse>(&*reply)) pulled = &push->pulled;
  if (!pulled) return 0;
  std::size_t bytes = 0;
  for (std::size_t i : pulled_items)
    if (i < pulled->items.size()) bytes += values_bytes(pulled->items[i].values, pulled->items[i].meta);
  return bytes;
}

std::size_t PsServiceTransport::step_row_bytes(std::uint64_t rows) {
  const double per_row = sync_rows_pushed_ == 0 ? 0.0
                                                : static_cast<double>(sync_row_bytes_pushed_) /
                                                      static_cast<double>(sync_rows_pushed_);
  sync_rows_pushed_ = 0;
  sync_row_bytes_pushed_ = 0;
  return static_cast<std::size_t>(std::llround(per_row * static_cast<double>(rows)));
}

void PsServiceTransport::serve_on_host(IncomingCall call, Responder respond) {
  struct Served {
    Responder respond;
    std::optional<StatusOr<Response>> result;
    Duration service = 0;
    Duration overlap = 0;  // of the service, after the reply leaves
    bool job_done = false;
  };
  auto served = std::make_shared<Served>();
  served->respond = std::move(respond);
  const Time arrived = executor_.now();
  const int slot = hosts_->slot(self_);
  // Read as it arrives: once queued, the request itself keeps the ps awake.
  const bool awake = model_.per_request_when_awake && hosts_->awake(slot);
  const Duration idle = model_.per_request_by_idle.empty() ? 0 : hosts_->idle_for(slot);
  auto begin = [this, served, arrived, slot, awake, idle, call = std::move(call)]() mutable -> Duration {
    const Time start = executor_.now();
    // Whether a core is idle, read before this job takes one.
    const Wake woke = awake ? Wake::kNothing
                      : !model_.per_request_on_busy_host || hosts_->idle_core(slot) ? Wake::kIdleCore
                                                                                     : Wake::kBusyCore;
    const Duration waited = start - arrived;
    stats_.total_wait += waited;
    stats_.max_wait = std::max(stats_.max_wait, waited);
    ++stats_.requests;
    if (call.cancelled.cancelled()) {
      served->result.emplace(absl::CancelledError("the caller cancelled the request"));
      return 0;
    }
    const MessageShape shape = message_shape(call.request);
    const std::size_t request_bytes = shape.bytes;
    RowValues row_bytes = row_values(call.request);
    const std::uint64_t rows_before = rows_updated_();
    const char* name = request_name(call.request);
    const auto* push = std::get_if<PushRequest>(&call.request);
    const Fence fence = push ? push->fence : Fence{};
    // Sync mode: applying a step runs the optimizer over the rows of its
    // averaged gradients, which its small request does not show; it costs
    // what a push of those rows costs, their values priced at the mean row
    // width of the step's pushes.
    const bool applies_step = std::holds_alternative<ApplySyncStepRequest>(call.request);
    const bool sync_push = push && push->sync_step != kNoSyncStep;
    handler_(std::move(call), [this, served, start, waited, request_bytes, items = shape.items, row_ids = shape.rows,
                               by_id = shape.items_by_id, pushed_by_id = shape.items_pushed_by_id(),
                               rows_before, name, push = push != nullptr, fence, applies_step, sync_push, woke, idle,
                               row_bytes = std::move(row_bytes)](StatusOr<Response> result) mutable {
      const std::size_t reply_bytes = wire_size(result.ok() ? *result : Response(EmptyResponse{}));
      const std::uint64_t rows = rows_updated_() - rows_before;
      if (push && pushes_) pushes_->push_back(PushRecord{start, self_.index, fence, result.ok()});
      if (sync_push) {
        sync_rows_pushed_ += static_cast<std::uint64_t>(row_ids);
        sync_row_bytes_pushed_ += row_bytes.pushed;
      }
      const Duration service =
          applies_step
              ? model_.service(request_bytes, reply_bytes, rows, items, true, 0, step_row_bytes(rows), woke, idle)
              : model_.service(request_bytes, reply_bytes, static_cast<std::uint64_t>(row_ids), items, push,
                               row_bytes.pushed + row_bytes.pulled(result), row_bytes.pushed, woke, idle, by_id,
                               pushed_by_id);
      served->service = service;
      served->overlap = stream_overlap(model_.reply_overlap, reply_bytes, service);
      stats_.bytes_in += request_bytes;
      stats_.bytes_out += reply_bytes;
      stats_.rows_updated += rows;
      stats_.busy += service;
      trace_.span(self_, "ps_service", name, start, service,
                  {TraceArg{"queued_us", static_cast<double>(waited) / 1000.0}, TraceArg{"rows", static_cast<double>(rows)},
                   TraceArg{"ok", result.ok() ? 1.0 : 0.0}});
      if (served->job_done) {  // answered after its job (a handler that waits): reply now
        served->respond(std::move(result));
        return;
      }
      served->result.emplace(std::move(result));
    });
    return served->service - served->overlap;  // 0 if the handler has not answered yet
  };
  hosts_->run_when_started(
      slot, std::move(begin),
      [this, slot, served] {
        served->job_done = true;
        if (!served->result) return;
        served->respond(std::move(*served->result));
        if (served->overlap > 0) hosts_->run(slot, served->overlap, [] {});
      },
      JobKind::kMessage);
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
  if (hosts_) {
    serve_on_host(std::move(call), std::move(respond));
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
  const MessageShape shape = message_shape(w.call.request);
  const std::size_t request_bytes = shape.bytes;
  const std::int64_t items = shape.items, row_ids = shape.rows;
  const std::int64_t by_id = shape.items_by_id, pushed_by_id = shape.items_pushed_by_id();
  RowValues row_bytes = row_values(w.call.request);
  const std::uint64_t rows_before = rows_updated_();
  const char* name = request_name(w.call.request);
  const auto* push = std::get_if<PushRequest>(&w.call.request);
  const Fence fence = push ? push->fence : Fence{};
  Responder respond = std::move(w.respond);
  handler_(std::move(w.call), [this, respond = std::move(respond), start, waited, request_bytes, items, row_ids,
                               by_id, pushed_by_id, rows_before, name, push = push != nullptr, fence, thread,
                               row_bytes = std::move(row_bytes)](StatusOr<Response> result) mutable {
    const std::size_t reply_bytes = wire_size(result.ok() ? *result : Response(EmptyResponse{}));
    const std::uint64_t rows = rows_updated_() - rows_before;
    if (push && pushes_) pushes_->push_back(PushRecord{start, self_.index, fence, result.ok()});
    const Duration service =
        model_.service(request_bytes, reply_bytes, static_cast<std::uint64_t>(row_ids), items, push,
                       row_bytes.pushed + row_bytes.pulled(result), row_bytes.pushed, Wake::kIdleCore, 0, by_id,
                       pushed_by_id);
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
