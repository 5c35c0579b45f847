#pragma once
// Reads and writes variables on the parameter servers, batching everything a
// step needs from one ps into one request: a step costs one Pull and one Push
// per ps it touches, whatever the number of variables and shards.
//
// Used by step functions on workers and by the coordinator (metric reads and
// resets, inline evaluation). Every push carries the closure's fence so a
// parameter server refuses it once the closure's generation was cancelled.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "core/messages/messages.h"
#include "core/runtime/runtime.h"
#include "core/runtime/task.h"
#include "core/variables/directory.h"

namespace twinps {

class ParameterClient {
 public:
  // `request_counter` numbers pushes; it belongs to the task (not to this
  // client) so that every push the task ever sends has a distinct request id.
  ParameterClient(Runtime& runtime, Fence fence, CancelToken cancel, Duration rpc_timeout,
                  std::uint64_t& request_counter)
      : runtime_(runtime),
        fence_(fence),
        cancel_(std::move(cancel)),
        rpc_timeout_(rpc_timeout),
        request_counter_(request_counter) {}

  // Meta variables (timing-only simulation: created with meta shards, which
  // hold a shape and no values) are read and written with the same calls as
  // any other: a read's result is a meta tensor (PullResult::meta), and a
  // gradient is given as a MetaTensor of the shape the values would have.
  // Their messages are as large as real ones, so the simulator charges the
  // same time for them.

  // A batch of reads. Each add returns a handle for reading the result.
  class PullBatch {
   public:
    // The whole variable, [rows x cols].
    int dense(const VariableLayout& v);
    // Selected rows by global id (an embedding lookup), [ids x cols] in id
    // order; one gather per shard touched, never the whole table.
    int rows(const VariableLayout& v, std::span<const std::int64_t> ids);
    // An int64 counter variable (iterations).
    int counter(const VariableLayout& v);

   private:
    friend class ParameterClient;
    struct Read {
      const VariableLayout* var;
      enum class Kind { kDense, kRows, kCounter } kind;
      std::vector<std::int64_t> ids;  // row ids (kRows)
    };
    std::vector<Read> reads_;
  };

  class PullResult {
   public:
    const Matrix& value(int handle) const { return values_[static_cast<std::size_t>(handle)]; }
    std::int64_t counter(int handle) const { return counters_[static_cast<std::size_t>(handle)]; }
    // A read of a meta variable: the shape its value would have (value() is
    // empty); nullopt for a read of real values.
    const std::optional<MetaTensor>& meta(int handle) const { return metas_[static_cast<std::size_t>(handle)]; }

   private:
    friend class ParameterClient;
    std::vector<Matrix> values_;
    std::vector<std::optional<MetaTensor>> metas_;
    std::vector<std::int64_t> counters_;
  };

  // A batch of writes.
  class PushBatch {
   public:
    // A gradient for the whole variable, [rows x cols]: the ps runs its optimizer.
    void gradient(const VariableLayout& v, Matrix grad);
    // ... of a meta variable: `grad` is [rows x cols] too, without values.
    void gradient(const VariableLayout& v, MetaTensor grad);
    // A gradient for some rows by global id (duplicates are summed).
    void gradient_rows(const VariableLayout& v, RowIds ids, Matrix grad_rows);
    // ... of a meta variable: `grad_rows` is [ids x cols] too, without values.
    void gradient_rows(const VariableLayout& v, RowIds ids, MetaTensor grad_rows);
    // Accumulators (metrics): value += delta, or value = new_value.
    void add(const VariableLayout& v, Matrix delta);
    void assign(const VariableLayout& v, Matrix new_value);
    // An accumulator's rows by global id: value[id] += delta row (the
    // visits per example of exactly-once training; duplicates are summed).
    void add_rows(const VariableLayout& v, RowIds ids, Matrix delta_rows);
    // Counters (iterations): value += delta.
    void add_counter(const VariableLayout& v, std::int64_t delta);
    bool empty() const { return writes_.empty(); }

   private:
    friend class ParameterClient;
    struct Write {
      const VariableLayout* var;
      Update::Op op;
      bool sparse = false;
      RowIds ids;
      Matrix values;
      std::int64_t counter_delta = 0;
      std::optional<MetaTensor> meta = std::nullopt;  // in place of values, for a meta variable
    };
    std::vector<Write> writes_;
  };

  Task<StatusOr<PullResult>> pull(const PullBatch& batch);
  // A push takes its batch: std::move it in, and a whole-variable write to
  // a variable of one shard goes out without a copy (a 32 MiB gradient's
  // copy is about 3 ms here). A batch passed as an lvalue is copied first.
  Task<Status> push(PushBatch batch);
  // Both in one round trip per ps: the writes are applied, then the reads are
  // served (ps-lite's push-pull). A step that knows its next batch pushes its
  // gradients and pulls the next step's parameters at once.
  Task<StatusOr<PullResult>> push_pull(PushBatch push, const PullBatch& pull);

  // Sync mode: every push carries this step (PushRequest::sync_step), so the
  // ps aggregates the gradients with the other workers' of the same step.
  void set_sync_step(std::int64_t step) { sync_step_ = step; }

  // Exactly-once visitation: this client's closure trains the split `key`
  // (> 0, unique in the run). Its n-th push carries a key made of both
  // (PushRequest::split_key), the same in every run of the closure, so a ps
  // applies each of them once.
  void set_split(std::uint64_t key) { split_key_ = key; }

  // Bytes this client sent and received in pull/push payloads.
  std::uint64_t bytes_pulled() const { return bytes_pulled_; }
  std::uint64_t bytes_pushed() const { return bytes_pushed_; }
  // Staleness of this client's applied gradients, as the ps measured them.
  // Each gradient is sent with the version of this client's last read of its
  // shard (core/ps/staleness.h): a client lives for one closure, so a
  // gradient of a shard the closure did not read is sent unversioned.
  const StalenessHistogram& staleness() const { return staleness_; }

 private:
  struct ReadPlan;
  StatusOr<ReadPlan> plan_reads(const PullBatch& batch);
  StatusOr<PullResult> assemble_reads(const PullBatch& batch, ReadPlan& plan, std::map<int, PullResponse>& replies);
  // Takes the batch's values (moved into the requests where they can be).
  StatusOr<std::map<int, PushRequest>> plan_writes(PushBatch& batch);
  static Status plan_meta_write(const PushBatch::Write& w,
                                const std::function<void(const ShardPlacement&, Update)>& add);
  // Bytes of the dense reads / whole-variable writes of variables of several
  // shards, which the worker copies between one matrix and the shards.
  static double assembled_bytes(const PullBatch& batch);
  static double split_bytes(const PushBatch& batch);
  // Those copies' time, when a cost model prices them (the simulator).
  Task<void> spend_on_copies(double bytes);
  CallOptions call_options(RequestId id = 0) const;
  RequestId next_request_id();

  Runtime& runtime_;
  Fence fence_;
  CancelToken cancel_;
  Duration rpc_timeout_;
  std::uint64_t& request_counter_;
  std::uint64_t bytes_pulled_ = 0;
  std::uint64_t bytes_pushed_ = 0;
  std::map<std::pair<int, ShardId>, std::int64_t> read_versions_;  // (ps, shard) -> version last read
  StalenessHistogram staleness_;
  std::int64_t sync_step_ = kNoSyncStep;
  std::uint64_t split_key_ = 0;
  std::uint64_t split_pushes_ = 0;  // pushes sent under split_key_
};

}  // namespace twinps
