#pragma once
// The state a parameter server holds: its shards (value, optimizer slots kept
// beside their shard, update count), the store's optimizer and any shard's own
// (ShardSpec::optimizer: a model's optimizer groups), the fence and the ids of
// recently applied pushes. Its operations mirror the ps messages
// (core/messages/messages.h). It does no I/O and never waits, so
// ParameterServerNode, the simulator and tests call it directly.
//
// Every request is all-or-nothing: it is validated completely before anything
// is applied, and an invalid one (unknown shard, wrong shape, wrong op for the
// variable kind, negative or out-of-range row id, NaN/Inf) is answered
// INVALID_ARGUMENT naming the shard and the problem, with the store unchanged
// and still serving.
//
// Fence: a push or CreateShards whose fence is older than the store's is
// refused with ABORTED + ErrorKind::kFenced. Older means: from another
// coordinator incarnation, or from the same coordinator with a lower
// generation. Coordinator incarnations are not ordered, so the store cannot
// tell an old coordinator from a new one by its number; a new coordinator
// announces itself with set_fence (or CreateShards), which replaces the fence,
// and from then on the old one is refused. A store that has never been fenced
// (coordinator 0) accepts every fence.
//
// Duplicate pushes: a push is identified by (caller, request id); id 0 means
// "no id" and is never deduplicated. The store remembers the ids of the last
// Options::dedup_window applied pushes (default 65536 ids, a few MiB); a
// retry of a push older than that would be applied again. Retries come within one
// call deadline, far fewer pushes than the window on any realistic ps. Refused
// pushes are not remembered, so their retries are judged afresh. A push with
// a split key (exactly-once visitation, PushRequest::split_key) is also
// remembered by that key alone, whoever sent it: the same split's push from
// a closure that ran again after its worker died is a duplicate too.
//
// Synchronous training (PushRequest::sync_step, core/coordinator/training_mode.h):
// a push tagged with step k does not apply its gradients; it adds each to
// step k's aggregate of its shard (a sum and a count of contributions, its
// staleness measured then: nothing else moves the shard until the step is
// applied). apply_sync_step(k) applies, for every shard with an aggregate,
// the mean of its contributions as ONE optimizer update (the shard's step
// moves by one), in step order for every step <= k. A gradient tagged with a
// step already applied is dropped, never applied, and counted
// (StalenessHistogram::dropped). Updates other than gradients in a tagged
// push (metrics, counters) apply at once. The steps start afresh when
// another coordinator fences the store.
//
// Meta shards (ShardSpec::meta, for timing-only simulation of big clusters)
// hold no values: a pull answers a meta tensor (MetaTensor, the shape of the
// rows asked for), a push carries one in place of its values, and applying it
// changes what a real update would besides the values: the shard's version,
// the stats (bytes as if the values had come, rows by their ids). Everything
// else -- validation of shapes and row ids, fences, deduplication, sync
// aggregation, staleness -- is the same code for every shard, so the
// simulator runs the real store's semantics with no tensors behind it.
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <absl/container/flat_hash_set.h>
#include <absl/hash/hash.h>

#include "core/cluster/task_id.h"
#include "core/messages/messages.h"
#include "core/ps/optimizer.h"
#include "core/ps/staleness.h"
#include "core/runtime/status.h"
#include "core/runtime/transport.h"

