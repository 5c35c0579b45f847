#include "core/worker/parameter_client.h"

#include <algorithm>
#include <map>

namespace twinps {

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
void ParameterClient::PushBatch::gradient_rows(const VariableLayout& v, RowIds ids, Matrix grad_rows) {
  writes_.push_back(Write{&v, Update::Op::kApplyGradient, true, std::move(ids), std::move(grad_rows), 0});
}
void ParameterClient::PushBatch::add(const VariableLayout& v, Matrix delta) {
  writes_.push_back(Write{&v, Update::Op::kAdd, false, {}, std::move(delta), 0});
}
void ParameterClient::PushBatch::assign(const VariableLayout& v, Matrix new_value) {
  writes_.push_back(Write{&v, Update::Op::kAssign, false, {}, std::move(new_value), 0});
}
void ParameterClient::PushBatch::add_counter(const VariableLayout& v, std::int64_t delta) {
  writes_.push_back(Write{&v, Update::Op::kAdd, false, {}, Matrix(), delta});
}

// ---------------------------------------------------------------- routing

namespace {

// Index of the shard holding global row `g` (shards are contiguous, in row order).
StatusOr<std::size_t> shard_of_row(const VariableLayout& v, std::int64_t g) {
  if (g < 0 || g >= v.rows())
    return absl::InvalidArgumentError("row id " + std::to_string(g) + " is out of range for \"" + v.name + "\" with " +
                                      std::to_string(v.rows()) + " rows");
  auto it = std::upper_bound(v.shards.begin(), v.shards.end(), g,
                             [](std::int64_t row, const ShardPlacement& s) { return row < s.row_offset; });
  return static_cast<std::size_t>(it - v.shards.begin()) - 1;
}

Status check_full_shape(const VariableLayout& v, const Matrix& m) {
  if (m.rows() != v.rows() || m.cols() != v.cols())
    return absl::InvalidArgumentError("value for \"" + v.name + "\" is " + std::to_string(m.rows()) + "x" +
                                      std::to_string(m.cols()) + ", the variable is " + std::to_string(v.rows()) +
                                      "x" + std::to_string(v.cols()));
  return absl::OkStatus();
}

}  // namespace

CallOptions ParameterClient::call_options(RequestId id) const {
  CallOptions opts;
  opts.deadline = add_saturating(runtime_.executor.now(), rpc_timeout_);
  opts.cancel = cancel_;
  opts.request_id = id;
  return opts;
}

RequestId ParameterClient::next_request_id() {
  // Unique across tasks and restarts: the incarnation is random per start.
  return runtime_.incarnation * 0x9e3779b97f4a7c15ull + (++request_seq_);
}

Task<StatusOr<ParameterClient::PullResult>> ParameterClient::pull(const PullBatch& batch) {
  // Where each read's pieces come from: (ps, item index in that ps's request).
  struct Piece {
    int ps;
    std::size_t item;
    std::size_t shard_index;
  };
  std::map<int, PullRequest> per_ps;
  std::vector<std::vector<Piece>> pieces(batch.reads_.size());
  // For row reads: per id, which piece and which row of it.
  std::vector<std::vector<std::pair<std::size_t, Eigen::Index>>> id_sources(batch.reads_.size());

  for (std::size_t r = 0; r < batch.reads_.size(); ++r) {
    const auto& read = batch.reads_[r];
    const VariableLayout& v = *read.var;
    if (read.kind == PullBatch::Read::Kind::kRows) {
      // One gather per shard touched, of the unique rows it holds.
      std::map<std::size_t, std::map<std::int64_t, Eigen::Index>> rows_by_shard;  // shard -> local row -> position
      std::vector<std::pair<std::size_t, std::int64_t>> located;
      located.reserve(read.ids.size());
      for (std::int64_t id : read.ids) {
        auto s = shard_of_row(v, id);
        if (!s.ok()) co_return s.status();
        const std::int64_t local = id - v.shards[*s].row_offset;
        auto& rows = rows_by_shard[*s];
        rows.emplace(local, 0);
        located.emplace_back(*s, local);
      }
      std::map<std::size_t, std::size_t> piece_of_shard;
      for (auto& [s, rows] : rows_by_shard) {
        PullItem item{v.shards[s].id, false, {}};
        Eigen::Index pos = 0;
        for (auto& [local, p] : rows) {
          item.rows.push_back(local);
          p = pos++;
        }
        const int ps = v.shards[s].ps;
        piece_of_shard[s] = pieces[r].size();
        pieces[r].push_back(Piece{ps, per_ps[ps].items.size(), s});
        per_ps[ps].items.push_back(std::move(item));
      }
      for (auto& [s, local] : located)
        id_sources[r].emplace_back(piece_of_shard[s], rows_by_shard[s][local]);
    } else {
      for (std::size_t s = 0; s < v.shards.size(); ++s) {
        const int ps = v.shards[s].ps;
        pieces[r].push_back(Piece{ps, per_ps[ps].items.size(), s});
        per_ps[ps].items.push_back(PullItem{v.shards[s].id, true, {}});
      }
    }
  }

  std::map<int, Future<StatusOr<Response>>> answers;
  for (auto& [ps, req] : per_ps)
    answers.emplace(ps, call_async(runtime_.executor, runtime_.transport, TaskId::ps(ps), std::move(req), call_options()));
  std::map<int, PullResponse> replies;
  Status first_error;
  for (auto& [ps, fut] : answers) {
    auto r = response_as<PullResponse>(co_await fut);
    if (!r.ok()) {
      if (first_error.ok()) first_error = r.status();
      continue;
    }
    for (const auto& item : r->items) bytes_pulled_ += byte_size(item.values);
    replies.emplace(ps, std::move(*r));
  }
  if (!first_error.ok()) co_return first_error;

  PullResult result;
  result.values_.resize(batch.reads_.size());
  result.counters_.resize(batch.reads_.size());
  for (std::size_t r = 0; r < batch.reads_.size(); ++r) {
    const auto& read = batch.reads_[r];
    const VariableLayout& v = *read.var;
    auto piece_values = [&](const Piece& p) -> StatusOr<const PulledValue*> {
      const auto& items = replies.at(p.ps).items;
      if (p.item >= items.size()) return absl::InternalError("ps:" + std::to_string(p.ps) + " answered too few items");
      return &items[p.item];
    };
    switch (read.kind) {
      case PullBatch::Read::Kind::kCounter: {
        auto pv = piece_values(pieces[r].front());
        if (!pv.ok()) co_return pv.status();
        result.counters_[r] = (*pv)->counter;
        break;
      }
      case PullBatch::Read::Kind::kDense: {
        Matrix full(v.rows(), v.cols());
        for (const Piece& p : pieces[r]) {
          auto pv = piece_values(p);
          if (!pv.ok()) co_return pv.status();
          const ShardPlacement& shard = v.shards[p.shard_index];
          if ((*pv)->values.rows() != shard.rows || (*pv)->values.cols() != v.cols())
            co_return absl::InternalError("ps:" + std::to_string(p.ps) + " returned a wrongly shaped shard of \"" +
                                          v.name + "\"");
          full.middleRows(shard.row_offset, shard.rows) = (*pv)->values;
        }
        result.values_[r] = std::move(full);
        break;
      }
      case PullBatch::Read::Kind::kRows: {
        Matrix out(static_cast<Eigen::Index>(read.ids.size()), v.cols());
        for (std::size_t i = 0; i < read.ids.size(); ++i) {
          auto [piece, row] = id_sources[r][i];
          auto pv = piece_values(pieces[r][piece]);
          if (!pv.ok()) co_return pv.status();
          if (row >= (*pv)->values.rows()) co_return absl::InternalError("a ps returned too few rows");
          out.row(static_cast<Eigen::Index>(i)) = (*pv)->values.row(row);
        }
        result.values_[r] = std::move(out);
        break;
      }
    }
  }
  co_return result;
}

Task<Status> ParameterClient::push(const PushBatch& batch) {
  std::map<int, PushRequest> per_ps;
  for (const auto& w : batch.writes_) {
    const VariableLayout& v = *w.var;
    if (v.kind == VariableKind::kCounter) {
      Update u;
      u.shard = v.shards.front().id;
      u.op = Update::Op::kAdd;
      u.counter_delta = w.counter_delta;
      per_ps[v.shards.front().ps].updates.push_back(std::move(u));
      continue;
    }
    if (w.sparse) {
      if (w.values.rows() != static_cast<Eigen::Index>(w.ids.size()) || w.values.cols() != v.cols())
        co_return absl::InvalidArgumentError("sparse gradient for \"" + v.name + "\" has the wrong shape");
      // Sum duplicate ids per shard, as TensorFlow does before a sparse apply.
      std::map<std::size_t, std::map<std::int64_t, Eigen::Index>> rows_by_shard;
      std::map<std::size_t, std::vector<Eigen::RowVectorXf>> sums;
      for (std::size_t i = 0; i < w.ids.size(); ++i) {
        auto s = shard_of_row(v, w.ids[i]);
        if (!s.ok()) co_return s.status();
        const std::int64_t local = w.ids[i] - v.shards[*s].row_offset;
        auto& rows = rows_by_shard[*s];
        auto [it, inserted] = rows.emplace(local, static_cast<Eigen::Index>(sums[*s].size()));
        if (inserted) sums[*s].push_back(w.values.row(static_cast<Eigen::Index>(i)));
        else sums[*s][static_cast<std::size_t>(it->second)] += w.values.row(static_cast<Eigen::Index>(i));
      }
      for (auto& [s, rows] : rows_by_shard) {
        Update u;
        u.shard = v.shards[s].id;
        u.op = w.op;
        u.sparse = true;
        u.values.resize(static_cast<Eigen::Index>(rows.size()), v.cols());
        Eigen::Index out = 0;
        for (auto& [local, idx] : rows) {
          u.rows.push_back(local);
          u.values.row(out++) = sums[s][static_cast<std::size_t>(idx)];
        }
        per_ps[v.shards[s].ps].updates.push_back(std::move(u));
      }
      continue;
    }
    TWINPS_CO_RETURN_IF_ERROR(check_full_shape(v, w.values));
    for (const auto& shard : v.shards) {
      Update u;
      u.shard = shard.id;
      u.op = w.op;
      u.values = w.values.middleRows(shard.row_offset, shard.rows);
      per_ps[shard.ps].updates.push_back(std::move(u));
    }
  }
  std::map<int, Future<StatusOr<Response>>> answers;
  for (auto& [ps, req] : per_ps) {
    req.fence = fence_;
    for (const auto& u : req.updates) bytes_pushed_ += byte_size(u.values);
    answers.emplace(ps, call_async(runtime_.executor, runtime_.transport, TaskId::ps(ps), std::move(req),
                                   call_options(next_request_id())));
  }
  Status first_error;
  for (auto& [ps, fut] : answers) {
    auto r = co_await fut;
    if (!r.ok() && first_error.ok()) first_error = r.status();
  }
  co_return first_error;
}

}  // namespace twinps
