#pragma once
// Automatic placement (issue 13, point 4): instead of dealing shards to the
// parameter servers round-robin in creation order (TensorFlow's way, spec
// V1), place them so that each ps does about the same work per training
// step. TensorFlow's users have asked for this because round-robin ignores
// what a variable costs: a scalar read by every step (a learning rate, the
// optimizer's iteration counter) lands on a ps beside a shard of the
// embedding, and a power-law embedding split into equal row ranges puts all
// of its popular rows, and so most of its traffic, on the first shard.
//
// The plan is made once, before any variable is created, from what the model
// declares about each variable (its shape, how many rows a step looks up and
// how skewed the lookups are, whether steps update it), priced with the ps's
// per-request, per-row and per-byte costs:
//
//   1. hot variables split: an embedding's shards get row ranges of equal
//      expected work (equal expected distinct rows touched per step), not
//      equal row counts, so the popular head of a power law is a small shard;
//   2. large ones sharded: a variable whose own work exceeds a fair share of
//      the cluster's (total / ps count) is split into more shards, up to the
//      ps count, as far as its rows allow;
//   3. the shards, heaviest first, each go to the ps with the least work so
//      far (longest-processing-time-first), ties broken by bytes held, then
//      by the lower ps index, so the plan is deterministic; memory is a
//      constraint, not a goal: once a model holds 64 MiB or more, no ps takes
//      more than 1.5 times its fair share of the bytes while another has room.
//
// Pure arithmetic: no clock, no randomness.
#include <cstdint>
#include <string>
#include <vector>

#include "core/runtime/status.h"
#include "core/tensor/tensor.h"

namespace twinps {

// What holding a variable costs a ps per training step.
struct VariableDemand {
  std::string name;
  Shape shape;
  std::int64_t element_bytes = 4;
  // Shards its partitioner asks for (>= 1; 1 for a scalar).
  std::int64_t shards = 1;
  // > 0: each step looks up this many rows (with replacement), an embedding;
  // 0: each step reads the whole variable.
  std::int64_t rows_per_step = 0;
  // Skew of the lookups: row r drawn with weight about 1/(r+1)^s (0: uniform).
  double zipf_exponent = 0;
  // Steps pull it (false: a counter steps only add to).
  bool pulled = true;
  // Steps push to it (a gradient, or +1 to a counter); false: read only.
  bool updated = true;
  // Steps use it at all (false: only under a hotspot fault; priced as zero work).
  bool per_step = true;
};

// The prices of a ps's work, in microseconds: a scenario's ps_service costs
// (the defaults are the simulator's defaults; placement needs their ratios,
// not their exact values).
struct PsWorkPrices {
  double per_request_us = 20;
  double per_row_us = 0.05;
  double per_kib_us = 0.2;
};

// Where one variable's shards go.
struct VariablePlan {
  std::vector<std::int64_t> shard_rows;  // in row order; sums to the variable's rows
  std::vector<int> shard_ps;             // one per shard
  std::vector<double> shard_work_us;     // expected work per step, for reports
};

// One plan per demand, in the same order. INVALID_ARGUMENT for num_ps < 1,
// shards < 1, a negative dimension or negative rows_per_step.
StatusOr<std::vector<VariablePlan>> plan_auto_placement(const std::vector<VariableDemand>& demands, int num_ps,
                                                        const PsWorkPrices& prices = {});

// The expected work per step each ps gets under `plans` (for reports and tests).
std::vector<double> work_per_ps(const std::vector<VariablePlan>& plans, int num_ps);

// Expected distinct rows among `draws` lookups that fall in rows [first, last)
// of a variable of `rows` rows with skew `zipf_exponent`, for the synthetic
// models' continuous power law (core/models/synthetic's draw_power_law;
// core/model/compiled_model.h has the whole-table count for a model spec's
// discrete one). Exposed for tests.
double expected_distinct_rows_in(std::int64_t rows, double zipf_exponent, std::int64_t draws, std::int64_t first,
                              std::int64_t last);

}  // namespace twinps
