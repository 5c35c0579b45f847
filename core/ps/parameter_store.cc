#include "core/ps/parameter_store.h"

#include <algorithm>
#include <cmath>

namespace twinps {
namespace {

std::string dims(std::int64_t rows, std::int64_t cols) { return std::to_string(rows) + "x" + std::to_string(cols); }
std::string dims(const Matrix& m) { return dims(m.rows(), m.cols()); }

const char* kind_name(VariableKind k) {
  switch (k) {
    case VariableKind::kTrainable: return "trainable";
    case VariableKind::kAccumulator: return "accumulator";
    case VariableKind::kCounter: return "counter";
  }
  return "?";
}

const char* op_name(Update::Op op) {
  switch (op) {
    case Update::Op::kApplyGradient: return "apply-gradient";
    case Update::Op::kAdd: return "add";
    case Update::Op::kAssign: return "assign";
  }
  return "?";
}

bool same_spec(const ShardSpec& a, const ShardSpec& b) {
  return a.id == b.id && a.name == b.name && a.kind == b.kind && a.rows == b.rows && a.cols == b.cols &&
         a.meta == b.meta && a.optimizer == b.optimizer;
}

std::string fence_string(const Fence& f) {
  return "coordinator " + std::to_string(f.coordinator) + " generation " + std::to_string(f.generation);
}

// Checks the row ids of a sparse read or write against a shard of `rows` rows.
Status check_rows(const RowIds& ids, std::int64_t rows) {
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0)
      return absl::InvalidArgumentError("row id " + std::to_string(ids[i]) + " (index " + std::to_string(i) +
                                        ") is negative");
    if (ids[i] >= rows)
      return absl::InvalidArgumentError("row id " + std::to_string(ids[i]) + " (index " + std::to_string(i) +
                                        ") is out of range [0, " + std::to_string(rows) + ")");
  }
  return absl::OkStatus();
}

// x * 0 is 0 for every finite x and NaN for NaN and ±Inf, so one vectorised
// read-only pass decides; Eigen's allFinite() is ~4x slower, and on a large
// push this check was the parameter server's biggest cost.
bool all_finite(const float* p, std::size_t n) {
  return n == 0 || std::isfinite((Eigen::Map<const Eigen::ArrayXf>(p, static_cast<Eigen::Index>(n)) * 0.0f).sum());
}
bool all_finite(const Matrix& m) { return all_finite(m.data(), static_cast<std::size_t>(m.size())); }

// An arriving gradient is computed this many floats at a time (64 KiB): the
// gradient's piece stays in the cache between the finite check and the update.
constexpr std::size_t kArrivingBlockFloats = 16 << 10;

std::size_t distinct(const RowIds& ids) {
  // Workers send each shard's rows distinct and ascending: count without a copy.
  if (ascending_distinct(ids)) return ids.size();
  RowIds sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  return static_cast<std::size_t>(std::unique(sorted.begin(), sorted.end()) - sorted.begin());
}

}  // namespace

ParameterStore::ParameterStore(Options options) : options_(std::move(options)) {
  if (options_.name.empty()) options_.name = "ps";
}

std::string ParameterStore::shard_label(ShardId id) const {
  auto it = shards_.find(id);
  if (it == shards_.end()) return "shard id " + std::to_string(id);
  return "shard '" + it->second.spec.name + "' (id " + std::to_string(id) + ")";
}

// Prefixes the store's name, keeping the code: "ps:0: Push update 1 to shard ...".
Status ParameterStore::invalid(const std::string& what) {
  ++stats_.rejected_requests;
  return absl::InvalidArgumentError(options_.name + ": " + what);
}

bool ParameterStore::is_stale(const Fence& f) const {
  if (fence_.coordinator == 0) return false;
  return f.coordinator != fence_.coordinator || f.generation < fence_.generation;
}

Status ParameterStore::fenced(const char* request, const Fence& f) {
  return with_error_kind(absl::AbortedError(options_.name + " refused a " + request + " from " + fence_string(f) +
                                            ": it is fenced at " + fence_string(fence_) +
                                            " (updates of cancelled closures or of a previous coordinator are "
                                            "dropped)"),
                         ErrorKind::kFenced);
}