namespace twinps {

// What the store did, for run summaries, metrics and the simulator.
struct ParameterStoreStats {
  std::uint64_t pull_requests = 0;
  std::uint64_t push_requests = 0;  // accepted and applied
  std::uint64_t bytes_pulled = 0;   // values (4 bytes a float) and counters (8) returned
  std::uint64_t bytes_pushed = 0;   // values and row ids of applied updates
  std::uint64_t updates_applied = 0;     // Update items applied (gradient, add or assign)
  std::uint64_t optimizer_steps = 0;     // of which gradients run through the optimizer
  std::uint64_t rows_updated = 0;        // distinct rows written by applied updates
  std::uint64_t duplicates_dropped = 0;  // pushes acknowledged as duplicates, not applied
  std::uint64_t fenced_pushes = 0;       // pushes refused for a stale fence
  std::uint64_t rejected_requests = 0;   // requests refused as invalid
  // Dense gradients applied from the next value computed as they arrived
  // (ParameterStore::begin_arriving_push), and such computations given up
  // because another push moved the shard first.
  std::uint64_t updates_computed_on_arrival = 0;
  std::uint64_t arrivals_overtaken = 0;
  StalenessHistogram staleness;          // of every applied gradient (core/ps/staleness.h)
};

class ParameterStore {
 public:
  struct Options {
    std::string name;  // how errors name this store ("ps:0"); "ps" if empty
    std::size_t dedup_window = 65536;
  };

  ParameterStore() : ParameterStore(Options{}) {}
  explicit ParameterStore(Options options);

  // Creates the shards and sets the store's optimizer.
  //  * A shard that exists with the same spec is left as it is (a resent
  //    request must not reset training), unless replace_existing.
  //  * replace_existing overwrites existing shards with the request's state (restore).
  //  * A conflicting spec (same id, different name/kind/shape; or a name held
  //    by another id) is ALREADY_EXISTS; a malformed shard INVALID_ARGUMENT.
  //  * A shard sent without slots gets fresh ones (make_slots); with slots,
  //    they must be its optimizer's count and the shard's shape. A shard's
  //    optimizer is its spec's, if set (only trainable shards may set one;
  //    an invalid one is INVALID_ARGUMENT naming the shard), else the store's.
  //  * Another optimizer than the store runs is ALREADY_EXISTS unless
  //    replace_existing, and then only if every trainable shard left out of
  //    the request and has no optimizer of its own has the new optimizer's
  //    slot count (FAILED_PRECONDITION).
  //  * A non-zero fence in the request is checked like a push's, then adopted
  //    as by set_fence.
  Status create_shards(const CreateShardsRequest& request);

  // All rows or the given rows (in request order, repeats allowed) of each
  // item's shard, or the counter of a counter shard, with the shard's
  // version (its step).
  StatusOr<PullResponse> pull(const PullRequest& request);

  // Applies every update in order. `request_id` 0 disables deduplication.
  //  * kApplyGradient (trainable shards): the optimizer, dense or sparse; the
  //    shard's step counts these.
  //  * kAdd: value += values (dense), value[rows] += values (sparse, repeats
  //    add up), counter += counter_delta (counter shards).
  //  * kAssign: value = values (dense), value[rows] = values (sparse; for a
  //    repeated row the last one wins). Not for counters.
  // Each gradient's staleness (its shard's step now minus its read_version)
  // is measured before it is applied, into stats().staleness and the
  // response's histogram (core/ps/staleness.h).
  // Trainable shards accept all three ops (a model variable can be assigned),
  // accumulators kAdd/kAssign, counters kAdd (dense, no values).
  //
  // `arrived`: what begin_arriving_push computed for this request while it
  // arrived. Each of its updates whose shard has not moved since is applied
  // by taking the computed values (same bits as applying it now); the rest
  // are applied as without it.
  class ArrivingPush;
  StatusOr<PushResponse> push(const PushRequest& request, RequestId request_id = 0, const TaskId& caller = {},
                              ArrivingPush* arrived = nullptr);

  // A push whose tensors are allocated but still arriving (a real transport
  // receiving it piece by piece, Transport::observe_arrivals): for each dense
  // gradient of at least kArrivingMinFloats floats to a trainable shard no
  // other arriving push is computing, the shard's next value and slots are
  // computed into new memory as the gradient's bytes land, and its finite
  // check made on the way, while the bytes are still in the cache; push()
  // then swaps them in. The store itself is not changed before push(). Null
  // when nothing qualifies (sync steps, stale fences and known duplicates
  // never do). A shard updated meanwhile, a restore or a new optimizer makes
  // push() apply that update as usual.
  static constexpr std::size_t kArrivingMinFloats = 64 << 10;
  std::shared_ptr<ArrivingPush> begin_arriving_push(const PushRequest& request, RequestId request_id,
                                                    const TaskId& caller);

