#include "core/variables/sharded_variable.h"

#include <algorithm>
#include <tuple>

#include "core/variables/partitioner.h"

namespace twinps {
namespace {

Status invalid(const VariableLayout& layout, const std::string& message) {
  return absl::InvalidArgumentError("variable \"" + layout.name + "\": " + message);
}

std::string dims(Eigen::Index rows, Eigen::Index cols) { return std::to_string(rows) + "x" + std::to_string(cols); }

std::string list_string(const std::vector<std::int64_t>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

// Python's a // b for b > 0 (rounds toward minus infinity); the routing
// formula below is written with it.
std::int64_t floor_div(std::int64_t a, std::int64_t b) { return a / b - ((a % b != 0 && a < 0) ? 1 : 0); }

// Spec V9: with N rows in k div shards, the first `extra` shards have base+1
// rows. Requires a valid layout and 0 <= g < N (so base >= 1).
RowLocation route_div(std::int64_t n, std::int64_t k, std::int64_t g) {
  const std::int64_t base = n / k;
  const std::int64_t extra = n % k;
  const std::int64_t p = std::max(floor_div(g, base + 1), floor_div(g - extra, base));
  const std::int64_t local = p < extra ? g % (base + 1) : (g - extra) % base;
  return RowLocation{static_cast<std::size_t>(p), local};
}

// Routes rows of one valid layout: with the div formula when the layout is
// TensorFlow's div split (every placer layout but an automatic placement's),
// else by binary search over the shards' first rows (an automatic placement
// splits a skewed embedding into ranges of equal work, not equal rows).
class Router {
 public:
  explicit Router(const VariableLayout& layout)
      : layout_(layout), n_(layout.rows()), k_(static_cast<std::int64_t>(layout.shards.size())) {
    const std::vector<std::int64_t> div = div_split(n_, k_);
    for (std::size_t i = 0; i < layout.shards.size() && div_; ++i) div_ = layout.shards[i].rows == div[i];
  }
  // Requires 0 <= g < rows.
  RowLocation operator()(std::int64_t g) const {
    if (div_) return route_div(n_, k_, g);
    const auto& shards = layout_.shards;
    auto after = std::upper_bound(shards.begin(), shards.end(), g,
                                  [](std::int64_t row, const ShardPlacement& s) { return row < s.row_offset; });
    const auto shard = static_cast<std::size_t>(after - shards.begin()) - 1;
    return RowLocation{shard, g - shards[shard].row_offset};
  }

 private:
  const VariableLayout& layout_;
  std::int64_t n_, k_;
  bool div_ = true;
};

Status check_row(const VariableLayout& layout, std::int64_t g) {
  if (g < 0) return invalid(layout, "row id " + std::to_string(g) + " is negative");
  if (g >= layout.rows())
    return invalid(layout, "row id " + std::to_string(g) + " is out of range: the variable has " +
                               std::to_string(layout.rows()) + " rows" +
                               (layout.rows() > 0 ? " (0.." + std::to_string(layout.rows() - 1) + ")" : ""));
  return absl::OkStatus();
}

std::int64_t num_shards(const VariableLayout& layout) { return static_cast<std::int64_t>(layout.shards.size()); }

}  // namespace

Status validate_layout(const VariableLayout& layout) {
  for (std::int64_t d : layout.shape)
    if (d < 0) return invalid(layout, "shape " + shape_string(layout.shape) + " has a negative dimension");
  const std::int64_t n = layout.rows();
  const std::int64_t k = num_shards(layout);
  if (k == 0) return invalid(layout, "the layout has no shards");
  if (n == 0 ? k != 1 : k > n)
    return invalid(layout, std::to_string(k) + " shards for " + std::to_string(n) + " rows");
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < layout.shards.size(); ++i) {
    const ShardPlacement& s = layout.shards[i];
    if (s.row_offset != offset)
      return invalid(layout, "shard " + std::to_string(i) + " starts at row " + std::to_string(s.row_offset) +
                                 "; expected " + std::to_string(offset));
    if (n > 0 && s.rows < 1) return invalid(layout, "shard " + std::to_string(i) + " has no rows");
    offset += s.rows;
  }
  if (offset != n) {
    std::vector<std::int64_t> actual;
    for (const ShardPlacement& t : layout.shards) actual.push_back(t.rows);
    return invalid(layout, "shards have rows " + list_string(actual) + " (" + std::to_string(offset) +
                               " in all), but the variable has " + std::to_string(n) + " rows");
  }
  return absl::OkStatus();
}

StatusOr<RowLocation> locate_row(const VariableLayout& layout, std::int64_t global_row) {
  TWINPS_RETURN_IF_ERROR(validate_layout(layout));
  TWINPS_RETURN_IF_ERROR(check_row(layout, global_row));
  return Router(layout)(global_row);
}

namespace {

// Routes every id (into `where`) and groups the distinct local rows by shard;
// `gather_of_shard[s]` is the index of shard s's gather (when it has one).
// Counts first so each shard's list is allocated once: this runs for every
// sparse read and write of a step, timing-only ones included. Sets
// `ids_in_order` when the ids were ascending and distinct (so each shard's
// rows needed no sort, and the i-th id routed to a shard is that gather's
// i-th row).
StatusOr<std::vector<ShardGather>> group_by_shard(const VariableLayout& layout, const RowIds& ids,
                                                  std::vector<RowLocation>& where,
                                                  std::vector<std::size_t>& gather_of_shard,
                                                  bool& ids_in_order) {
  TWINPS_RETURN_IF_ERROR(validate_layout(layout));
  const Router route(layout);
  where.resize(ids.size());
  std::vector<std::size_t>& count = gather_of_shard;  // counts first, then indices
  count.assign(layout.shards.size(), 0);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    TWINPS_RETURN_IF_ERROR(check_row(layout, ids[i]));
    where[i] = route(ids[i]);
    ++count[where[i].shard];
  }
  std::vector<ShardGather> gathers;
  for (std::size_t s = 0; s < count.size(); ++s) {
    if (count[s] == 0) continue;
    gathers.push_back(ShardGather{s, {}});
    gathers.back().local_rows.reserve(count[s]);
    gather_of_shard[s] = gathers.size() - 1;
  }
  for (const RowLocation& loc : where) gathers[gather_of_shard[loc.shard]].local_rows.push_back(loc.local_row);
  // Shards hold ranges of rows in order, so ascending ids route to ascending rows.
  ids_in_order = ascending_distinct(ids);
  if (ids_in_order) return gathers;
  for (ShardGather& g : gathers) {
    RowIds& rows = g.local_rows;
    if (!std::is_sorted(rows.begin(), rows.end())) std::sort(rows.begin(), rows.end());
    rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  }
  return gathers;
}

}  // namespace