// ---------------------------------------------------------------- CreateShards

Status ParameterStore::create_shards(const CreateShardsRequest& request) {
  if (request.fence.coordinator != 0 && request.fence.coordinator == fence_.coordinator &&
      request.fence.generation < fence_.generation)
    return fenced("CreateShards", request.fence);

  const bool has_trainable = std::any_of(request.shards.begin(), request.shards.end(), [](const ShardState& s) {
    return s.spec.kind == VariableKind::kTrainable;
  });
  // A request without trainable shards (metrics only) leaves the optimizer alone.
  std::optional<Optimizer> optimizer = optimizer_;
  if (has_trainable && (!optimizer_ || !(optimizer_->config() == request.optimizer))) {
    auto created = Optimizer::create(request.optimizer);
    if (!created.ok()) return invalid("CreateShards: " + std::string(created.status().message()));
    // Shards with an optimizer of their own do not use the store's.
    const bool store_has_trainable = std::any_of(shards_.begin(), shards_.end(), [](const auto& kv) {
      return kv.second.spec.kind == VariableKind::kTrainable && !kv.second.own_optimizer;
    });
    if (optimizer_ && store_has_trainable) {
      if (!request.replace_existing)
        return absl::AlreadyExistsError(options_.name + " already applies " + describe(optimizer_->config()) +
                                        "; CreateShards asked for " + describe(request.optimizer) +
                                        " (set replace_existing to restore with another optimizer)");
      std::set<ShardId> replaced;
      for (const auto& s : request.shards) replaced.insert(s.spec.id);
      for (const auto& [id, shard] : shards_)
        if (shard.spec.kind == VariableKind::kTrainable && !shard.own_optimizer && !replaced.count(id) &&
            shard.slots.size() != created->slot_count())
          return absl::FailedPreconditionError(
              options_.name + ": CreateShards switches the optimizer to " + describe(request.optimizer) + ", but " +
              shard_label(id) + " is not in the request and keeps " + std::to_string(shard.slots.size()) +
              " slots where the new optimizer needs " + std::to_string(created->slot_count()));
    }
    optimizer = std::move(*created);
  }

  // Validate everything before changing anything.
  std::set<ShardId> ids;
  // The shards' own optimizers (request order), each created once per distinct config.
  std::vector<std::shared_ptr<const Optimizer>> own(request.shards.size());
  for (std::size_t i = 0; i < request.shards.size(); ++i) {
    const ShardState& s = request.shards[i];
    const ShardSpec& spec = s.spec;
    const std::string where = "CreateShards shard " + std::to_string(i) + " ('" + spec.name + "', id " +
                              std::to_string(spec.id) + "): ";
    if (!ids.insert(spec.id).second) return invalid(where + "the id appears twice in the request");
    if (spec.optimizer) {
      if (spec.kind != VariableKind::kTrainable) return invalid(where + "only a trainable shard has an optimizer");
      for (std::size_t j = 0; j < i && !own[i]; ++j)
        if (own[j] && own[j]->config() == *spec.optimizer) own[i] = own[j];
      if (!own[i]) {
        auto created = Optimizer::create(*spec.optimizer);
        if (!created.ok()) return invalid(where + std::string(created.status().message()));
        own[i] = std::make_shared<const Optimizer>(std::move(*created));
      }
    }
    const Optimizer* shard_optimizer = own[i] ? own[i].get() : optimizer ? &*optimizer : nullptr;
    if (spec.name.empty()) return invalid(where + "the name is empty");
    if (s.step < 0) return invalid(where + "step " + std::to_string(s.step) + " is negative");
    if (spec.kind == VariableKind::kCounter) {
      if (s.value.size() != 0 || !s.slots.empty()) return invalid(where + "a counter shard has no value or slots");
      if (spec.meta) return invalid(where + "a counter shard cannot be meta");
    } else if (spec.meta) {
      if (spec.rows < 1 || spec.cols < 1) return invalid(where + "shape " + dims(spec.rows, spec.cols) + " is empty");
      if (s.value.size() != 0 || !s.slots.empty()) return invalid(where + "a meta shard carries no value or slots");
    } else {
      if (spec.rows < 1 || spec.cols < 1) return invalid(where + "shape " + dims(spec.rows, spec.cols) + " is empty");
      if (s.value.rows() != spec.rows || s.value.cols() != spec.cols)
        return invalid(where + "value is " + dims(s.value) + " but the spec says " + dims(spec.rows, spec.cols));
      const std::size_t want = spec.kind == VariableKind::kTrainable ? shard_optimizer->slot_count() : 0;
      if (!s.slots.empty() && s.slots.size() != want)
        return invalid(where + "has " + std::to_string(s.slots.size()) + " optimizer slots; " +
                       (spec.kind == VariableKind::kTrainable ? shard_optimizer->name() + " needs "
                                                              : std::string("a non-trainable shard has ")) +
                       std::to_string(want));
      for (std::size_t k = 0; k < s.slots.size(); ++k)
        if (s.slots[k].rows() != spec.rows || s.slots[k].cols() != spec.cols)
          return invalid(where + "slot '" + shard_optimizer->slot_names()[k] + "' is " + dims(s.slots[k]) +
                         " but the shard is " + dims(spec.rows, spec.cols));
    }
    auto existing = shards_.find(spec.id);
    if (existing != shards_.end() && !request.replace_existing && !same_spec(existing->second.spec, spec)) {
      const ShardSpec& e = existing->second.spec;
      return absl::AlreadyExistsError(options_.name + ": " + where + "conflicts with the existing shard '" + e.name +
                                      "' (" + kind_name(e.kind) + ", " + dims(e.rows, e.cols) +
                                      "); set replace_existing to overwrite it");
    }
  }

  for (std::size_t i = 0; i < request.shards.size(); ++i) {
    const ShardState& s = request.shards[i];
    auto existing = shards_.find(s.spec.id);
    if (existing != shards_.end() && !request.replace_existing) continue;  // the same spec, resent
    Shard shard;
    shard.spec = s.spec;
    shard.own_optimizer = own[i];
    shard.step = s.step;
    shard.counter = s.counter;
    if (s.spec.kind != VariableKind::kCounter && !s.spec.meta) {
      shard.value = std::make_shared<Matrix>(s.value);
      if (s.spec.kind == VariableKind::kTrainable)
        shard.slots = s.slots.empty() ? (own[i] ? *own[i] : *optimizer).make_slots(s.spec.rows, s.spec.cols) : s.slots;
    }
    shard.revision = ++last_revision_;
    shards_[s.spec.id] = std::move(shard);
  }
  optimizer_ = std::move(optimizer);
  ++optimizer_epoch_;
  if (request.fence.coordinator != 0) return set_fence(request.fence);
  return absl::OkStatus();
}

