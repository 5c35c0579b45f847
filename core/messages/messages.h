#pragma once
// Requests and responses between tasks, as plain C++/Eigen structs. The
// simulator moves them between nodes as they are (and charges the network for
// wire_size()); net/ converts them to and from Protobuf. Core never sees a
// serialised form.
//
// Who talks to whom (TensorFlow's device filters: workers never talk to each other):
//   coordinator -> ps      CreateShards, Pull, Push, ExportShards, Fence, ApplySyncStep, Health
//   coordinator -> worker  SetupWorker, CreateResource, RunClosure, Health
//   worker      -> ps      Pull, Push
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/cluster/task_id.h"
#include "core/messages/value.h"
#include "core/ps/optimizer_config.h"
#include "core/ps/staleness.h"
#include "core/tensor/tensor.h"
#include "core/variables/layout.h"

namespace twinps {

using RequestId = std::uint64_t;
using ClosureId = std::uint64_t;
using Incarnation = std::uint64_t;  // changes every time a task (re)starts

// Updates from closures of a cancelled generation, or from a previous
// coordinator, must not reach the parameters once the coordinator has raised
// the error that cancelled them. A ps accepts an update only if its fence is
// not older than the ps's current fence (same coordinator, generation >=).
struct Fence {
  Incarnation coordinator = 0;
  std::uint64_t generation = 0;
  bool operator==(const Fence&) const = default;
};

// ---------------------------------------------------------------- common
struct HealthRequest {};
struct HealthResponse {
  TaskId task;
  Incarnation incarnation = 0;
};
struct EmptyResponse {};

// ---------------------------------------------------------------- ps
struct ShardSpec {
  ShardId id = 0;
  std::string name;  // "embedding/part_0"
  VariableKind kind = VariableKind::kTrainable;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  // A meta shard (timing-only simulation): the store keeps its shape and
  // version and counts its updates, but holds no values; its reads answer
  // and its writes carry meta tensors (MetaTensor) in place of values. Only
  // the simulator creates one; net/ refuses to send one.
  bool meta = false;
  // Trainable shards: the optimizer this shard is updated with, when it is
  // not the request's (CreateShardsRequest::optimizer): a model whose
  // optimizer groups differ gives each shard its variable's. Its slots are
  // this optimizer's.
  std::optional<OptimizerConfig> optimizer = std::nullopt;
};

// A shard with everything needed to resume it: created fresh (no slots, step 0)
// or restored from a checkpoint (slots and step as saved).
struct ShardState {
  ShardSpec spec;
  Matrix value;               // rows x cols (empty for counters)
  std::vector<Matrix> slots;  // optimizer slots, each rows x cols, in the shard's optimizer's slot order
  std::int64_t step = 0;      // updates applied to this shard (drives LR schedules, Adam's bias correction)
  std::int64_t counter = 0;   // the value of a kCounter shard
};

struct CreateShardsRequest {
  Fence fence;
  OptimizerConfig optimizer;  // the store's: for every trainable shard without its own
  std::vector<ShardState> shards;
  bool replace_existing = false;  // restore over shards that already exist
};

struct PullItem {
  ShardId shard = 0;
  bool all_rows = true;
  RowIds rows;  // local row ids when !all_rows (a meta shard is read by row ids too)
};
struct PullRequest {
  std::vector<PullItem> items;
  // Not on the wire: set by a transport that serializes the answer on the
  // callee's thread (the data plane). The ps may then answer an all-rows item
  // with its shard's memory itself (PulledValue::shared) instead of a copy.
  bool share_shard_memory = false;
};
struct PulledValue {
  Matrix values;             // all rows, or the requested rows in request order (empty: see `meta`)
  std::int64_t counter = 0;  // for kCounter shards
  // The shard's version when read: its update count (ShardState::step). A
  // gradient computed from this value sends it back (Update::read_version),
  // so the ps can tell how stale the gradient is (core/ps/staleness.h).
  std::int64_t version = 0;
  // A meta shard's answer: the shape the values would have, in place of
  // them (`values` stays empty). Last, so that positional initialisers of
  // the fields above stay what they were.
  std::optional<MetaTensor> meta = std::nullopt;
  // In place of `values` when the request allowed it (share_shard_memory):
  // the shard's values as the ps holds them. The ps copies them before its
  // next write while this is held, so they stay what was read.
  std::shared_ptr<const Matrix> shared = nullptr;