StatusOr<std::vector<ShardGather>> shard_gathers(const VariableLayout& layout, const RowIds& ids) {
  std::vector<RowLocation> where;
  std::vector<std::size_t> gather_of_shard;
  bool ids_in_order = false;
  return group_by_shard(layout, ids, where, gather_of_shard, ids_in_order);
}

StatusOr<LookupPlan> plan_lookup(const VariableLayout& layout, const RowIds& ids) {
  std::vector<RowLocation> where;
  std::vector<std::size_t> gather_of_shard;
  bool ids_in_order = false;
  auto gathers = group_by_shard(layout, ids, where, gather_of_shard, ids_in_order);
  if (!gathers.ok()) return gathers.status();
  LookupPlan plan{layout.name, layout.cols(), std::move(*gathers), {}};
  plan.sources.reserve(ids.size());
  // Ascending distinct ids (an embedding's plan gives them so) fill each
  // gather in order; others look their row up in it.
  std::vector<std::size_t> next_in_gather(plan.gathers.size(), 0);
  for (const RowLocation& loc : where) {
    const std::size_t g = gather_of_shard[loc.shard];
    const RowIds& rows = plan.gathers[g].local_rows;
    const std::size_t pos =
        ids_in_order ? next_in_gather[g]++
                     : static_cast<std::size_t>(std::lower_bound(rows.begin(), rows.end(), loc.local_row) - rows.begin());
    plan.sources.push_back(LookupPlan::Source{g, pos});
  }
  return plan;
}

StatusOr<Matrix> assemble(const LookupPlan& plan, const std::vector<Matrix>& gathered) {
  auto bad = [&](const std::string& message) {
    return absl::InvalidArgumentError("variable \"" + plan.variable + "\": " + message);
  };
  if (gathered.size() != plan.gathers.size())
    return bad("got " + std::to_string(gathered.size()) + " gathered matrices for " +
               std::to_string(plan.gathers.size()) + " gathers");
  // Each gather's row count follows from the sources (its rows are distinct
  // and each is some id's source), so the gathers' row lists may be gone.
  std::vector<Eigen::Index> want_rows(gathered.size(), 0);
  for (std::size_t i = 0; i < plan.sources.size(); ++i) {
    const LookupPlan::Source& src = plan.sources[i];
    if (src.gather >= gathered.size()) return bad("the lookup plan is inconsistent at id " + std::to_string(i));
    want_rows[src.gather] = std::max(want_rows[src.gather], static_cast<Eigen::Index>(src.row) + 1);
  }
  for (std::size_t i = 0; i < gathered.size(); ++i) {
    if (gathered[i].rows() != want_rows[i] || gathered[i].cols() != plan.cols)
      return bad("the gather from shard " + std::to_string(plan.gathers[i].shard) + " returned " +
                 dims(gathered[i].rows(), gathered[i].cols()) + "; expected " + dims(want_rows[i], plan.cols));
  }
  Matrix out(static_cast<Eigen::Index>(plan.sources.size()), plan.cols);
  for (std::size_t i = 0; i < plan.sources.size(); ++i) {
    const LookupPlan::Source& src = plan.sources[i];
    out.row(static_cast<Eigen::Index>(i)) = gathered[src.gather].row(static_cast<Eigen::Index>(src.row));
  }
  return out;
}