// ---------------------------------------------------------------- Pull

Status ParameterStore::validate_pull(const PullRequest& request) {
  for (std::size_t i = 0; i < request.items.size(); ++i) {
    const PullItem& item = request.items[i];
    auto it = shards_.find(item.shard);
    // Built only on failure: this runs for every item of every request.
    auto where = [&] { return "Pull item " + std::to_string(i) + " of " + shard_label(item.shard) + ": "; };
    if (it == shards_.end()) return invalid("Pull item " + std::to_string(i) + ": unknown shard id " +
                                            std::to_string(item.shard));
    if (it->second.spec.kind == VariableKind::kCounter) {
      if (!item.all_rows) return invalid(where() + "a counter has no rows to select");
      continue;
    }
    if (!item.all_rows)
      if (Status s = check_rows(item.rows, it->second.spec.rows); !s.ok()) return invalid(where() + std::string(s.message()));
  }
  return absl::OkStatus();
}

StatusOr<PullResponse> ParameterStore::pull(const PullRequest& request) {
  TWINPS_RETURN_IF_ERROR(validate_pull(request));
  return read(request);
}

PullResponse ParameterStore::read(const PullRequest& request) {
  PullResponse response;
  response.items.reserve(request.items.size());
  for (const PullItem& item : request.items) {
    const Shard& shard = shards_.at(item.shard);
    PulledValue out;
    out.version = shard.step;
    if (shard.spec.kind == VariableKind::kCounter) {
      out.counter = shard.counter;
      stats_.bytes_pulled += sizeof(std::int64_t);
    } else if (shard.spec.meta) {
      // The shape the values would have; the bytes count as if they came.
      out.meta = MetaTensor{item.all_rows ? shard.spec.rows : static_cast<std::int64_t>(item.rows.size()),
                            shard.spec.cols};
      stats_.bytes_pulled += byte_size(*out.meta);
    } else if (item.all_rows && request.share_shard_memory) {
      out.shared = shard.value;  // written to the wire from the shard's memory, no copy
    } else if (item.all_rows) {
      out.values = *shard.value;
    } else {
      gather_rows(*shard.value, item.rows, out.values);
    }
    stats_.bytes_pulled += byte_size(out.tensor());
    response.items.push_back(std::move(out));
  }
  ++stats_.pull_requests;
  return response;
}