  // Sync mode: applies every aggregate of steps <= request.step (see above).
  // Fenced like a push; a step at or below the last applied is a no-op.
  Status apply_sync_step(const ApplySyncStepRequest& request);
  // The last sync step applied (-1: none yet).
  std::int64_t applied_sync_step() const { return sync_applied_step_; }

  // The full state of the given shards (every shard, in id order, if none given).
  StatusOr<ExportShardsResponse> export_shards(const ExportShardsRequest& request) const;

  // Same coordinator: the generation only moves forward (a lower one is
  // ignored, OK). Another coordinator: replaces the fence. Coordinator 0 is
  // INVALID_ARGUMENT (it means "unfenced").
  Status set_fence(const Fence& fence);

  const Fence& fence() const { return fence_; }
  const ParameterStoreStats& stats() const { return stats_; }
  const std::string& name() const { return options_.name; }
  std::size_t shard_count() const { return shards_.size(); }
  bool has_shard(ShardId id) const { return shards_.count(id) > 0; }
  // The store's optimizer set by the last CreateShards, or null before any
  // (shards with their own optimizer do not use it).
  const Optimizer* optimizer() const { return optimizer_ ? &*optimizer_ : nullptr; }

 private:
  Status validate_pull(const PullRequest& request);  // counts a refusal
  PullResponse read(const PullRequest& request);  // after validate_pull
  struct Shard {
    ShardSpec spec;
    // Shared with the pull answers still being written from it
    // (PulledValue::shared); writes go through writable_value().
    std::shared_ptr<Matrix> value = std::make_shared<Matrix>();
    std::vector<Matrix> slots;
    std::shared_ptr<const Optimizer> own_optimizer;  // spec.optimizer's; null: the store's
    std::int64_t step = 0;
    std::int64_t counter = 0;
    // Changes whenever the value, slots or step do (or the shard is
    // replaced): what an arriving push checks its computation against.
    std::uint64_t revision = 0;
    const void* arriving = nullptr;  // the arriving push computing this shard's next value, if any
    // Another push got in first while one arrived (its work wasted): the
    // next `arrivals_to_skip` pushes are applied as usual, a streak doubling
    // up to kMaxArrivalBackoff while that keeps happening.
    int arrival_backoff = 0;
    int arrivals_to_skip = 0;

    // The values to update in place: copied first while an answer holds
    // them, so that answer still carries what was read.
    Matrix& writable_value();
  };
  using DedupKey = std::pair<TaskId, RequestId>;