StatusOr<Matrix> embedding_lookup(const VariableLayout& layout, const RowIds& ids, const GatherFn& gather) {
  auto plan = plan_lookup(layout, ids);
  if (!plan.ok()) return plan.status();
  std::vector<Matrix> gathered;
  gathered.reserve(plan->gathers.size());
  for (const ShardGather& g : plan->gathers) {
    auto rows = gather(g);
    if (!rows.ok()) return rows.status();
    gathered.push_back(*std::move(rows));
  }
  return assemble(*plan, gathered);
}

StatusOr<Matrix> gather_rows(const Matrix& m, const RowIds& rows) {
  Matrix out(static_cast<Eigen::Index>(rows.size()), m.cols());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] < 0 || rows[i] >= m.rows())
      return absl::InvalidArgumentError("row " + std::to_string(rows[i]) + " is out of range for a matrix with " +
                                        std::to_string(m.rows()) + " rows");
    out.row(static_cast<Eigen::Index>(i)) = m.row(rows[i]);
  }
  return out;
}

StatusOr<std::vector<ShardUpdate>> split_sparse(const VariableLayout& layout, const RowIds& rows,
                                                const Matrix& values) {
  TWINPS_RETURN_IF_ERROR(validate_layout(layout));
  if (values.rows() != static_cast<Eigen::Index>(rows.size()))
    return invalid(layout, std::to_string(rows.size()) + " row ids but " + std::to_string(values.rows()) +
                               " rows of values");
  if (rows.empty()) return std::vector<ShardUpdate>{};
  if (values.cols() != layout.cols())
    return invalid(layout, "values have " + std::to_string(values.cols()) + " columns; the variable has " +
                               std::to_string(layout.cols()));

  struct Entry {
    RowLocation loc;
    std::size_t input;  // index into rows/values
  };
  const Router route(layout);
  std::vector<Entry> entries;
  entries.reserve(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    TWINPS_RETURN_IF_ERROR(check_row(layout, rows[i]));
    entries.push_back(Entry{route(rows[i]), i});
  }
  // Stable, so that repeats of a row are summed in input order: the same
  // input always gives bit-identical sums. Ascending rows (an embedding's
  // gradient) are in order already: shards hold ranges of rows in order.
  auto by_location = [](const Entry& a, const Entry& b) {
    return std::tie(a.loc.shard, a.loc.local_row) < std::tie(b.loc.shard, b.loc.local_row);
  };
  if (!std::is_sorted(entries.begin(), entries.end(), by_location))
    std::stable_sort(entries.begin(), entries.end(), by_location);

  std::vector<ShardUpdate> out;
  std::size_t i = 0;
  while (i < entries.size()) {
    const std::size_t shard = entries[i].loc.shard;
    std::size_t end = i;
    std::size_t distinct = 0;
    for (; end < entries.size() && entries[end].loc.shard == shard; ++end)
      if (end == i || entries[end].loc.local_row != entries[end - 1].loc.local_row) ++distinct;

    ShardUpdate update{shard, SparseRows{{}, Matrix(static_cast<Eigen::Index>(distinct), layout.cols())}};
    update.update.rows.reserve(distinct);
    for (std::size_t j = i; j < end; ++j) {
      const auto value = values.row(static_cast<Eigen::Index>(entries[j].input));
      if (j == i || entries[j].loc.local_row != entries[j - 1].loc.local_row) {
        update.update.rows.push_back(entries[j].loc.local_row);
        update.update.values.row(static_cast<Eigen::Index>(update.update.rows.size() - 1)) = value;
      } else {
        update.update.values.row(static_cast<Eigen::Index>(update.update.rows.size() - 1)) += value;
      }
    }
    out.push_back(std::move(update));
    i = end;
  }
  return out;
}