// ---------------------------------------------------------------- Push

Status ParameterStore::validate_update(std::size_t index, const Update& u, const ArrivingGradient* arrived) const {
  auto it = shards_.find(u.shard);
  if (it == shards_.end())
    return absl::InvalidArgumentError("Push update " + std::to_string(index) + ": unknown shard id " +
                                      std::to_string(u.shard));
  const Shard& shard = it->second;
  const ShardSpec& spec = shard.spec;
  // The prefix is built only on failure: this runs for every update of every push.
  auto fail = [&](const std::string& what) {
    return absl::InvalidArgumentError("Push update " + std::to_string(index) + " to " + shard_label(u.shard) + ": " +
                                      what);
  };

  const bool op_ok = spec.kind == VariableKind::kTrainable ||
                     (spec.kind == VariableKind::kAccumulator && u.op != Update::Op::kApplyGradient) ||
                     (spec.kind == VariableKind::kCounter && u.op == Update::Op::kAdd);
  if (!op_ok) return fail(std::string(op_name(u.op)) + " is not an update for a " + kind_name(spec.kind) + " shard");

  if (spec.kind == VariableKind::kCounter) {
    if (u.sparse || !u.rows.empty() || u.values.size() != 0)
      return fail("a counter takes counter_delta only, not rows or values");
    return absl::OkStatus();
  }

  // A meta shard's payload is a meta tensor, any other's real values; either
  // is then checked against the shard by its shape, the same way.
  if (spec.meta && (!u.meta || u.values.size() != 0))
    return fail("a meta shard takes a meta tensor (a shape), not values");
  if (!spec.meta && u.meta) return fail("a meta tensor is only for meta shards; this one holds values");
  const std::int64_t value_rows = u.meta ? u.meta->rows : u.values.rows();
  const std::int64_t value_cols = u.meta ? u.meta->cols : u.values.cols();
  const char* what = u.op == Update::Op::kApplyGradient ? "gradient" : "values";
  if (value_cols != spec.cols)
    return fail(std::string(what) + " has " + std::to_string(value_cols) + " columns, the shard " +
                std::to_string(spec.cols) + " (shard is " + dims(spec.rows, spec.cols) + ")");
  if (u.sparse) {
    if (static_cast<std::size_t>(value_rows) != u.rows.size())
      return fail(std::string(what) + " has " + std::to_string(value_rows) + " rows for " +
                  std::to_string(u.rows.size()) + " row ids");
    if (Status s = check_rows(u.rows, spec.rows); !s.ok()) return fail(std::string(s.message()));
  } else {
    if (!u.rows.empty()) return fail("a dense update carries row ids (set sparse)");
    if (value_rows != spec.rows)
      return fail(std::string(what) + " is " + dims(value_rows, value_cols) + ", the shard " + dims(spec.rows, spec.cols));
  }
  // An arriving computation checked these very bytes as they landed (and
  // would have been dropped at a NaN or Inf).
  if (!arrived && !all_finite(u.values)) return fail(std::string(what) + " contains NaN or Inf");
  return absl::OkStatus();
}

Matrix& ParameterStore::Shard::writable_value() {
  if (value.use_count() > 1) value = std::make_shared<Matrix>(*value);
  return *value;
}

