#include "net/convert.h"

#include <bit>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "net/status_mapping.h"

namespace twinps::net {

// Tensor bytes are copied (or handed to gRPC) as they sit in memory; the wire
// format is little-endian float32.
static_assert(std::endian::native == std::endian::little, "twinps' wire format assumes a little-endian host");
static_assert(sizeof(float) == 4 && std::numeric_limits<float>::is_iec559, "float must be IEEE-754 binary32");

void ContiguousAttachments::copy(std::uint64_t offset, std::size_t len, void* dst) const {
  if (len) std::memcpy(dst, bytes_.data() + offset, len);
}

std::string flatten(const AttachmentWriter& writer) {
  std::string out;
  out.reserve(writer.total());
  for (const auto& s : writer.spans()) out.append(static_cast<const char*>(s.data), s.size);
  return out;
}

namespace {

// ------------------------------------------------------------------ errors
// Leaf errors name their field; each enclosing level prepends its own, so the
// caller sees the whole path: "Request.push.updates[1].values: ...".
Status invalid(std::string_view field, std::string_view reason) {
  return absl::InvalidArgumentError(std::string(field) + ": " + std::string(reason));
}

Status within(Status s, std::string_view field) {
  if (s.ok()) return s;
  const std::string_view msg(s.message().data(), s.message().size());
  std::string out(field);
  if (!msg.empty() && msg.front() != '[') out += '.';
  out += msg;
  return absl::InvalidArgumentError(out);
}

std::string indexed(std::string_view field, std::size_t i) {
  return std::string(field) + "[" + std::to_string(i) + "]";
}

#define TWINPS_WITHIN(field, expr)                                       \
  do {                                                                   \
    ::absl::Status twinps_status_ = (expr);                              \
    if (!twinps_status_.ok()) return within(std::move(twinps_status_), field); \
  } while (0)

// A dimension beyond this cannot belong to a tensor that fits in a message
// (unless another dimension is 0, which is no use either).
constexpr std::int64_t kMaxDimension = std::numeric_limits<std::int32_t>::max();

Status check_dimension(std::string_view field, std::int64_t v) {
  if (v < 0) return invalid(field, "negative dimension " + std::to_string(v));
  if (v > kMaxDimension) return invalid(field, "dimension " + std::to_string(v) + " is too large");
  return absl::OkStatus();
}

Status check_non_negative(std::string_view field, std::int64_t v) {
  if (v < 0) return invalid(field, "must not be negative, got " + std::to_string(v));
  return absl::OkStatus();
}

template <typename Out, typename In>
void copy_repeated(const In& in, Out* out) {
  out->Reserve(static_cast<int>(in.size()));
  for (const auto& v : in) out->Add(v);
}

template <typename Out, typename In>
void copy_to_vector(const In& in, std::vector<Out>* out) {
  out->assign(in.begin(), in.end());
}

// ------------------------------------------------------------------ enums
wire::Job to_wire(Job j) {
  switch (j) {
    case Job::kChief: return wire::JOB_CHIEF;
    case Job::kWorker: return wire::JOB_WORKER;
    case Job::kPs: return wire::JOB_PS;
    case Job::kEvaluator: return wire::JOB_EVALUATOR;
  }
  return wire::JOB_CHIEF;
}
Status from_wire(std::string_view field, int v, Job* out) {
  switch (v) {
    case wire::JOB_CHIEF: *out = Job::kChief; return absl::OkStatus();
    case wire::JOB_WORKER: *out = Job::kWorker; return absl::OkStatus();
    case wire::JOB_PS: *out = Job::kPs; return absl::OkStatus();
    case wire::JOB_EVALUATOR: *out = Job::kEvaluator; return absl::OkStatus();
  }
  return invalid(field, "unknown job " + std::to_string(v));
}

wire::VariableKind to_wire(VariableKind k) {
  switch (k) {
    case VariableKind::kTrainable: return wire::VARIABLE_KIND_TRAINABLE;
    case VariableKind::kAccumulator: return wire::VARIABLE_KIND_ACCUMULATOR;
    case VariableKind::kCounter: return wire::VARIABLE_KIND_COUNTER;
  }
  return wire::VARIABLE_KIND_TRAINABLE;
}
Status from_wire(std::string_view field, int v, VariableKind* out) {
  switch (v) {
    case wire::VARIABLE_KIND_TRAINABLE: *out = VariableKind::kTrainable; return absl::OkStatus();
    case wire::VARIABLE_KIND_ACCUMULATOR: *out = VariableKind::kAccumulator; return absl::OkStatus();
    case wire::VARIABLE_KIND_COUNTER: *out = VariableKind::kCounter; return absl::OkStatus();
  }
  return invalid(field, "unknown variable kind " + std::to_string(v));
}

wire::Update::Op to_wire(Update::Op op) {
  switch (op) {
    case Update::Op::kApplyGradient: return wire::Update::APPLY_GRADIENT;
    case Update::Op::kAdd: return wire::Update::ADD;
    case Update::Op::kAssign: return wire::Update::ASSIGN;
  }
  return wire::Update::APPLY_GRADIENT;
}
Status from_wire(std::string_view field, int v, Update::Op* out) {
  switch (v) {
    case wire::Update::APPLY_GRADIENT: *out = Update::Op::kApplyGradient; return absl::OkStatus();
    case wire::Update::ADD: *out = Update::Op::kAdd; return absl::OkStatus();
    case wire::Update::ASSIGN: *out = Update::Op::kAssign; return absl::OkStatus();
  }
  return invalid(field, "unknown update op " + std::to_string(v));
}

wire::LearningRateSchedule::Kind to_wire(LearningRateSchedule::Kind k) {
  using K = LearningRateSchedule::Kind;
  switch (k) {
    case K::kConstant: return wire::LearningRateSchedule::CONSTANT;
    case K::kExponentialDecay: return wire::LearningRateSchedule::EXPONENTIAL_DECAY;
    case K::kInverseTimeDecay: return wire::LearningRateSchedule::INVERSE_TIME_DECAY;
    case K::kPiecewiseConstant: return wire::LearningRateSchedule::PIECEWISE_CONSTANT;
  }
  return wire::LearningRateSchedule::CONSTANT;
}
Status from_wire(std::string_view field, int v, LearningRateSchedule::Kind* out) {
  using K = LearningRateSchedule::Kind;
  switch (v) {
    case wire::LearningRateSchedule::CONSTANT: *out = K::kConstant; return absl::OkStatus();
    case wire::LearningRateSchedule::EXPONENTIAL_DECAY: *out = K::kExponentialDecay; return absl::OkStatus();
    case wire::LearningRateSchedule::INVERSE_TIME_DECAY: *out = K::kInverseTimeDecay; return absl::OkStatus();
    case wire::LearningRateSchedule::PIECEWISE_CONSTANT: *out = K::kPiecewiseConstant; return absl::OkStatus();
  }
  return invalid(field, "unknown learning-rate schedule kind " + std::to_string(v));
}

wire::OptimizerConfig::Kind to_wire(OptimizerConfig::Kind k) {
  using K = OptimizerConfig::Kind;
  switch (k) {
    case K::kSgd: return wire::OptimizerConfig::SGD;
    case K::kAdagrad: return wire::OptimizerConfig::ADAGRAD;
    case K::kRmsprop: return wire::OptimizerConfig::RMSPROP;
    case K::kAdam: return wire::OptimizerConfig::ADAM;
  }
  return wire::OptimizerConfig::SGD;
}
Status from_wire(std::string_view field, int v, OptimizerConfig::Kind* out) {
  using K = OptimizerConfig::Kind;
  switch (v) {
    case wire::OptimizerConfig::SGD: *out = K::kSgd; return absl::OkStatus();
    case wire::OptimizerConfig::ADAGRAD: *out = K::kAdagrad; return absl::OkStatus();
    case wire::OptimizerConfig::RMSPROP: *out = K::kRmsprop; return absl::OkStatus();
    case wire::OptimizerConfig::ADAM: *out = K::kAdam; return absl::OkStatus();
  }
  return invalid(field, "unknown optimizer kind " + std::to_string(v));
}

// ------------------------------------------------------------------ requests
void encode(const HealthRequest&, wire::HealthRequest*, AttachmentWriter*) {}
Status decode(const wire::HealthRequest&, HealthRequest*, const AttachmentReader*) { return absl::OkStatus(); }

void encode(const CreateShardsRequest& in, wire::CreateShardsRequest* out, AttachmentWriter* a) {
  to_proto(in.fence, out->mutable_fence());
  to_proto(in.optimizer, out->mutable_optimizer());
  out->mutable_shards()->Reserve(static_cast<int>(in.shards.size()));
  for (const auto& s : in.shards) to_proto(s, out->add_shards(), a);
  out->set_replace_existing(in.replace_existing);
}
Status decode(const wire::CreateShardsRequest& in, CreateShardsRequest* out, const AttachmentReader* a) {
  TWINPS_WITHIN("fence", from_proto(in.fence(), &out->fence));
  TWINPS_WITHIN("optimizer", from_proto(in.optimizer(), &out->optimizer));
  out->shards.resize(static_cast<std::size_t>(in.shards_size()));
  for (int i = 0; i < in.shards_size(); ++i)
    TWINPS_WITHIN(indexed("shards", i), from_proto(in.shards(i), &out->shards[i], a));
  out->replace_existing = in.replace_existing();
  return absl::OkStatus();
}

void encode(const PullRequest& in, wire::PullRequest* out, AttachmentWriter*) {
  out->mutable_items()->Reserve(static_cast<int>(in.items.size()));
  for (const auto& item : in.items) {
    auto* w = out->add_items();
    w->set_shard(item.shard);
    w->set_all_rows(item.all_rows);
    copy_repeated(item.rows, w->mutable_rows());
  }
}
Status decode(const wire::PullRequest& in, PullRequest* out, const AttachmentReader*) {
  out->items.resize(static_cast<std::size_t>(in.items_size()));
  for (int i = 0; i < in.items_size(); ++i) {
    const auto& w = in.items(i);
    auto& item = out->items[i];
    item.shard = w.shard();
    item.all_rows = w.all_rows();
    copy_to_vector(w.rows(), &item.rows);
  }
  return absl::OkStatus();
}

void encode(const PushRequest& in, wire::PushRequest* out, AttachmentWriter* a) {
  to_proto(in.fence, out->mutable_fence());
  out->mutable_updates()->Reserve(static_cast<int>(in.updates.size()));
  for (const auto& u : in.updates) {
    auto* w = out->add_updates();
    w->set_shard(u.shard);
    w->set_op(to_wire(u.op));
    w->set_sparse(u.sparse);
    copy_repeated(u.rows, w->mutable_rows());
    to_proto(u.values, w->mutable_values(), a);
    w->set_counter_delta(u.counter_delta);
    if (u.read_version != Update::kUnknownVersion) w->set_read_version(u.read_version);
  }
  if (!in.then_pull.items.empty()) encode(in.then_pull, out->mutable_then_pull(), a);
  if (in.sync_step != kNoSyncStep) out->set_sync_step(in.sync_step);
  if (in.split_key != 0) out->set_split_key(in.split_key);
}
Status decode(const wire::PushRequest& in, PushRequest* out, const AttachmentReader* a) {
  TWINPS_WITHIN("fence", from_proto(in.fence(), &out->fence));
  out->updates.resize(static_cast<std::size_t>(in.updates_size()));
  for (int i = 0; i < in.updates_size(); ++i) {
    const auto& w = in.updates(i);
    auto& u = out->updates[i];
    u.shard = w.shard();
    TWINPS_WITHIN(indexed("updates", i), from_wire("op", w.op(), &u.op));
    u.sparse = w.sparse();
    copy_to_vector(w.rows(), &u.rows);
    TWINPS_WITHIN(indexed("updates", i), within(from_proto(w.values(), &u.values, a), "values"));
    u.counter_delta = w.counter_delta();
    if (w.has_read_version()) {
      if (w.read_version() < 0)
        return absl::InvalidArgumentError(indexed("updates", i) + ".read_version: " +
                                          std::to_string(w.read_version()) + " is negative");
      u.read_version = w.read_version();
    }
  }
  TWINPS_WITHIN("then_pull", decode(in.then_pull(), &out->then_pull, a));
  if (in.has_sync_step()) {
    if (in.sync_step() < 0)
      return absl::InvalidArgumentError("sync_step: " + std::to_string(in.sync_step()) + " is negative");
    out->sync_step = in.sync_step();
  }
  out->split_key = in.split_key();
  return absl::OkStatus();
}

void encode(const ExportShardsRequest& in, wire::ExportShardsRequest* out, AttachmentWriter*) {
  copy_repeated(in.shards, out->mutable_shards());
}
Status decode(const wire::ExportShardsRequest& in, ExportShardsRequest* out, const AttachmentReader*) {
  copy_to_vector(in.shards(), &out->shards);
  return absl::OkStatus();
}

void encode(const FenceRequest& in, wire::FenceRequest* out, AttachmentWriter*) {
  to_proto(in.fence, out->mutable_fence());
}
Status decode(const wire::FenceRequest& in, FenceRequest* out, const AttachmentReader*) {
  TWINPS_WITHIN("fence", from_proto(in.fence(), &out->fence));
  return absl::OkStatus();
}

void encode(const ApplySyncStepRequest& in, wire::ApplySyncStepRequest* out, AttachmentWriter*) {
  to_proto(in.fence, out->mutable_fence());
  out->set_step(in.step);
}
Status decode(const wire::ApplySyncStepRequest& in, ApplySyncStepRequest* out, const AttachmentReader*) {
  TWINPS_WITHIN("fence", from_proto(in.fence(), &out->fence));
  if (in.step() < 0) return absl::InvalidArgumentError("step: " + std::to_string(in.step()) + " is negative");
  out->step = in.step();
  return absl::OkStatus();
}

void encode(const SetupWorkerRequest& in, wire::SetupWorkerRequest* out, AttachmentWriter*) {
  to_proto(in.fence, out->mutable_fence());
  out->mutable_variables()->Reserve(static_cast<int>(in.variables.size()));
  for (const auto& v : in.variables) to_proto(v, out->add_variables());
}
Status decode(const wire::SetupWorkerRequest& in, SetupWorkerRequest* out, const AttachmentReader*) {
  TWINPS_WITHIN("fence", from_proto(in.fence(), &out->fence));
  out->variables.resize(static_cast<std::size_t>(in.variables_size()));
  for (int i = 0; i < in.variables_size(); ++i)
    TWINPS_WITHIN(indexed("variables", i), from_proto(in.variables(i), &out->variables[i]));
  return absl::OkStatus();
}

template <typename W>
void encode_args(const std::vector<Value>& in, W* out, AttachmentWriter* a) {
  out->Reserve(static_cast<int>(in.size()));
  for (const auto& v : in) to_proto(v, out->Add(), a);
}
template <typename W>
Status decode_args(const W& in, std::vector<Value>* out, const AttachmentReader* a) {
  out->resize(static_cast<std::size_t>(in.size()));
  for (int i = 0; i < in.size(); ++i) TWINPS_WITHIN(indexed("args", i), from_proto(in.Get(i), &(*out)[i], a));
  return absl::OkStatus();
}

void encode(const CreateResourceRequest& in, wire::CreateResourceRequest* out, AttachmentWriter* a) {
  out->set_id(in.id);
  out->set_parent(in.parent);
  out->set_fn(in.fn);
  encode_args(in.args, out->mutable_args(), a);
}
Status decode(const wire::CreateResourceRequest& in, CreateResourceRequest* out, const AttachmentReader* a) {
  out->id = in.id();
  out->parent = in.parent();
  out->fn = in.fn();
  return decode_args(in.args(), &out->args, a);
}

void encode(const RunClosureRequest& in, wire::RunClosureRequest* out, AttachmentWriter* a) {
  out->set_id(in.id);
  out->set_fn(in.fn);
  encode_args(in.args, out->mutable_args(), a);
  to_proto(in.fence, out->mutable_fence());
  out->set_worker_incarnation(in.worker_incarnation);
  if (in.sync_step != kNoSyncStep) out->set_sync_step(in.sync_step);
}
Status decode(const wire::RunClosureRequest& in, RunClosureRequest* out, const AttachmentReader* a) {
  out->id = in.id();
  out->fn = in.fn();
  TWINPS_RETURN_IF_ERROR(decode_args(in.args(), &out->args, a));
  TWINPS_WITHIN("fence", from_proto(in.fence(), &out->fence));
  out->worker_incarnation = in.worker_incarnation();
  if (in.has_sync_step()) {
    if (in.sync_step() < 0)
      return absl::InvalidArgumentError("sync_step: " + std::to_string(in.sync_step()) + " is negative");
    out->sync_step = in.sync_step();
  }
  return absl::OkStatus();
}

// ------------------------------------------------------------------ responses
void encode(const EmptyResponse&, wire::EmptyResponse*, AttachmentWriter*) {}
Status decode(const wire::EmptyResponse&, EmptyResponse*, const AttachmentReader*) { return absl::OkStatus(); }

void encode(const HealthResponse& in, wire::HealthResponse* out, AttachmentWriter*) {
  to_proto(in.task, out->mutable_task());
  out->set_incarnation(in.incarnation);
}
Status decode(const wire::HealthResponse& in, HealthResponse* out, const AttachmentReader*) {
  TWINPS_WITHIN("task", from_proto(in.task(), &out->task));
  out->incarnation = in.incarnation();
  return absl::OkStatus();
}

void encode(const PullResponse& in, wire::PullResponse* out, AttachmentWriter* a) {
  out->mutable_items()->Reserve(static_cast<int>(in.items.size()));
  for (const auto& item : in.items) {
    auto* w = out->add_items();
    to_proto(item.tensor(), w->mutable_values(), a);
    w->set_counter(item.counter);
    w->set_version(item.version);
  }
}
Status decode(const wire::PullResponse& in, PullResponse* out, const AttachmentReader* a) {
  out->items.resize(static_cast<std::size_t>(in.items_size()));
  for (int i = 0; i < in.items_size(); ++i) {
    TWINPS_WITHIN(indexed("items", i), within(from_proto(in.items(i).values(), &out->items[i].values, a), "values"));
    out->items[i].counter = in.items(i).counter();
    out->items[i].version = in.items(i).version();
  }
  return absl::OkStatus();
}

void encode(const StalenessHistogram& in, wire::StalenessHistogram* out) {
  if (in.empty()) return;
  copy_repeated(in.counts, out->mutable_counts());
  out->set_total(in.total);
  out->set_sum(in.sum);
  out->set_max(in.max);
  out->set_unmeasured(in.unmeasured);
  out->set_dropped(in.dropped);
}
Status decode(const wire::StalenessHistogram& in, StalenessHistogram* out) {
  out->dropped = in.dropped();
  if (in.counts_size() == 0 && in.total() == 0) {
    out->unmeasured = in.unmeasured();
    return absl::OkStatus();
  }
  if (static_cast<std::size_t>(in.counts_size()) != out->counts.size())
    return absl::InvalidArgumentError("counts: " + std::to_string(in.counts_size()) + " buckets, expected " +
                                      std::to_string(out->counts.size()));
  std::uint64_t counted = 0;
  for (int i = 0; i < in.counts_size(); ++i) {
    out->counts[static_cast<std::size_t>(i)] = in.counts(i);
    counted += in.counts(i);
  }
  if (counted != in.total())
    return absl::InvalidArgumentError("total: " + std::to_string(in.total()) + ", but the buckets hold " +
                                      std::to_string(counted));
  if (in.max() < 0) return absl::InvalidArgumentError("max: " + std::to_string(in.max()) + " is negative");
  out->total = in.total();
  out->sum = in.sum();
  out->max = in.max();
  out->unmeasured = in.unmeasured();
  return absl::OkStatus();
}

void encode(const PushResponse& in, wire::PushResponse* out, AttachmentWriter* a) {
  out->set_duplicate(in.duplicate);
  if (!in.pulled.items.empty()) encode(in.pulled, out->mutable_pulled(), a);
  encode(in.staleness, out->mutable_staleness());
}
Status decode(const wire::PushResponse& in, PushResponse* out, const AttachmentReader* a) {
  out->duplicate = in.duplicate();
  TWINPS_WITHIN("pulled", decode(in.pulled(), &out->pulled, a));
  TWINPS_WITHIN("staleness", decode(in.staleness(), &out->staleness));
  return absl::OkStatus();
}

void encode(const ExportShardsResponse& in, wire::ExportShardsResponse* out, AttachmentWriter* a) {
  out->mutable_shards()->Reserve(static_cast<int>(in.shards.size()));
  for (const auto& s : in.shards) to_proto(s, out->add_shards(), a);
}
Status decode(const wire::ExportShardsResponse& in, ExportShardsResponse* out, const AttachmentReader* a) {
  out->shards.resize(static_cast<std::size_t>(in.shards_size()));
  for (int i = 0; i < in.shards_size(); ++i)
    TWINPS_WITHIN(indexed("shards", i), from_proto(in.shards(i), &out->shards[i], a));
  return absl::OkStatus();
}

void encode(const RunClosureResponse& in, wire::RunClosureResponse* out, AttachmentWriter* a) {
  to_proto(in.result, out->mutable_result(), a);
  encode(in.staleness, out->mutable_staleness());
}
Status decode(const wire::RunClosureResponse& in, RunClosureResponse* out, const AttachmentReader* a) {
  TWINPS_WITHIN("result", from_proto(in.result(), &out->result, a));
  TWINPS_WITHIN("staleness", decode(in.staleness(), &out->staleness));
  return absl::OkStatus();
}

// Decodes the alternative T of a variant from the wire message `w`.
template <typename T, typename Variant, typename W>
Status decode_alternative(std::string_view field, const W& w, Variant* out, const AttachmentReader* a) {
  T value;
  TWINPS_WITHIN(field, decode(w, &value, a));
  out->template emplace<T>(std::move(value));
  return absl::OkStatus();
}

}  // namespace

// ------------------------------------------------------------------ basics
void to_proto(const TaskId& in, wire::TaskId* out) {
  out->set_job(to_wire(in.job));
  out->set_index(in.index);
}
Status from_proto(const wire::TaskId& in, TaskId* out) {
  TWINPS_RETURN_IF_ERROR(from_wire("job", in.job(), &out->job));
  if (in.index() < 0) return invalid("index", "negative task index " + std::to_string(in.index()));
  out->index = in.index();
  return absl::OkStatus();
}

void to_proto(const Matrix& in, wire::Tensor* out, AttachmentWriter* attachments) {
  out->set_rows(in.rows());
  out->set_cols(in.cols());
  const std::size_t bytes = byte_size(in);
  if (attachments && attachments->wants(bytes)) {
    out->set_attachment_offset(attachments->add(in.data(), bytes));
  } else if (bytes > 0) {
    out->set_data(in.data(), bytes);
  }
}
Status from_proto(const wire::Tensor& in, Matrix* out, const AttachmentReader* attachments) {
  TWINPS_RETURN_IF_ERROR(check_dimension("rows", in.rows()));
  TWINPS_RETURN_IF_ERROR(check_dimension("cols", in.cols()));
  // Both are <= 2^31 - 1, so neither the element count nor the byte count overflows.
  const std::uint64_t elements = static_cast<std::uint64_t>(in.rows()) * static_cast<std::uint64_t>(in.cols());
  const std::uint64_t bytes = elements * sizeof(float);
  const std::string shape = std::to_string(in.rows()) + "x" + std::to_string(in.cols()) + " float32";
  if (in.has_attachment_offset()) {
    if (!in.data().empty()) return invalid("data", "a tensor has both in-band data and an attachment");
    if (!attachments)
      return invalid("attachment_offset", "refers to attachment_data, but the message carries none");
    const std::uint64_t offset = in.attachment_offset();
    if (offset > attachments->size() || bytes > attachments->size() - offset)
      return invalid("attachment_offset", "range [" + std::to_string(offset) + ", +" + std::to_string(bytes) +
                                              ") for " + shape + " lies outside attachment_data of " +
                                              std::to_string(attachments->size()) + " bytes");
    if (!attachments->claim(bytes))
      return invalid("attachment_offset", "the tensors claim more than the " + std::to_string(attachments->size()) +
                                              " attachment bytes the message carries (overlapping ranges)");
    *out = Matrix(in.rows(), in.cols());
    attachments->copy(offset, bytes, out->data());
    return absl::OkStatus();
  }
  if (in.data().size() != bytes)
    return invalid("data", "is " + std::to_string(in.data().size()) + " bytes, expected " + std::to_string(bytes) +
                               " for " + shape);
  *out = Matrix(in.rows(), in.cols());
  if (bytes) std::memcpy(out->data(), in.data().data(), bytes);
  return absl::OkStatus();
}

void to_proto(const Fence& in, wire::Fence* out) {
  out->set_coordinator(in.coordinator);
  out->set_generation(in.generation);
}
Status from_proto(const wire::Fence& in, Fence* out) {
  out->coordinator = in.coordinator();
  out->generation = in.generation();
  return absl::OkStatus();
}

void to_proto(const Status& in, wire::Status* out) {
  out->set_code(static_cast<int>(in.code()));
  out->set_message(std::string(in.message()));
  in.ForEachPayload([out](absl::string_view type_url, const absl::Cord& payload) {
    auto* p = out->add_payloads();
    p->set_type_url(std::string(type_url));
    p->set_value(std::string(payload));
  });
}
namespace {

bool is_small_decimal(std::string_view s) {
  if (s.empty() || s.size() > 9) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

// The payloads core reads back (status.h) must parse: core's readers trust them.
Status check_payload(std::string_view type_url, std::string_view value) {
  if (type_url == kFailedTaskPayload) {
    const auto colon = value.find(':');
    if (colon == std::string_view::npos || !parse_job(value.substr(0, colon)) ||
        !is_small_decimal(value.substr(colon + 1)))
      return invalid("payloads", "failed-task payload \"" + std::string(value) + "\" is not a task (\"ps:1\")");
  } else if (type_url == kErrorKindPayload) {
    bool known = false;
    if (is_small_decimal(value)) {
      switch (static_cast<ErrorKind>(std::stoi(std::string(value)))) {
        case ErrorKind::kNone:
        case ErrorKind::kClosureInput:
        case ErrorKind::kFenced:
        case ErrorKind::kStaleIncarnation:
          known = true;
      }
    }
    if (!known) return invalid("payloads", "unknown error kind \"" + std::string(value) + "\"");
  }
  return absl::OkStatus();
}

}  // namespace

Status from_proto(const wire::Status& in, Status* out) {
  auto code = status_code_from_int(in.code());
  if (!code) return invalid("code", "unknown status code " + std::to_string(in.code()));
  if (*code == StatusCode::kOk) {
    *out = absl::OkStatus();
    return absl::OkStatus();
  }
  Status s(*code, absl::string_view(in.message().data(), in.message().size()));
  for (const auto& p : in.payloads()) {
    TWINPS_RETURN_IF_ERROR(check_payload(p.type_url(), p.value()));
    s.SetPayload(absl::string_view(p.type_url().data(), p.type_url().size()), absl::Cord(p.value()));
  }
  *out = std::move(s);
  return absl::OkStatus();
}

void to_proto(const Value& in, wire::Value* out, AttachmentWriter* attachments) {
  struct {
    wire::Value* out;
    AttachmentWriter* a;
    void operator()(std::monostate) const { out->mutable_none(); }
    void operator()(double v) const { out->set_double_value(v); }
    void operator()(std::int64_t v) const { out->set_int_value(v); }
    void operator()(const std::string& v) const { out->set_string_value(v); }
    void operator()(const Matrix& v) const { to_proto(v, out->mutable_tensor(), a); }
    void operator()(const ResourceRef& v) const { out->mutable_resource()->set_id(v.id); }
  } visitor{out, attachments};
  std::visit(visitor, in);
}
Status from_proto(const wire::Value& in, Value* out, const AttachmentReader* attachments) {
  switch (in.kind_case()) {
    case wire::Value::kNone: *out = std::monostate{}; return absl::OkStatus();
    case wire::Value::kDoubleValue: *out = in.double_value(); return absl::OkStatus();
    case wire::Value::kIntValue: *out = static_cast<std::int64_t>(in.int_value()); return absl::OkStatus();
    case wire::Value::kStringValue: *out = in.string_value(); return absl::OkStatus();
    case wire::Value::kTensor: {
      Matrix m;
      TWINPS_WITHIN("tensor", from_proto(in.tensor(), &m, attachments));
      *out = std::move(m);
      return absl::OkStatus();
    }
    case wire::Value::kResource: *out = ResourceRef{in.resource().id()}; return absl::OkStatus();
    case wire::Value::KIND_NOT_SET: break;
  }
  return invalid("kind", "no value set (or one this build does not know)");
}

void to_proto(const ShardSpec& in, wire::ShardSpec* out) {
  out->set_id(in.id);
  out->set_name(in.name);
  out->set_kind(to_wire(in.kind));
  out->set_rows(in.rows);
  out->set_cols(in.cols);
  if (in.optimizer) to_proto(*in.optimizer, out->mutable_optimizer());
}
Status from_proto(const wire::ShardSpec& in, ShardSpec* out) {
  out->id = in.id();
  out->name = in.name();
  TWINPS_RETURN_IF_ERROR(from_wire("kind", in.kind(), &out->kind));
  TWINPS_RETURN_IF_ERROR(check_dimension("rows", in.rows()));
  TWINPS_RETURN_IF_ERROR(check_dimension("cols", in.cols()));
  out->rows = in.rows();
  out->cols = in.cols();
  out->optimizer.reset();
  if (in.has_optimizer()) TWINPS_WITHIN("optimizer", from_proto(in.optimizer(), &out->optimizer.emplace()));
  return absl::OkStatus();
}

void to_proto(const ShardState& in, wire::ShardState* out, AttachmentWriter* attachments) {
  to_proto(in.spec, out->mutable_spec());
  to_proto(in.value, out->mutable_value(), attachments);
  out->mutable_slots()->Reserve(static_cast<int>(in.slots.size()));
  for (const auto& s : in.slots) to_proto(s, out->add_slots(), attachments);
  out->set_step(in.step);
  out->set_counter(in.counter);
}
Status from_proto(const wire::ShardState& in, ShardState* out, const AttachmentReader* attachments) {
  TWINPS_WITHIN("spec", from_proto(in.spec(), &out->spec));
  TWINPS_WITHIN("value", from_proto(in.value(), &out->value, attachments));
  out->slots.resize(static_cast<std::size_t>(in.slots_size()));
  for (int i = 0; i < in.slots_size(); ++i)
    TWINPS_WITHIN(indexed("slots", i), from_proto(in.slots(i), &out->slots[i], attachments));
  TWINPS_RETURN_IF_ERROR(check_non_negative("step", in.step()));
  out->step = in.step();
  out->counter = in.counter();
  return absl::OkStatus();
}

void to_proto(const ShardPlacement& in, wire::ShardPlacement* out) {
  out->set_id(in.id);
  out->set_ps(in.ps);
  out->set_row_offset(in.row_offset);
  out->set_rows(in.rows);
}
Status from_proto(const wire::ShardPlacement& in, ShardPlacement* out) {
  out->id = in.id();
  TWINPS_RETURN_IF_ERROR(check_non_negative("ps", in.ps()));
  TWINPS_RETURN_IF_ERROR(check_non_negative("row_offset", in.row_offset()));
  TWINPS_RETURN_IF_ERROR(check_non_negative("rows", in.rows()));
  out->ps = in.ps();
  out->row_offset = in.row_offset();
  out->rows = in.rows();
  return absl::OkStatus();
}

void to_proto(const VariableLayout& in, wire::VariableLayout* out) {
  out->set_name(in.name);
  copy_repeated(in.shape, out->mutable_shape());
  out->set_kind(to_wire(in.kind));
  out->mutable_shards()->Reserve(static_cast<int>(in.shards.size()));
  for (const auto& s : in.shards) to_proto(s, out->add_shards());
  if (in.optimizer) to_proto(*in.optimizer, out->mutable_optimizer());
}
Status from_proto(const wire::VariableLayout& in, VariableLayout* out) {
  out->name = in.name();
  out->shape.clear();
  std::int64_t elements = 1;
  for (int i = 0; i < in.shape_size(); ++i) {
    const std::int64_t d = in.shape(i);
    TWINPS_RETURN_IF_ERROR(check_non_negative(indexed("shape", i), d));
    if (d != 0 && elements > std::numeric_limits<std::int64_t>::max() / d)
      return invalid("shape", "has more elements than fit in int64");
    elements *= d;
    out->shape.push_back(d);
  }
  TWINPS_RETURN_IF_ERROR(from_wire("kind", in.kind(), &out->kind));
  out->shards.resize(static_cast<std::size_t>(in.shards_size()));
  for (int i = 0; i < in.shards_size(); ++i)
    TWINPS_WITHIN(indexed("shards", i), from_proto(in.shards(i), &out->shards[i]));
  out->optimizer.reset();
  if (in.has_optimizer()) TWINPS_WITHIN("optimizer", from_proto(in.optimizer(), &out->optimizer.emplace()));
  return absl::OkStatus();
}

void to_proto(const LearningRateSchedule& in, wire::LearningRateSchedule* out) {
  out->set_kind(to_wire(in.kind));
  out->set_initial(in.initial);
  out->set_decay_steps(in.decay_steps);
  out->set_decay_rate(in.decay_rate);
  out->set_staircase(in.staircase);
  copy_repeated(in.boundaries, out->mutable_boundaries());
  copy_repeated(in.values, out->mutable_values());
}
Status from_proto(const wire::LearningRateSchedule& in, LearningRateSchedule* out) {
  TWINPS_RETURN_IF_ERROR(from_wire("kind", in.kind(), &out->kind));
  out->initial = in.initial();
  out->decay_steps = in.decay_steps();
  out->decay_rate = in.decay_rate();
  out->staircase = in.staircase();
  copy_to_vector(in.boundaries(), &out->boundaries);
  copy_to_vector(in.values(), &out->values);
  return absl::OkStatus();
}

void to_proto(const OptimizerConfig& in, wire::OptimizerConfig* out) {
  out->set_kind(to_wire(in.kind));
  to_proto(in.learning_rate, out->mutable_learning_rate());
  out->set_momentum(in.momentum);
  out->set_nesterov(in.nesterov);
  out->set_rho(in.rho);
  out->set_centered(in.centered);
  out->set_epsilon(in.epsilon);
  out->set_beta_1(in.beta_1);
  out->set_beta_2(in.beta_2);
  out->set_initial_accumulator_value(in.initial_accumulator_value);
  out->set_lazy_adam(in.lazy_adam);
}
Status from_proto(const wire::OptimizerConfig& in, OptimizerConfig* out) {
  TWINPS_RETURN_IF_ERROR(from_wire("kind", in.kind(), &out->kind));
  TWINPS_WITHIN("learning_rate", from_proto(in.learning_rate(), &out->learning_rate));
  out->momentum = in.momentum();
  out->nesterov = in.nesterov();
  out->rho = in.rho();
  out->centered = in.centered();
  out->epsilon = in.epsilon();
  out->beta_1 = in.beta_1();
  out->beta_2 = in.beta_2();
  out->initial_accumulator_value = in.initial_accumulator_value();
  out->lazy_adam = in.lazy_adam();
  return absl::OkStatus();
}

// ------------------------------------------------------------------ envelopes
void to_proto(const Request& in, wire::Request* out, AttachmentWriter* a) {
  struct {
    wire::Request* out;
    AttachmentWriter* a;
    void operator()(const HealthRequest& r) const { encode(r, out->mutable_health(), a); }
    void operator()(const CreateShardsRequest& r) const { encode(r, out->mutable_create_shards(), a); }
    void operator()(const PullRequest& r) const { encode(r, out->mutable_pull(), a); }
    void operator()(const PushRequest& r) const { encode(r, out->mutable_push(), a); }
    void operator()(const ExportShardsRequest& r) const { encode(r, out->mutable_export_shards(), a); }
    void operator()(const FenceRequest& r) const { encode(r, out->mutable_fence(), a); }
    void operator()(const SetupWorkerRequest& r) const { encode(r, out->mutable_setup_worker(), a); }
    void operator()(const CreateResourceRequest& r) const { encode(r, out->mutable_create_resource(), a); }
    void operator()(const RunClosureRequest& r) const { encode(r, out->mutable_run_closure(), a); }
    void operator()(const ApplySyncStepRequest& r) const { encode(r, out->mutable_apply_sync_step(), a); }
  } visitor{out, a};
  std::visit(visitor, in);
}

// ------------------------------------------------------------------ meta payloads
namespace {

Status meta_refused(const std::string& field, const std::string& what) {
  return invalid(field, what + " exists only in the simulator's timing-only runs and cannot be sent");
}
Status meta_refused(const std::string& field, const MetaTensor& m) {
  return meta_refused(field, "a meta tensor (" + std::to_string(m.rows) + "x" + std::to_string(m.cols) + ", no values)");
}

Status check_sendable(const std::vector<ShardState>& shards, const std::string& field) {
  for (std::size_t i = 0; i < shards.size(); ++i)
    if (shards[i].spec.meta)
      return meta_refused(field + indexed("", i) + ".spec.meta", "a meta shard ('" + shards[i].spec.name + "')");
  return absl::OkStatus();
}
Status check_sendable(const PullResponse& r, const std::string& field) {
  for (std::size_t i = 0; i < r.items.size(); ++i)
    if (r.items[i].meta) return meta_refused(field + indexed(".items", i) + ".meta", *r.items[i].meta);
  return absl::OkStatus();
}

}  // namespace

Status check_sendable(const Request& in) {
  if (const auto* create = std::get_if<CreateShardsRequest>(&in))
    return check_sendable(create->shards, "Request.create_shards.shards");
  if (const auto* push = std::get_if<PushRequest>(&in)) {
    for (std::size_t i = 0; i < push->updates.size(); ++i)
      if (push->updates[i].meta)
        return meta_refused("Request.push" + indexed(".updates", i) + ".meta", *push->updates[i].meta);
  }
  return absl::OkStatus();
}

Status check_sendable(const Response& in) {
  if (const auto* pull = std::get_if<PullResponse>(&in)) return check_sendable(*pull, "Response.pull");
  if (const auto* push = std::get_if<PushResponse>(&in)) return check_sendable(push->pulled, "Response.push.pulled");
  if (const auto* exported = std::get_if<ExportShardsResponse>(&in))
    return check_sendable(exported->shards, "Response.export_shards.shards");
  return absl::OkStatus();
}

Status from_proto(const wire::Request& in, Request* out, const AttachmentReader* a) {
  Status s;
  switch (in.kind_case()) {
    case wire::Request::kHealth: s = decode_alternative<HealthRequest>("health", in.health(), out, a); break;
    case wire::Request::kCreateShards:
      s = decode_alternative<CreateShardsRequest>("create_shards", in.create_shards(), out, a);
      break;
    case wire::Request::kPull: s = decode_alternative<PullRequest>("pull", in.pull(), out, a); break;
    case wire::Request::kPush: s = decode_alternative<PushRequest>("push", in.push(), out, a); break;
    case wire::Request::kExportShards:
      s = decode_alternative<ExportShardsRequest>("export_shards", in.export_shards(), out, a);
      break;
    case wire::Request::kFence: s = decode_alternative<FenceRequest>("fence", in.fence(), out, a); break;
    case wire::Request::kSetupWorker:
      s = decode_alternative<SetupWorkerRequest>("setup_worker", in.setup_worker(), out, a);
      break;
    case wire::Request::kCreateResource:
      s = decode_alternative<CreateResourceRequest>("create_resource", in.create_resource(), out, a);
      break;
    case wire::Request::kRunClosure:
      s = decode_alternative<RunClosureRequest>("run_closure", in.run_closure(), out, a);
      break;
    case wire::Request::kApplySyncStep:
      s = decode_alternative<ApplySyncStepRequest>("apply_sync_step", in.apply_sync_step(), out, a);
      break;
    case wire::Request::KIND_NOT_SET: s = invalid("kind", "no request set (or one this build does not know)"); break;
  }
  return within(std::move(s), "Request");
}

void to_proto(const Response& in, wire::Response* out, AttachmentWriter* a) {
  struct {
    wire::Response* out;
    AttachmentWriter* a;
    void operator()(const EmptyResponse& r) const { encode(r, out->mutable_empty(), a); }
    void operator()(const HealthResponse& r) const { encode(r, out->mutable_health(), a); }
    void operator()(const PullResponse& r) const { encode(r, out->mutable_pull(), a); }
    void operator()(const PushResponse& r) const { encode(r, out->mutable_push(), a); }
    void operator()(const ExportShardsResponse& r) const { encode(r, out->mutable_export_shards(), a); }
    void operator()(const RunClosureResponse& r) const { encode(r, out->mutable_run_closure(), a); }
  } visitor{out, a};
  std::visit(visitor, in);
}

Status from_proto(const wire::Response& in, Response* out, const AttachmentReader* a) {
  Status s;
  switch (in.kind_case()) {
    case wire::Response::kEmpty: s = decode_alternative<EmptyResponse>("empty", in.empty(), out, a); break;
    case wire::Response::kHealth: s = decode_alternative<HealthResponse>("health", in.health(), out, a); break;
    case wire::Response::kPull: s = decode_alternative<PullResponse>("pull", in.pull(), out, a); break;
    case wire::Response::kPush: s = decode_alternative<PushResponse>("push", in.push(), out, a); break;
    case wire::Response::kExportShards:
      s = decode_alternative<ExportShardsResponse>("export_shards", in.export_shards(), out, a);
      break;
    case wire::Response::kRunClosure:
      s = decode_alternative<RunClosureResponse>("run_closure", in.run_closure(), out, a);
      break;
    case wire::Response::KIND_NOT_SET:
      s = invalid("kind", "no response set (or one this build does not know)");
      break;
  }
  return within(std::move(s), "Response");
}

}  // namespace twinps::net