StatusOr<std::vector<Matrix>> split_dense(const VariableLayout& layout, const Matrix& full) {
  TWINPS_RETURN_IF_ERROR(validate_layout(layout));
  if (full.rows() != layout.rows() || full.cols() != layout.cols())
    return invalid(layout, "the value is " + dims(full.rows(), full.cols()) + "; the variable is " +
                               dims(layout.rows(), layout.cols()) + " (shape " + shape_string(layout.shape) + ")");
  std::vector<Matrix> out;
  out.reserve(layout.shards.size());
  for (const ShardPlacement& s : layout.shards) out.emplace_back(full.middleRows(s.row_offset, s.rows));
  return out;
}

StatusOr<std::vector<Matrix>> split_dense(const VariableLayout& layout, Matrix&& full) {
  const bool whole = layout.shards.size() == 1 && full.rows() == layout.rows() && full.cols() == layout.cols();
  if (!whole) return split_dense(layout, static_cast<const Matrix&>(full));
  TWINPS_RETURN_IF_ERROR(validate_layout(layout));
  std::vector<Matrix> out;
  out.push_back(std::move(full));
  return out;
}

StatusOr<Matrix> concat_shards(const VariableLayout& layout, const std::vector<Matrix>& shards) {
  TWINPS_RETURN_IF_ERROR(validate_layout(layout));
  if (shards.size() != layout.shards.size())
    return invalid(layout, "got " + std::to_string(shards.size()) + " shard values for " +
                               std::to_string(layout.shards.size()) + " shards");
  Matrix out(layout.rows(), layout.cols());
  for (std::size_t i = 0; i < shards.size(); ++i) {
    const ShardPlacement& s = layout.shards[i];
    if (shards[i].rows() != s.rows || shards[i].cols() != layout.cols())
      return invalid(layout, "the value of shard " + std::to_string(i) + " is " +
                                 dims(shards[i].rows(), shards[i].cols()) + "; expected " +
                                 dims(s.rows, layout.cols()));
    out.middleRows(s.row_offset, s.rows) = shards[i];
  }
  return out;
}

StatusOr<Matrix> concat_shards(const VariableLayout& layout, std::vector<Matrix>&& shards) {
  const bool whole = layout.shards.size() == 1 && shards.size() == 1 && shards[0].rows() == layout.rows() &&
                     shards[0].cols() == layout.cols();
  if (!whole) return concat_shards(layout, static_cast<const std::vector<Matrix>&>(shards));
  TWINPS_RETURN_IF_ERROR(validate_layout(layout));
  return std::move(shards[0]);
}

StatusOr<std::vector<ShardSlice>> plan_row_slice(const VariableLayout& layout, std::int64_t begin,
                                                 std::int64_t end) {
  TWINPS_RETURN_IF_ERROR(validate_layout(layout));
  if (begin < 0 || begin > end || end > layout.rows())
    return invalid(layout, "row slice [" + std::to_string(begin) + ":" + std::to_string(end) +
                               "] is not within [0:" + std::to_string(layout.rows()) + "]");
  std::vector<ShardSlice> out;
  for (std::size_t i = 0; i < layout.shards.size(); ++i) {
    const ShardPlacement& s = layout.shards[i];
    const std::int64_t lo = std::max(begin, s.row_offset);
    const std::int64_t hi = std::min(end, s.row_offset + s.rows);
    if (lo < hi) out.push_back(ShardSlice{i, lo - s.row_offset, hi - s.row_offset});
  }
  return out;
}

StatusOr<Matrix> assemble_row_slice(const VariableLayout& layout, const std::vector<ShardSlice>& slices,
                                    const std::vector<Matrix>& pieces) {
  if (pieces.size() != slices.size())
    return invalid(layout, "got " + std::to_string(pieces.size()) + " pieces for " +
                               std::to_string(slices.size()) + " slices");
  std::int64_t total = 0;
  for (std::size_t i = 0; i < slices.size(); ++i) {
    const ShardSlice& s = slices[i];
    if (s.shard >= layout.shards.size() || s.begin < 0 || s.begin > s.end || s.end > layout.shards[s.shard].rows)
      return invalid(layout, "slice " + std::to_string(i) + " is not within its shard");
    if (pieces[i].rows() != s.end - s.begin || pieces[i].cols() != layout.cols())
      return invalid(layout, "piece " + std::to_string(i) + " (shard " + std::to_string(s.shard) + ") is " +
                                 dims(pieces[i].rows(), pieces[i].cols()) + "; expected " +
                                 dims(s.end - s.begin, layout.cols()));
    total += s.end - s.begin;
  }
  Matrix out(total, layout.cols());
  std::int64_t at = 0;
  for (const Matrix& piece : pieces) {
    out.middleRows(at, piece.rows()) = piece;
    at += piece.rows();
  }
  return out;
}

}  // namespace twinps