void ParameterStore::apply_update(const Update& u, ArrivingGradient* arrived) {
  Shard& shard = shards_.at(u.shard);
  shard.revision = ++last_revision_;
  ++stats_.updates_applied;
  stats_.bytes_pushed += byte_size(u.values) + u.rows.size() * sizeof(std::int64_t);
  if (shard.spec.kind == VariableKind::kCounter) {
    shard.counter += u.counter_delta;
    stats_.bytes_pushed += sizeof(std::int64_t);
    stats_.rows_updated += 1;
    return;
  }
  stats_.rows_updated += u.sparse ? distinct(u.rows) : static_cast<std::size_t>(shard.spec.rows);
  if (shard.spec.meta) {
    // No values to compute with: a real update's effects besides them are
    // its counts (its bytes as if the values had come) and, for a gradient,
    // the shard's next version.
    stats_.bytes_pushed += byte_size(*u.meta);
    if (u.op == Update::Op::kApplyGradient) {
      ++shard.step;
      ++stats_.optimizer_steps;
    }
    return;
  }
  switch (u.op) {
    case Update::Op::kApplyGradient: {
      // Validated above, so the optimizer cannot refuse it.
      if (arrived) {
        // Computed as it arrived from this shard as it still is: take it.
        shard.value = std::move(arrived->next_value);
        for (std::size_t i = 0; i < shard.slots.size(); ++i) shard.slots[i].swap(arrived->next_slots[i]);
        drop(*arrived);
        shard.arrival_backoff = 0;
        ++stats_.updates_computed_on_arrival;
        ++shard.step;
        ++stats_.optimizer_steps;
        break;
      }
      const Optimizer& optimizer = shard.own_optimizer ? *shard.own_optimizer : *optimizer_;
      Matrix& value = shard.writable_value();
      Status s = u.sparse ? optimizer.apply_sparse(value, shard.slots, u.rows, u.values, shard.step)
                          : optimizer.apply_dense(value, shard.slots, u.values, shard.step);
      (void)s;
      ++shard.step;
      ++stats_.optimizer_steps;
      break;
    }
    case Update::Op::kAdd:
      if (!u.sparse) {
        shard.writable_value() += u.values;
      } else {
        Matrix& value = shard.writable_value();
        for (std::size_t i = 0; i < u.rows.size(); ++i)
          value.row(static_cast<Eigen::Index>(u.rows[i])) += u.values.row(static_cast<Eigen::Index>(i));
      }
      break;
    case Update::Op::kAssign:
      if (!u.sparse) {
        if (shard.value.use_count() > 1) {
          shard.value = std::make_shared<Matrix>(u.values);  // no need to copy what is replaced
        } else {
          *shard.value = u.values;
        }
      } else {
        Matrix& value = shard.writable_value();
        for (std::size_t i = 0; i < u.rows.size(); ++i)
          value.row(static_cast<Eigen::Index>(u.rows[i])) = u.values.row(static_cast<Eigen::Index>(i));
      }
      break;
  }
}

void ParameterStore::measure_staleness(const Update& u, StalenessHistogram& into) const {
  if (u.read_version == Update::kUnknownVersion) {
    ++into.unmeasured;
    return;
  }
  // Versions this shard moved on since the sender read it: the gradients
  // other workers got in first.
  into.record(shards_.at(u.shard).step - u.read_version);
}

void ParameterStore::remember(const DedupKey& key) {
  if (options_.dedup_window == 0) return;
  if (!seen_.insert(key).second) return;
  seen_order_.push_back(key);
  while (seen_order_.size() > options_.dedup_window) {
    seen_.erase(seen_order_.front());
    seen_order_.pop_front();
  }
}

