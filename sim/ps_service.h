#pragma once
// A parameter server's service time, as a decorator around its transport.
// Core's ParameterServerNode answers every request at once; wrapped by this,
// requests wait in a first-come-first-served queue for one of `threads`
// servers, are handed to the node when a server takes them (so the store
// applies an update at that moment), and the reply leaves when the modelled
// service time has passed:
//
//   per_request + per_item * items + per_byte * (request + reply bytes)
//     + per_row * row ids in the request
//     + per_row_byte * the values of the rows read or written by id
//     + for a push, the optimizer's apply: per byte pushed (or a measured
//       curve over sizes), per row scattered and per byte of the rows scattered
//
// where the row ids are those a pull gathers or a sparse push scatters (a
// dense shard's rows are one block, paid by its bytes), and per_byte may be a
// measured curve over sizes. A
// parameter server that every step visits therefore shows up as a queue and
// as utilisation. Core never sees any of this.
//
// With hosts (sim/hosts.h) the service is CPU work instead: a job on the
// ps's threads, which apply the request when they take it and share the
// host's cores with every other task there; the reply leaves when it ends,
// or its reply_overlap before (the thread then works on for that long).
//
// With the simulator's network, a reply is handed over when service starts
// and told to leave when it ends (NetworkModel::depart_later), and a server
// needs an event of its own only to take the next request from a queue: an
// idle ps costs no event per request. With several threads, replies leave
// their host link in the order their service began.
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "core/runtime/executor.h"
#include "core/runtime/trace.h"
#include "core/runtime/transport.h"
#include <optional>

#include "sim/cost_curve.h"

namespace twinps::sim {

class NetworkModel;
class HostModel;

// What a request woke on arriving, which decides its fixed price: a ps
// that slept, beside an idle core of its host or with every core busy, or
// nothing (the ps was working: its thread takes the request without
// sleeping).
enum class Wake { kIdleCore, kBusyCore, kNothing };

struct PsServiceModel {
  Duration per_request = 20 * kMicrosecond;
  // In its place for a request whose service starts with no idle core on
  // the ps's host (PsService.per_request_on_busy_host_us).
  std::optional<Duration> per_request_on_busy_host;
  // In its place for a request that arrives while the ps is working
  // (PsService.per_request_when_awake_us); before the busy host's.
  std::optional<Duration> per_request_when_awake;
  // In per_request's place for a request that wakes the ps beside an idle
  // core, by how long the ps had been idle (ns -> ns, held level outside;
  // PsService.per_request_by_idle): a longer sleep costs more to wake from.
  CostCurve per_request_by_idle;
  double per_byte_ns = 0.2 * 1000.0 / 1024.0;  // 0.2 us per KiB
  double per_row_ns = 50;
  int threads = 1;
  double per_item_ns = 0;
  // Beyond per_item_ns, an item naming rows by id (PsService.per_item_by_id_us),
  // and the optimizer's beyond that for one pushed (a sparse gradient).
  double per_item_by_id_ns = 0;
  double apply_per_item_by_id_ns = 0;
  CostCurve bytes_curve;           // replaces per_byte_ns when set
  double apply_per_byte_ns = 0;    // the optimizer's, per byte pushed
  // The optimizer's apply by the bytes a push carries; replaces
  // apply_per_byte_ns when set. An apply reads and writes the variable and
  // its slots once, so one larger than the caches runs at memory speed:
  // measured here, RMSprop cost 0.25 us per KiB at 1 MiB and 0.48 at 16 MiB.
  CostCurve apply_curve;
  double apply_per_row_ns = 0;  // the optimizer's, per row a sparse push scatters
  // Per byte of the values of rows read or written by id (a pull's rows, a
  // sparse push's), beyond per_row_ns and the bytes curve: rows at random
  // places cost their cache lines, so wide rows cost more than their bytes
  // do in one block. And the optimizer's, per byte of a sparse push's rows
  // (its slots' rows).
  double per_row_byte_ns = 0;
  double apply_per_row_byte_ns = 0;
  // With hosts: a reply of this many bytes leaves this long (ns) before its
  // service ends, and the ps's thread spends the rest while the caller
  // reads it (over a stream both ends copy at once; see
  // MessageCosts::request_overlap for the request's).
  CostCurve reply_overlap;
  // Service time of a request and its reply. `row_bytes`: the values of the
  // rows read or written by id; `pushed_row_bytes`: those a push scatters;
  // `woke`: what the request woke and `idle` how long the ps had been idle
  // (its fixed price); `items_by_id`: of `items`, those naming rows by id,
  // `items_pushed_by_id` of them sparse gradients.
  Duration service(std::size_t request_bytes, std::size_t reply_bytes, std::uint64_t rows, std::int64_t items,
                   bool push, std::size_t row_bytes = 0, std::size_t pushed_row_bytes = 0,
                   Wake woke = Wake::kIdleCore, Duration idle = 0, std::int64_t items_by_id = 0,
                   std::int64_t items_pushed_by_id = 0) const;
  // The fixed price of a request that woke `woke` after the ps had been
  // idle for `idle`.
  Duration fixed_price(Wake woke, Duration idle = 0) const;
};

// The values of a request's rows read or written by id: a sparse push's rows,
// known from the request, and the rows a pull reads by id, known from its
// answer (the items `pulled_items` of it).
struct RowValues {
  std::size_t pushed = 0;
  std::vector<std::size_t> pulled_items;
  std::size_t pulled(const StatusOr<Response>& reply) const;
};
RowValues row_values(const Request& request);

// One applied (or refused) push, for the swarm's invariants.
struct PushRecord {
  Time at = 0;
  int ps = 0;
  Fence fence;
  bool applied = false;
};

// Survives restarts of the ps: one per ps task, owned by the simulation.
struct PsServiceStats {
  std::uint64_t requests = 0;
  std::uint64_t bytes_in = 0;
  std::uint64_t bytes_out = 0;
  std::uint64_t rows_updated = 0;
  Duration busy = 0;        // summed over threads
  Duration total_wait = 0;  // time requests spent queued
  Duration max_wait = 0;
  std::size_t max_queue = 0;
};

class PsServiceTransport final : public Transport {
 public:
  // `rows_updated` reads the store's running count (0 while the node is
  // being built). `pushes`, when not null, receives a PushRecord per push.
  // `network` may be null: replies are then held back by an event each.
  PsServiceTransport(TaskId self, Executor& executor, std::unique_ptr<Transport> inner, const PsServiceModel& model,
                     PsServiceStats& stats, TraceSink& trace, std::function<std::uint64_t()> rows_updated,
                     std::vector<PushRecord>* pushes, NetworkModel* network = nullptr, HostModel* hosts = nullptr);