  const Matrix& tensor() const { return shared ? *shared : values; }
};
struct PullResponse {
  std::vector<PulledValue> items;  // one per request item
};

struct Update {
  enum class Op : std::uint8_t {
    kApplyGradient,  // trainable: run the optimizer
    kAdd,            // accumulator/counter: value += delta
    kAssign,         // accumulator: value = delta (metric reset)
  };
  ShardId shard = 0;
  Op op = Op::kApplyGradient;
  bool sparse = false;  // rows holds local row ids; values has one row per id
  RowIds rows;
  Matrix values;  // empty for a meta shard: see `meta`
  std::int64_t counter_delta = 0;  // for kCounter shards
  // kApplyGradient: the version of the shard the gradient was computed from
  // (PulledValue::version of the sender's last read of it), or kUnknownVersion.
  static constexpr std::int64_t kUnknownVersion = -1;
  std::int64_t read_version = kUnknownVersion;
  // A meta shard's payload: the shape the values would have ([rows x cols],
  // rows one per id when sparse), in place of them (`values` stays empty; the
  // row ids are real). The store checks either against the shard the same
  // way. Last, so that positional initialisers of the fields above stay
  // what they were.
  std::optional<MetaTensor> meta = std::nullopt;
};
// Synchronous training (core/coordinator/training_mode.h): the step a
// closure's gradients belong to; kNoSyncStep outside sync mode.
inline constexpr std::int64_t kNoSyncStep = -1;

struct PushRequest {
  Fence fence;
  std::vector<Update> updates;
  // Reads served after the updates are applied: the next step's pull rides on
  // this step's push, one round trip instead of two.
  PullRequest then_pull;
  // Sync mode: the gradients (kApplyGradient updates) are not applied at once
  // but added to this step's aggregate on the ps, applied as one averaged
  // update by ApplySyncStep, or dropped when the step was already applied.
  // Other updates (metrics, counters) are applied at once as always. Last, so
  // that a push written field by field outside sync mode need not name it.
  std::int64_t sync_step = kNoSyncStep;
  // Exactly-once visitation (core/coordinator/epoch_splits.h): names this
  // push of the closure that trains one split; 0: none. A ps applies one
  // push per key (whichever worker sends it) and acknowledges any other as
  // a duplicate, so a split's closure that ran again after its worker died
  // cannot apply its results twice.
  std::uint64_t split_key = 0;
};
struct PushResponse {
  bool duplicate = false;  // the request id was seen before; nothing applied again
  PullResponse pulled;     // the answer to then_pull
  StalenessHistogram staleness = {};  // of this push's gradients (none for a duplicate)
};

struct ExportShardsRequest {
  std::vector<ShardId> shards;  // empty: every shard the ps holds
};
struct ExportShardsResponse {
  std::vector<ShardState> shards;
};

struct FenceRequest {
  Fence fence;
};

// Sync mode: applies the gradients aggregated for every step up to `step`
// (one averaged update per shard and step); from then on gradients tagged
// with those steps are dropped as late. Fenced like a push.
struct ApplySyncStepRequest {
  Fence fence;
  std::int64_t step = 0;
};

// ---------------------------------------------------------------- worker
struct SetupWorkerRequest {
  Fence fence;
  std::vector<VariableLayout> variables;
};

struct CreateResourceRequest {
  ResourceId id = 0;
  ResourceId parent = 0;  // a resource this one is built from (an iterator's dataset), or 0
  std::string fn;         // registered resource function
  std::vector<Value> args;
};

struct RunClosureRequest {
  ClosureId id = 0;
  std::string fn;  // registered step function
  std::vector<Value> args;
  Fence fence;
  Incarnation worker_incarnation = 0;  // the incarnation the coordinator set up; a restarted worker refuses
  std::int64_t sync_step = kNoSyncStep;  // sync mode: the step the closure's pushes are tagged with
};
struct RunClosureResponse {
  Value result;
  // Staleness of the gradients the closure pushed, as the ps measured them.
  StalenessHistogram staleness = {};
};

using Request = std::variant<HealthRequest, CreateShardsRequest, PullRequest, PushRequest, ExportShardsRequest,
                             FenceRequest, SetupWorkerRequest, CreateResourceRequest, RunClosureRequest,
                             ApplySyncStepRequest>;
using Response =
    std::variant<EmptyResponse, HealthResponse, PullResponse, PushResponse, ExportShardsResponse, RunClosureResponse>;

// Short name for traces and errors: "Pull", "RunClosure" ...
const char* request_name(const Request& r);

// Bytes the message would occupy on the wire (payload plus a small header);
// the simulator's network charges this.
std::size_t wire_size(const Request& r);
std::size_t wire_size(const Response& r);

// What a message costs its sender and receiver besides its bytes: the rows
// it names or carries (an embedding lookup's ids, a sparse gradient's rows),
// the items in it (one per shard pulled or pushed) and which plane carries
// it (Pull and Push go over the data plane, the rest over gRPC).
struct MessageShape {
  std::size_t bytes = 0;   // wire_size()
  std::int64_t rows = 0;   // row ids it names (requests) or rows it returns by id (replies)
  std::int64_t items = 0;
  // Of the items, those that name rows by id (a pull's lookup, a sparse
  // push): each is a gather or scatter of its own on the ps.
  std::int64_t items_by_id = 0;
  bool data_plane = false;
  std::int64_t rows_read = 0;        // requests: the rows their reply will carry by id
  std::int64_t items_by_id_read = 0;  // requests: the items their reply will carry by id
  // Requests: the items by id that are sparse gradients, not reads.
  std::int64_t items_pushed_by_id() const { return items_by_id - items_by_id_read; }
};
MessageShape message_shape(const Request& r);
// `request` is the shape of the request it answers (a reply carries the rows it asked for).
MessageShape message_shape(const Response& r, const MessageShape& request);

}  // namespace twinps