StatusOr<PushResponse> ParameterStore::push(const PushRequest& request, RequestId request_id, const TaskId& caller,
                                            ArrivingPush* arrived) {
  if (request.sync_step < kNoSyncStep) return invalid("Push: sync step " + std::to_string(request.sync_step) + " is negative");
  if (is_stale(request.fence)) {
    ++stats_.fenced_pushes;
    return fenced("push", request.fence);
  }
  // A push may carry the reads of the caller's next step (ps-lite's
  // push-pull): they are checked with the updates, so a bad read refuses the
  // whole request, and served after the updates are applied.
  TWINPS_RETURN_IF_ERROR(validate_pull(request.then_pull));
  const DedupKey key{caller, request_id};
  // A split's push, whoever sends it (exactly-once visitation), within this
  // coordinator's run: another coordinator numbers its splits afresh.
  const DedupKey split{TaskId{}, request.split_key * 0x9e3779b97f4a7c15ull ^ request.fence.coordinator};
  PushResponse response;
  if ((request_id != 0 && seen_.count(key)) || (request.split_key != 0 && seen_.count(split))) {
    ++stats_.duplicates_dropped;
    response.duplicate = true;
  } else {
    for (std::size_t i = 0; i < request.updates.size(); ++i)
      if (Status s = validate_update(i, request.updates[i], usable(arrived, i, request.updates[i])); !s.ok())
        return invalid(std::string(s.message()));
    StalenessHistogram applied;  // of the gradients applied now (aggregated ones count when their step is)
    for (std::size_t i = 0; i < request.updates.size(); ++i) {
      const Update& u = request.updates[i];
      const bool gradient = u.op == Update::Op::kApplyGradient;
      if (gradient && request.sync_step != kNoSyncStep) {
        aggregate(request.sync_step, u, response.staleness);
        continue;
      }
      if (gradient) measure_staleness(u, applied);
      // Asked again: an earlier update of this request may have moved the shard.
      apply_update(u, usable(arrived, i, u));
    }
    response.staleness.merge(applied);
    stats_.staleness.merge(applied);
    ++stats_.push_requests;
    if (request_id != 0) remember(key);
    if (request.split_key != 0) remember(split);
  }
  if (!request.then_pull.items.empty()) response.pulled = read(request.then_pull);
  return response;
}

// ---------------------------------------------------------------- Arriving pushes

std::shared_ptr<ParameterStore::ArrivingPush> ParameterStore::begin_arriving_push(const PushRequest& request,
                                                                                 RequestId request_id,
                                                                                 const TaskId& caller) {
  if (request.sync_step != kNoSyncStep || is_stale(request.fence)) return nullptr;
  if (request_id != 0 && seen_.count(DedupKey{caller, request_id})) return nullptr;
  std::vector<ArrivingGradient> gradients;
  for (std::size_t i = 0; i < request.updates.size(); ++i) {
    const Update& u = request.updates[i];
    if (u.op != Update::Op::kApplyGradient || u.sparse || u.meta ||
        static_cast<std::size_t>(u.values.size()) < kArrivingMinFloats)
      continue;
    auto it = shards_.find(u.shard);
    if (it == shards_.end()) continue;
    Shard& shard = it->second;
    if (shard.arrivals_to_skip > 0) {
      --shard.arrivals_to_skip;
      continue;
    }
    if (shard.spec.kind != VariableKind::kTrainable || shard.spec.meta || shard.arriving ||
        u.values.rows() != shard.spec.rows || u.values.cols() != shard.spec.cols ||
        !(shard.own_optimizer || optimizer_))
      continue;
    ArrivingGradient g;
    g.update = i;
    g.shard = u.shard;
    g.revision = shard.revision;
    g.optimizer_epoch = optimizer_epoch_;
    g.grad = u.values.data();
    g.floats = static_cast<std::size_t>(u.values.size());
    // Uninitialised: every float is written before it is read.
    g.next_value = std::make_shared<Matrix>(shard.spec.rows, shard.spec.cols);
    g.next_slots.reserve(shard.slots.size());
    for (std::size_t k = 0; k < shard.slots.size(); ++k) g.next_slots.emplace_back(shard.spec.rows, shard.spec.cols);
    gradients.push_back(std::move(g));
  }
  if (gradients.empty()) return nullptr;
  auto arriving = std::make_shared<ArrivingPush>(*this, std::move(gradients));
  for (ArrivingGradient& g : arriving->gradients_) shards_.at(g.shard).arriving = &g;
  return arriving;
}