  void call(const TaskId& to, Request request, CallOptions options, ResponseCallback done) override {
    inner_->call(to, std::move(request), std::move(options), std::move(done));
  }
  void serve(CallHandler handler) override;

  std::size_t queued() const { return queue_.size(); }

 private:
  struct Waiting {
    IncomingCall call;
    Responder respond;
    Time arrived = 0;
  };
  void arrive(IncomingCall call, Responder respond);
  void start_next();
  void serve_one(Waiting w, std::size_t thread);
  // With hosts: the request as a CPU job of the ps's threads.
  void serve_on_host(IncomingCall call, Responder respond);
  // Sync mode: the values of the `rows` a step's apply updates, at the mean
  // bytes per row of the sync pushes since the last step (then forgotten).
  std::size_t step_row_bytes(std::uint64_t rows);

  TaskId self_;
  Executor& executor_;
  std::unique_ptr<Transport> inner_;
  const PsServiceModel& model_;
  PsServiceStats& stats_;
  TraceSink& trace_;
  std::function<std::uint64_t()> rows_updated_;
  std::vector<PushRecord>* pushes_;
  NetworkModel* network_;
  HostModel* hosts_;
  CallHandler handler_;
  std::deque<Waiting> queue_;
  std::vector<Time> free_at_;  // per thread: when it finishes its current request
  // Wakes the queue when a thread frees up. Events run on this node's
  // executor, so a killed incarnation's never run.
  TimerId wake_ = kNoTimer;
  // Sync pushes' row ids and the bytes of their values since the last step.
  std::uint64_t sync_rows_pushed_ = 0;
  std::size_t sync_row_bytes_pushed_ = 0;
};

}  // namespace twinps::sim
