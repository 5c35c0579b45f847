#include "core/worker/parameter_client.h"

#include <algorithm>
#include <functional>
#include <map>

#include "core/runtime/modelled_work.h"
#include "core/variables/sharded_variable.h"

namespace twinps {
namespace {

// A read of a meta variable: every shard answers a meta tensor, and the
// result is the shape the values would have, [rows x cols] (`rows`: the
// variable's for a dense read, the ids' for a lookup). nullopt when the
// shards sent values.
StatusOr<std::optional<MetaTensor>> meta_of_read(const VariableLayout& v, std::int64_t rows,
                                                 const std::vector<PulledValue*>& answers) {
  std::size_t metas = 0;
  for (const PulledValue* a : answers) metas += a->meta ? 1 : 0;
  if (metas == 0) return std::optional<MetaTensor>();
  if (metas != answers.size())
    return absl::InternalError("variable \"" + v.name + "\": some shards answered values, others meta tensors");
  return std::optional<MetaTensor>(MetaTensor{rows, v.cols()});
}

}  // namespace

// ---------------------------------------------------------------- batches

int ParameterClient::PullBatch::dense(const VariableLayout& v) {
  reads_.push_back(Read{&v, Read::Kind::kDense, {}});
  return static_cast<int>(reads_.size() - 1);
}

int ParameterClient::PullBatch::rows(const VariableLayout& v, std::span<const std::int64_t> ids) {
  reads_.push_back(Read{&v, Read::Kind::kRows, {ids.begin(), ids.end()}});
  return static_cast<int>(reads_.size() - 1);
}

int ParameterClient::PullBatch::counter(const VariableLayout& v) {
  reads_.push_back(Read{&v, Read::Kind::kCounter, {}});
  return static_cast<int>(reads_.size() - 1);
}

void ParameterClient::PushBatch::gradient(const VariableLayout& v, Matrix grad) {
  writes_.push_back(Write{&v, Update::Op::kApplyGradient, false, {}, std::move(grad), 0});
}
void ParameterClient::PushBatch::gradient(const VariableLayout& v, MetaTensor grad) {
  writes_.push_back(Write{&v, Update::Op::kApplyGradient, false, {}, Matrix(), 0, grad});
}
void ParameterClient::PushBatch::gradient_rows(const VariableLayout& v, RowIds ids, Matrix grad_rows) {
  writes_.push_back(Write{&v, Update::Op::kApplyGradient, true, std::move(ids), std::move(grad_rows), 0});
}
void ParameterClient::PushBatch::gradient_rows(const VariableLayout& v, RowIds ids, MetaTensor grad_rows) {
  writes_.push_back(Write{&v, Update::Op::kApplyGradient, true, std::move(ids), Matrix(), 0, grad_rows});
}
void ParameterClient::PushBatch::add(const VariableLayout& v, Matrix delta) {
  writes_.push_back(Write{&v, Update::Op::kAdd, false, {}, std::move(delta), 0});
}
void ParameterClient::PushBatch::add_rows(const VariableLayout& v, RowIds ids, Matrix delta_rows) {
  writes_.push_back(Write{&v, Update::Op::kAdd, true, std::move(ids), std::move(delta_rows), 0});
}
void ParameterClient::PushBatch::assign(const VariableLayout& v, Matrix new_value) {
  writes_.push_back(Write{&v, Update::Op::kAssign, false, {}, std::move(new_value), 0});
}
void ParameterClient::PushBatch::add_counter(const VariableLayout& v, std::int64_t delta) {
  writes_.push_back(Write{&v, Update::Op::kAdd, false, {}, Matrix(), delta});
}

namespace {
double dense_bytes(const VariableLayout& v) {
  return static_cast<double>(v.rows()) * static_cast<double>(v.cols()) * sizeof(Matrix::Scalar);
}
}  // namespace

// A meta variable's copies count too: the simulator stands in for a run
// with real values, which makes them.
double ParameterClient::assembled_bytes(const PullBatch& batch) {
  double bytes = 0;
  for (const auto& read : batch.reads_)
    if (read.kind == PullBatch::Read::Kind::kDense && read.var->shards.size() > 1) bytes += dense_bytes(*read.var);
  return bytes;
}

double ParameterClient::split_bytes(const PushBatch& batch) {
  double bytes = 0;
  for (const auto& w : batch.writes_)
    if (!w.sparse && w.var->kind != VariableKind::kCounter && w.var->shards.size() > 1) bytes += dense_bytes(*w.var);
  return bytes;
}

Task<void> ParameterClient::spend_on_copies(double bytes) {
  if (bytes <= 0 || !runtime_.cost) co_return;
  co_await spend_modelled(runtime_, runtime_.cost->copy(runtime_.self, bytes));
}

CallOptions ParameterClient::call_options(RequestId id) const {
  CallOptions opts;
  opts.deadline = add_saturating(runtime_.executor.now(), rpc_timeout_);
  opts.cancel = cancel_;
  opts.request_id = id;
  return opts;
}

RequestId ParameterClient::next_request_id() {
  // Unique across tasks and restarts: the incarnation is random per start.
  return runtime_.incarnation * 0x9e3779b97f4a7c15ull + (++request_counter_);
}

// Where each read's pieces come from: `where[r][k]` is the (ps, item) that
// answers piece k of read r (a shard, or one gather of a lookup).
struct ParameterClient::ReadPlan {
  struct Where {
    int ps;
    std::size_t item;
  };
  std::map<int, PullRequest> per_ps;
  // The shard of each item asked of a ps, kept apart because the requests
  // are moved into the calls.
  std::map<int, std::vector<ShardId>> asked;
  std::vector<std::vector<Where>> where;
  std::vector<LookupPlan> lookups;
};

StatusOr<ParameterClient::ReadPlan> ParameterClient::plan_reads(const PullBatch& batch) {
  ReadPlan plan;
  plan.where.resize(batch.reads_.size());
  plan.lookups.resize(batch.reads_.size());
  auto add_item = [&](std::size_t r, int ps, PullItem item) {
    plan.where[r].push_back(ReadPlan::Where{ps, plan.per_ps[ps].items.size()});
    plan.asked[ps].push_back(item.shard);
    plan.per_ps[ps].items.push_back(std::move(item));
  };
  for (std::size_t r = 0; r < batch.reads_.size(); ++r) {
    const auto& read = batch.reads_[r];
    const VariableLayout& v = *read.var;
    if (read.kind == PullBatch::Read::Kind::kRows) {
      auto lookup = plan_lookup(v, read.ids);
      if (!lookup.ok()) return lookup.status();
      for (auto& g : lookup->gathers)  // assemble() needs only the sources, so the rows move
        add_item(r, v.shards[g.shard].ps, PullItem{v.shards[g.shard].id, false, std::move(g.local_rows)});
      plan.lookups[r] = std::move(*lookup);
    } else {
      for (const auto& shard : v.shards) add_item(r, shard.ps, PullItem{shard.id, true, {}});
    }
  }
  return plan;
}

StatusOr<ParameterClient::PullResult> ParameterClient::assemble_reads(const PullBatch& batch, ReadPlan& plan,
                                                                      std::map<int, PullResponse>& replies) {
  for (auto& [ps, reply] : replies) {
    const auto& asked = plan.asked[ps];
    if (reply.items.size() != asked.size())
      return absl::InternalError("ps:" + std::to_string(ps) + " answered a different number of items");
    for (std::size_t i = 0; i < reply.items.size(); ++i) {
      const auto& item = reply.items[i];
      bytes_pulled_ += byte_size(item.values) + (item.meta ? byte_size(*item.meta) : 0);
      read_versions_[{ps, asked[i]}] = item.version;
    }
  }
  PullResult result;
  result.values_.resize(batch.reads_.size());
  result.counters_.resize(batch.reads_.size());
  result.metas_.resize(batch.reads_.size());
  for (std::size_t r = 0; r < batch.reads_.size(); ++r) {
    const auto& read = batch.reads_[r];
    const auto& where = plan.where[r];
    std::vector<PulledValue*> answers;
    answers.reserve(where.size());
    for (const auto& w : where) answers.push_back(&replies.at(w.ps).items[w.item]);
    if (read.kind != PullBatch::Read::Kind::kCounter) {
      const bool lookup = read.kind == PullBatch::Read::Kind::kRows;
      auto meta = meta_of_read(*read.var, lookup ? static_cast<std::int64_t>(read.ids.size()) : read.var->rows(), answers);
      if (!meta.ok()) return meta.status();
      if (*meta) {
        result.metas_[r] = *meta;  // no values came, only their shape
        continue;
      }
    }
    std::vector<Matrix> pieces;
    pieces.reserve(answers.size());
    for (PulledValue* a : answers) pieces.push_back(std::move(a->values));
    switch (read.kind) {
      case PullBatch::Read::Kind::kCounter:
        result.counters_[r] = replies.at(where.front().ps).items[where.front().item].counter;
        break;
      case PullBatch::Read::Kind::kDense: {
        auto full = concat_shards(*read.var, std::move(pieces));
        if (!full.ok()) return full.status();
        result.values_[r] = std::move(*full);
        break;
      }
      case PullBatch::Read::Kind::kRows: {
        auto rows = assemble(plan.lookups[r], pieces);
        if (!rows.ok()) return rows.status();
        result.values_[r] = std::move(*rows);
        break;
      }
    }
  }
  return result;
}

StatusOr<std::map<int, PushRequest>> ParameterClient::plan_writes(PushBatch& batch) {
  std::map<int, PushRequest> per_ps;
  auto add = [&](const ShardPlacement& shard, Update u) {
    u.shard = shard.id;
    if (u.op == Update::Op::kApplyGradient) {
      // The gradient was computed from this closure's last read of the shard.
      auto read = read_versions_.find({shard.ps, shard.id});
      if (read != read_versions_.end()) u.read_version = read->second;
    }
    per_ps[shard.ps].updates.push_back(std::move(u));
  };
  for (auto& w : batch.writes_) {
    const VariableLayout& v = *w.var;
    if (v.kind == VariableKind::kCounter) {
      Update u;
      u.op = Update::Op::kAdd;
      u.counter_delta = w.counter_delta;
      add(v.shards.front(), std::move(u));
    } else if (w.meta) {
      TWINPS_RETURN_IF_ERROR(plan_meta_write(w, add));
    } else if (w.sparse) {
      auto split = split_sparse(v, w.ids, w.values);
      if (!split.ok()) return split.status();
      for (auto& piece : *split) {
        Update u;
        u.op = w.op;
        u.sparse = true;
        u.rows = std::move(piece.update.rows);
        u.values = std::move(piece.update.values);
        add(v.shards[piece.shard], std::move(u));
      }
    } else {
      auto split = split_dense(v, std::move(w.values));
      if (!split.ok()) return split.status();
      for (std::size_t i = 0; i < split->size(); ++i) {
        Update u;
        u.op = w.op;
        u.values = std::move((*split)[i]);
        add(v.shards[i], std::move(u));
      }
    }
  }
  for (auto& [ps, req] : per_ps) req.fence = fence_;
  return per_ps;
}

// A meta variable's write: cut as real values would be (a shard's distinct
// rows for a sparse one, its row block for a dense one), each piece a meta
// tensor of the piece's shape.
Status ParameterClient::plan_meta_write(const PushBatch::Write& w,
                                        const std::function<void(const ShardPlacement&, Update)>& add) {
  const VariableLayout& v = *w.var;
  const std::int64_t rows = w.sparse ? static_cast<std::int64_t>(w.ids.size()) : v.rows();
  if (w.meta->rows != rows || w.meta->cols != v.cols())
    return absl::InvalidArgumentError("variable \"" + v.name + "\": a meta tensor of " + std::to_string(w.meta->rows) +
                                      "x" + std::to_string(w.meta->cols) + " for " +
                                      (w.sparse ? std::to_string(rows) + " row ids of " : std::string("")) +
                                      std::to_string(v.rows()) + "x" + std::to_string(v.cols()));
  auto piece = [&](const ShardPlacement& shard, RowIds local_rows, std::int64_t piece_rows) {
    Update u;
    u.op = w.op;
    u.sparse = w.sparse;
    u.rows = std::move(local_rows);
    u.meta = MetaTensor{piece_rows, v.cols()};
    add(shard, std::move(u));
  };
  if (!w.sparse) {
    for (const auto& shard : v.shards) piece(shard, {}, shard.rows);
    return absl::OkStatus();
  }
  // Each shard's distinct rows, as split_sparse cuts real values.
  auto gathers = shard_gathers(v, w.ids);
  if (!gathers.ok()) return gathers.status();
  for (auto& g : *gathers) {
    const auto n = static_cast<std::int64_t>(g.local_rows.size());
    piece(v.shards[g.shard], std::move(g.local_rows), n);
  }
  return absl::OkStatus();
}

Task<StatusOr<ParameterClient::PullResult>> ParameterClient::pull(const PullBatch& batch) {
  auto plan = plan_reads(batch);
  if (!plan.ok()) co_return plan.status();
  std::map<int, Future<StatusOr<Response>>> answers;
  for (auto& [ps, req] : plan->per_ps)
    answers.emplace(ps,
                    call_async(runtime_.executor, runtime_.transport, TaskId::ps(ps), std::move(req), call_options()));
  std::map<int, PullResponse> replies;
  Status first_error;
  for (auto& [ps, fut] : answers) {
    auto r = response_as<PullResponse>(co_await fut);
    if (r.ok()) replies.emplace(ps, std::move(*r));
    else if (first_error.ok()) first_error = r.status();
  }
  if (!first_error.ok()) co_return first_error;
  if (runtime_.cost) co_await spend_on_copies(assembled_bytes(batch));  // no frame in real mode
  co_return assemble_reads(batch, *plan, replies);
}

Task<Status> ParameterClient::push(PushBatch batch) {
  auto result = co_await push_pull(std::move(batch), PullBatch{});
  co_return result.status();
}

Task<StatusOr<ParameterClient::PullResult>> ParameterClient::push_pull(PushBatch push_batch,
                                                                       const PullBatch& pull_batch) {
  const double split = runtime_.cost ? split_bytes(push_batch) : 0;
  auto writes = plan_writes(push_batch);
  if (!writes.ok()) co_return writes.status();
  if (split > 0) co_await spend_on_copies(split);
  auto reads = plan_reads(pull_batch);
  if (!reads.ok()) co_return reads.status();
  // One Push per ps touched by either: the ps applies the updates, then serves
  // the reads, so a step's pull rides on the previous step's push.
  for (auto& [ps, req] : reads->per_ps) (*writes)[ps].then_pull = std::move(req);
  std::map<int, Future<StatusOr<Response>>> answers;
  // The split's n-th push has the same key in every run of the closure.
  const std::uint64_t split_key = split_key_ == 0 ? 0 : split_key_ * 0x9e3779b97f4a7c15ull + (++split_pushes_);
  for (auto& [ps, req] : *writes) {
    req.fence = fence_;
    req.sync_step = sync_step_;
    req.split_key = split_key;
    for (const auto& u : req.updates) bytes_pushed_ += byte_size(u.values) + (u.meta ? byte_size(*u.meta) : 0);
    answers.emplace(ps, call_async(runtime_.executor, runtime_.transport, TaskId::ps(ps), std::move(req),
                                   call_options(next_request_id())));
  }
  std::map<int, PullResponse> replies;
  Status first_error;
  for (auto& [ps, fut] : answers) {
    auto r = response_as<PushResponse>(co_await fut);
    if (!r.ok()) {
      if (first_error.ok()) first_error = r.status();
      continue;
    }
    staleness_.merge(r->staleness);
    if (reads->asked.count(ps)) replies.emplace(ps, std::move(r->pulled));
  }
  if (!first_error.ok()) co_return first_error;
  if (runtime_.cost) co_await spend_on_copies(assembled_bytes(pull_batch));
  co_return assemble_reads(pull_batch, *reads, replies);
}

}  // namespace twinps