ParameterStore::ArrivingGradient* ParameterStore::usable(ArrivingPush* arrived, std::size_t index, const Update& u) {
  // Another store's (a node that served this connection before a restart):
  // its revisions mean nothing here.
  if (!arrived || arrived->alive_.lock() != alive_) return nullptr;
  for (ArrivingGradient& g : arrived->gradients_) {
    if (g.update != index) continue;
    if (g.dropped) return nullptr;
    auto it = shards_.find(g.shard);
    if (it == shards_.end() || it->second.revision != g.revision || g.optimizer_epoch != optimizer_epoch_) {
      overtaken(g);
      return nullptr;
    }
    const bool complete = g.done == g.floats && g.grad == u.values.data() &&
                          g.floats == static_cast<std::size_t>(u.values.size()) && g.shard == u.shard;
    return complete ? &g : nullptr;
  }
  return nullptr;
}

void ParameterStore::advance(ArrivingGradient& g) {
  auto it = shards_.find(g.shard);
  if (it == shards_.end() || it->second.revision != g.revision || g.optimizer_epoch != optimizer_epoch_)
    return overtaken(g);  // push() applies it as usual
  const Shard& shard = it->second;
  const Optimizer& optimizer = shard.own_optimizer ? *shard.own_optimizer : *optimizer_;
  const std::size_t ready = g.bytes_in / sizeof(float);
  std::vector<const float*> slots(shard.slots.size());
  std::vector<float*> next_slots(shard.slots.size());
  while (g.done < ready) {
    const std::size_t at = g.done, n = std::min(ready - at, kArrivingBlockFloats);
    if (!all_finite(g.grad + at, n)) return drop(g);  // push() refuses it, checking it again
    for (std::size_t i = 0; i < slots.size(); ++i) {
      slots[i] = shard.slots[i].data() + at;
      next_slots[i] = g.next_slots[i].data() + at;
    }
    optimizer.apply_dense_span(shard.value->data() + at, slots, g.grad + at, n, shard.step, g.next_value->data() + at,
                               next_slots);
    g.done += n;
  }
}

void ParameterStore::overtaken(ArrivingGradient& g) {
  drop(g);
  ++stats_.arrivals_overtaken;
  if (auto it = shards_.find(g.shard); it != shards_.end()) {
    Shard& shard = it->second;
    shard.arrival_backoff = std::min(2 * shard.arrival_backoff + 1, kMaxArrivalBackoff);
    shard.arrivals_to_skip = shard.arrival_backoff;
  }
}

void ParameterStore::drop(ArrivingGradient& g) {
  g.dropped = true;
  g.next_value.reset();
  g.next_slots.clear();
  if (auto it = shards_.find(g.shard); it != shards_.end() && it->second.arriving == &g) it->second.arriving = nullptr;
}

ParameterStore::ArrivingPush::ArrivingPush(ParameterStore& store, std::vector<ArrivingGradient> gradients)
    : store_(store), alive_(store.alive_), gradients_(std::move(gradients)) {}

ParameterStore::ArrivingPush::~ArrivingPush() {
  if (alive_.expired()) return;
  for (ArrivingGradient& g : gradients_)
    if (!g.dropped) store_.drop(g);
}

void ParameterStore::ArrivingPush::arrived(const char* at, std::size_t bytes) {
  if (alive_.expired()) return;
  const auto where = reinterpret_cast<std::uintptr_t>(at);
  for (ArrivingGradient& g : gradients_) {
    const auto begin = reinterpret_cast<std::uintptr_t>(g.grad);
    const std::size_t size = g.floats * sizeof(float);
    if (where < begin || where >= begin + size) continue;
    if (g.dropped) return;
    if (where != begin + g.bytes_in) return store_.drop(g);  // not front to back: nothing to gain
    g.bytes_in += std::min(bytes, size - g.bytes_in);
    return store_.advance(g);
  }
}

std::size_t ParameterStore::ArrivingPush::computed() const {
  return static_cast<std::size_t>(
      std::count_if(gradients_.begin(), gradients_.end(), [](const ArrivingGradient& g) { return !g.dropped && g.done == g.floats; }));
}

// ---------------------------------------------------------------- Sync steps