  // "shard 'emb/part_1' (id 7)", or "shard id 7" for an unknown one.
  std::string shard_label(ShardId id) const;
  Status invalid(const std::string& what);
  bool is_stale(const Fence& f) const;
  Status fenced(const char* request, const Fence& f);
  // `arrived`: the update's arriving computation, if usable (its finite check is taken from it).
  struct ArrivingGradient;
  Status validate_update(std::size_t index, const Update& u, const ArrivingGradient* arrived = nullptr) const;
  void apply_update(const Update& u, ArrivingGradient* arrived = nullptr);
  // The arriving computation for update `index` of `arrived`, if it is
  // complete and still matches its shard; else null.
  ArrivingGradient* usable(ArrivingPush* arrived, std::size_t index, const Update& u);
  void advance(ArrivingGradient& g);  // computes what has arrived of g
  void drop(ArrivingGradient& g);     // gives g up, freeing its memory and its shard
  void overtaken(ArrivingGradient& g);  // drop, because another push moved the shard first
  static constexpr int kMaxArrivalBackoff = 16;
  // Before `u` (a gradient) is applied: how many versions its shard moved on
  // since the sender's read.
  void measure_staleness(const Update& u, StalenessHistogram& into) const;
  void remember(const DedupKey& key);
  // Sync mode: one shard's gradients for one step, summed until applied.
  struct SyncAggregate {
    Matrix sum;                  // the shard's shape (empty for a meta shard); rows no contribution touched stay zero
    std::set<std::int64_t> rows;  // rows touched by sparse contributions
    bool dense = false;          // a dense contribution came: the mean is applied densely
    std::int64_t contributions = 0;
    StalenessHistogram staleness;  // of the contributions, merged into stats() when applied
  };
  // Adds gradient `u` (validated) to step `step`'s aggregate of its shard.
  void aggregate(std::int64_t step, const Update& u, StalenessHistogram& into);
  // Applies one aggregate: the mean of its contributions, one optimizer update.
  void apply_aggregate(ShardId shard, SyncAggregate& a);

  Options options_;
  std::map<ShardId, Shard> shards_;
  std::optional<Optimizer> optimizer_;
  Fence fence_;
  struct DedupHash {
    std::size_t operator()(const DedupKey& k) const {
      return absl::Hash<std::tuple<int, int, std::uint64_t>>()(
          {static_cast<int>(k.first.job), k.first.index, static_cast<std::uint64_t>(k.second)});
    }
  };
  // Only ever looked up, never iterated, so its order reaches no output. An
  // open-addressing hash set: every push looks it up, and the window of a
  // simulator's 100 ps is hundreds of MB as a node-based set (a chain of
  // cache misses per push, 7 % of a 1,000 x 100 run's time).
  absl::flat_hash_set<DedupKey, DedupHash> seen_;
  std::deque<DedupKey> seen_order_;  // oldest first, for evicting from seen_
  ParameterStoreStats stats_;
  std::map<std::int64_t, std::map<ShardId, SyncAggregate>> sync_pending_;  // by step, then shard
  std::int64_t sync_applied_step_ = -1;
  std::uint64_t last_revision_ = 0;  // Shard::revision's source
  std::uint64_t optimizer_epoch_ = 0;  // moves with every CreateShards (a new store optimizer)
  // Arriving pushes hold a weak reference: one that outlives the store does nothing.
  std::shared_ptr<const int> alive_ = std::make_shared<const int>(0);
};

// One dense gradient's next value, computed as the gradient arrives.
struct ParameterStore::ArrivingGradient {
  std::size_t update = 0;  // its index in the request
  ShardId shard = 0;
  std::uint64_t revision = 0;         // the shard's when the computation began
  std::uint64_t optimizer_epoch = 0;  // the store's then
  const float* grad = nullptr;        // where the gradient's bytes land
  std::size_t floats = 0;
  std::size_t bytes_in = 0;  // landed, front to back
  std::size_t done = 0;      // floats computed
  bool dropped = false;
  std::shared_ptr<Matrix> next_value;
  std::vector<Matrix> next_slots;
};

// The ArrivalObserver of a push (begin_arriving_push). Lives on the store's
// executor, as the store does.
class ParameterStore::ArrivingPush final : public ArrivalObserver {
 public:
  ArrivingPush(ParameterStore& store, std::vector<ArrivingGradient> gradients);
  ~ArrivingPush() override;
  ArrivingPush(const ArrivingPush&) = delete;
  ArrivingPush& operator=(const ArrivingPush&) = delete;

  void arrived(const char* at, std::size_t bytes) override;
  // Updates whose next value is computed in full and not given up (for tests).
  std::size_t computed() const;

 private:
  friend class ParameterStore;
  ParameterStore& store_;
  std::weak_ptr<const int> alive_;
  std::vector<ArrivingGradient> gradients_;
};

}  // namespace twinps
