#include "core/variables/auto_placement.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <tuple>

#include "core/variables/partitioner.h"

namespace twinps {
namespace {

// P(row <= r) for the synthetic models' power law (core/models/synthetic's
// draw_power_law inverts this CDF): ((r+2)^(1-s) - 1) / ((n+1)^(1-s) - 1),
// ln(r+2) / ln(n+1) at s = 1; s = 0 gives the uniform (r+1)/n.
double power_law_cdf(std::int64_t n, double s, std::int64_t r) {
  if (r < 0) return 0;
  if (r >= n - 1) return 1;
  const double x = static_cast<double>(r) + 2, top = static_cast<double>(n) + 1;
  if (s == 1) return std::log(x) / std::log(top);
  return (std::pow(x, 1 - s) - 1) / (std::pow(top, 1 - s) - 1);
}

// The variable's rows as blocks whose rows are about equally likely: one row
// per block at the head, then blocks of 1 % of the row index (a power law's
// probability changes by about s % across such a block), so a variable of a
// billion rows costs a few thousand blocks.
struct RowBlock {
  std::int64_t first, last;  // [first, last)
  double mass;               // probability that one draw falls in the block
};
std::vector<RowBlock> row_blocks(std::int64_t rows, double s, std::int64_t first, std::int64_t last) {
  std::vector<RowBlock> out;
  for (std::int64_t a = first; a < last;) {
    const std::int64_t size = s == 0 ? last - a : std::max<std::int64_t>(1, (a + 1) / 100);
    const std::int64_t b = std::min(last, a + size);
    out.push_back({a, b, power_law_cdf(rows, s, b - 1) - power_law_cdf(rows, s, a - 1)});
    a = b;
  }
  return out;
}

// Expected distinct rows of a block hit by `draws` draws: rows x (1 - (1 - p)^draws).
double block_distinct(const RowBlock& b, std::int64_t draws) {
  const double n = static_cast<double>(b.last - b.first);
  const double p = std::clamp(b.mass / n, 0.0, 1.0);
  return n * -std::expm1(static_cast<double>(draws) * std::log1p(-p));
}

std::int64_t rows_of(const Shape& shape) { return shape.empty() ? 1 : shape[0]; }
std::int64_t cols_of(const Shape& shape) {
  std::int64_t c = 1;
  for (std::size_t i = 1; i < shape.size(); ++i) c *= shape[i];
  return c;
}

// Row ranges of equal expected distinct rows per step (the work of an
// embedding's shard), each at least one row.
std::vector<std::int64_t> equal_work_split(const VariableDemand& d, std::int64_t shards) {
  const std::int64_t rows = rows_of(d.shape);
  if (d.rows_per_step == 0 || d.zipf_exponent == 0 || shards <= 1) return div_split(rows, shards);
  const std::vector<RowBlock> blocks = row_blocks(rows, d.zipf_exponent, 0, rows);
  double total = 0;
  for (const auto& b : blocks) total += block_distinct(b, d.rows_per_step);
  std::vector<std::int64_t> out;
  std::int64_t start = 0;
  double seen = 0;
  std::size_t i = 0;
  for (std::int64_t k = 1; k < shards; ++k) {
    const double target = total * static_cast<double>(k) / static_cast<double>(shards);
    while (i < blocks.size() && seen + block_distinct(blocks[i], d.rows_per_step) < target)
      seen += block_distinct(blocks[i++], d.rows_per_step);
    std::int64_t end = i < blocks.size() ? blocks[i].first : rows;
    if (i < blocks.size()) {  // inside the block, rows are about equally likely: interpolate
      const double in_block = (target - seen) / std::max(1e-300, block_distinct(blocks[i], d.rows_per_step));
      end += static_cast<std::int64_t>(in_block * static_cast<double>(blocks[i].last - blocks[i].first));
    }
    // At least one row per shard, and room for the shards still to come.
    end = std::clamp(end, start + 1, rows - (shards - k));
    out.push_back(end - start);
    start = end;
  }
  out.push_back(rows - start);
  return out;
}

double shard_work(const VariableDemand& d, std::int64_t first, std::int64_t last, const PsWorkPrices& price) {
  if (!d.per_step) return 0;
  const double directions = (d.pulled ? 1 : 0) + (d.updated ? 1 : 0);  // a pull and/or a push per step
  const double kib_per_row = static_cast<double>(cols_of(d.shape) * d.element_bytes) / 1024;
  double requests = directions, rows = directions * static_cast<double>(last - first);
  if (d.rows_per_step > 0) {
    const std::int64_t n = rows_of(d.shape);
    double distinct = 0, mass = 0;
    for (const auto& b : row_blocks(n, d.zipf_exponent, first, last)) {
      distinct += block_distinct(b, d.rows_per_step);
      mass += b.mass;
    }
    const double touched = -std::expm1(static_cast<double>(d.rows_per_step) * std::log1p(-std::min(mass, 1.0)));
    requests = directions * touched;
    rows = directions * distinct;
  }
  return requests * price.per_request_us + rows * price.per_row_us + rows * kib_per_row * price.per_kib_us;
}

VariablePlan plan_shards(const VariableDemand& d, std::int64_t shards, const PsWorkPrices& prices) {
  VariablePlan plan;
  plan.shard_rows = equal_work_split(d, shards);
  std::int64_t first = 0;
  for (std::int64_t r : plan.shard_rows) {
    plan.shard_work_us.push_back(shard_work(d, first, first + r, prices));
    first += r;
  }
  plan.shard_ps.assign(plan.shard_rows.size(), 0);
  return plan;
}

// Memory as a constraint, not a goal: a ps holds at most this many times its
// fair share of the model's bytes, once the model is big enough for memory
// to matter (below that, two shards of a small table on one ps are free).
constexpr double kMaxBytesShare = 1.5;
constexpr double kBytesWorthBalancing = 64.0 * (1 << 20);

double total_work(const VariablePlan& p) { return std::accumulate(p.shard_work_us.begin(), p.shard_work_us.end(), 0.0); }

Status check(const std::vector<VariableDemand>& demands, int num_ps) {
  if (num_ps < 1) return absl::InvalidArgumentError("automatic placement needs at least one parameter server");
  for (const auto& d : demands) {
    const std::string at = "variable \"" + d.name + "\": ";
    if (d.shards < 1) return absl::InvalidArgumentError(at + "shards must be >= 1");
    if (d.rows_per_step < 0) return absl::InvalidArgumentError(at + "rows_per_step must be >= 0");
    if (!(d.zipf_exponent >= 0)) return absl::InvalidArgumentError(at + "zipf_exponent must be >= 0");
    for (std::int64_t dim : d.shape)
      if (dim < 0) return absl::InvalidArgumentError(at + "shape " + shape_string(d.shape) + " has a negative dimension");
  }
  return absl::OkStatus();
}

}  // namespace

double expected_distinct_rows_in(std::int64_t rows, double zipf_exponent, std::int64_t draws, std::int64_t first,
                              std::int64_t last) {
  double sum = 0;
  for (const auto& b : row_blocks(rows, zipf_exponent, first, last)) sum += block_distinct(b, draws);
  return sum;
}

StatusOr<std::vector<VariablePlan>> plan_auto_placement(const std::vector<VariableDemand>& demands, int num_ps,
                                                        const PsWorkPrices& prices) {
  TWINPS_RETURN_IF_ERROR(check(demands, num_ps));
  // 1. Hot variables split: row ranges of equal work.
  std::vector<VariablePlan> plans;
  double all = 0;
  for (const auto& d : demands) {
    const std::int64_t shards = d.shape.empty() ? 1 : std::clamp<std::int64_t>(d.shards, 1, std::max<std::int64_t>(1, rows_of(d.shape)));
    plans.push_back(plan_shards(d, shards, prices));
    all += total_work(plans.back());
  }
  // 2. Large ones sharded: more shards for a variable above a fair share.
  const double fair = all / num_ps;
  for (std::size_t v = 0; v < demands.size(); ++v) {
    const auto& d = demands[v];
    const double work = total_work(plans[v]);
    if (d.shape.empty() || fair <= 0 || work <= fair) continue;
    const auto wanted = static_cast<std::int64_t>(std::ceil(work / fair));
    const std::int64_t shards = std::min<std::int64_t>({wanted, num_ps, rows_of(d.shape)});
    if (shards > static_cast<std::int64_t>(plans[v].shard_rows.size())) plans[v] = plan_shards(d, shards, prices);
  }
  // 3. Heaviest shard first, onto the least loaded ps that has room.
  struct Item {
    double work, bytes;
    std::size_t variable, shard;
  };
  std::vector<Item> items;
  double all_bytes = 0;
  for (std::size_t v = 0; v < plans.size(); ++v)
    for (std::size_t s = 0; s < plans[v].shard_rows.size(); ++s) {
      const auto rows = static_cast<double>(plans[v].shard_rows[s]);
      items.push_back({plans[v].shard_work_us[s], rows * static_cast<double>(cols_of(demands[v].shape) * demands[v].element_bytes), v, s});
      all_bytes += items.back().bytes;
    }
  std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    return std::tie(b.work, b.bytes) < std::tie(a.work, a.bytes);
  });
  const double room = all_bytes < kBytesWorthBalancing ? all_bytes : kMaxBytesShare * all_bytes / num_ps;
  std::vector<double> work(static_cast<std::size_t>(num_ps), 0), bytes(static_cast<std::size_t>(num_ps), 0);
  for (const Item& it : items) {
    std::size_t best = 0;
    bool best_fits = false;
    for (std::size_t p = 0; p < work.size(); ++p) {
      const bool fits = bytes[p] + it.bytes <= room;
      // Least work among the ps with room; if none has room, least bytes.
      const bool better = p == 0 || (fits && !best_fits) ||
                          (fits == best_fits && (fits ? std::tie(work[p], bytes[p]) < std::tie(work[best], bytes[best])
                                                      : bytes[p] < bytes[best]));
      if (better) {
        best = p;
        best_fits = fits;
      }
    }
    plans[it.variable].shard_ps[it.shard] = static_cast<int>(best);
    work[best] += it.work;
    bytes[best] += it.bytes;
  }
  return plans;
}

std::vector<double> work_per_ps(const std::vector<VariablePlan>& plans, int num_ps) {
  std::vector<double> out(static_cast<std::size_t>(std::max(num_ps, 0)), 0);
  for (const auto& p : plans)
    for (std::size_t s = 0; s < p.shard_ps.size(); ++s)
      if (p.shard_ps[s] >= 0 && p.shard_ps[s] < num_ps) out[static_cast<std::size_t>(p.shard_ps[s])] += p.shard_work_us[s];
  return out;
}

}  // namespace twinps