void ParameterStore::aggregate(std::int64_t step, const Update& u, StalenessHistogram& into) {
  if (step <= sync_applied_step_) {
    // The step was applied without this gradient (a straggler's, or one a
    // backup worker made unnecessary): dropped, never applied late.
    ++into.dropped;
    ++stats_.staleness.dropped;
    return;
  }
  const Shard& shard = shards_.at(u.shard);
  SyncAggregate& a = sync_pending_[step][u.shard];
  // Measured now, when it counts: nothing moves the shard before the step is
  // applied, so this is the staleness it is applied with.
  measure_staleness(u, into);
  measure_staleness(u, a.staleness);
  ++a.contributions;
  a.dense = a.dense || !u.sparse;
  if (u.sparse) a.rows.insert(u.rows.begin(), u.rows.end());
  if (shard.spec.meta) return;  // which rows it touches is all there is to add up
  if (a.sum.size() == 0) a.sum = Matrix::Zero(shard.spec.rows, shard.spec.cols);
  if (!u.sparse) {
    a.sum += u.values;
    return;
  }
  for (std::size_t i = 0; i < u.rows.size(); ++i)
    a.sum.row(static_cast<Eigen::Index>(u.rows[i])) += u.values.row(static_cast<Eigen::Index>(i));
}

void ParameterStore::apply_aggregate(ShardId id, SyncAggregate& a) {
  if (!shards_.count(id) || a.contributions == 0) return;  // replaced by a restore meanwhile
  const Shard& shard = shards_.at(id);
  Update mean;
  mean.shard = id;
  mean.op = Update::Op::kApplyGradient;
  mean.sparse = !a.dense;
  const float scale = 1.0f / static_cast<float>(a.contributions);
  if (!a.dense) mean.rows.assign(a.rows.begin(), a.rows.end());
  if (shard.spec.meta) {
    mean.meta = MetaTensor{a.dense ? shard.spec.rows : static_cast<std::int64_t>(mean.rows.size()), shard.spec.cols};
  } else if (a.dense) {
    mean.values = a.sum * scale;
  } else {
    mean.values.resize(static_cast<Eigen::Index>(mean.rows.size()), a.sum.cols());
    for (std::size_t r = 0; r < mean.rows.size(); ++r)
      mean.values.row(static_cast<Eigen::Index>(r)) = a.sum.row(static_cast<Eigen::Index>(mean.rows[r])) * scale;
  }
  apply_update(mean);
  stats_.staleness.merge(a.staleness);
}

Status ParameterStore::apply_sync_step(const ApplySyncStepRequest& request) {
  if (request.step < 0) return invalid("ApplySyncStep: step " + std::to_string(request.step) + " is negative");
  if (is_stale(request.fence)) {
    ++stats_.fenced_pushes;
    return fenced("ApplySyncStep", request.fence);
  }
  while (!sync_pending_.empty() && sync_pending_.begin()->first <= request.step) {
    for (auto& [shard, aggregate] : sync_pending_.begin()->second) apply_aggregate(shard, aggregate);
    sync_pending_.erase(sync_pending_.begin());
  }
  sync_applied_step_ = std::max(sync_applied_step_, request.step);
  return absl::OkStatus();
}

// ---------------------------------------------------------------- Export, Fence

StatusOr<ExportShardsResponse> ParameterStore::export_shards(const ExportShardsRequest& request) const {
  std::vector<ShardId> ids = request.shards;
  if (ids.empty())
    for (const auto& [id, shard] : shards_) ids.push_back(id);
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (!shards_.count(ids[i]))
      return absl::InvalidArgumentError(options_.name + ": ExportShards item " + std::to_string(i) +
                                        ": unknown shard id " + std::to_string(ids[i]));
  ExportShardsResponse response;
  response.shards.reserve(ids.size());
  for (ShardId id : ids) {
    const Shard& shard = shards_.at(id);
    response.shards.push_back(ShardState{shard.spec, *shard.value, shard.slots, shard.step, shard.counter});
  }
  return response;
}

Status ParameterStore::set_fence(const Fence& fence) {
  if (fence.coordinator == 0)
    return invalid("Fence: coordinator incarnation 0 is reserved for \"not fenced\"");
  if (fence.coordinator == fence_.coordinator) {
    fence_.generation = std::max(fence_.generation, fence.generation);
  } else {
    fence_ = fence;
    // Another coordinator counts its sync steps from 0: the old one's are forgotten.
    sync_pending_.clear();
    sync_applied_step_ = -1;
  }
  return absl::OkStatus();
}

}  // namespace twinps
