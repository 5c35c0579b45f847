#pragma once
// Routing for sharded variables, used by worker step functions: which shard
// holds a row, how to look up embeddings with one gather per shard, how to cut
// a gradient or a full value into per-shard pieces and glue them back.
//
// Everything works on a VariableLayout whose shards cover its rows in order:
// the "div" layout that VariablePlacer produces (spec V4: shard i has base+1
// rows for i < extra, else base), routed with TensorFlow's arithmetic, or
// the uneven ranges of an automatic placement (variables/auto_placement.h),
// routed by binary search. A layout that arrived from elsewhere is checked
// first, so bad input gives INVALID_ARGUMENT rather than a wrong row.
//
// Nothing here ever concatenates a whole sharded variable except
// concat_shards(), which exists for dense reads and checkpoints.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/runtime/status.h"
#include "core/tensor/tensor.h"
#include "core/variables/layout.h"

namespace twinps {

// OK when the shards are non-empty and cover rows 0..rows() contiguously in
// order (any sizes: div or an automatic placement's).
Status validate_layout(const VariableLayout& layout);

struct RowLocation {
  std::size_t shard = 0;       // index into layout.shards
  std::int64_t local_row = 0;  // row within that shard
  bool operator==(const RowLocation&) const = default;
};

// The shard and local row of `global_row` (spec V9's arithmetic for a div layout).
// INVALID_ARGUMENT when the row is negative or past the end.
StatusOr<RowLocation> locate_row(const VariableLayout& layout, std::int64_t global_row);

// --- Embedding lookup (spec V10) ---------------------------------------------

// One gather request: these rows of one shard.
struct ShardGather {
  std::size_t shard = 0;  // index into layout.shards
  RowIds local_rows;      // distinct, ascending
};

struct LookupPlan {
  std::string variable;
  std::int64_t cols = 0;
  std::vector<ShardGather> gathers;  // one per shard the ids touch, in shard order
  // Row i of the result is row `row` of the matrix gathered for gathers[gather].
  struct Source {
    std::size_t gather = 0;
    std::size_t row = 0;
  };
  std::vector<Source> sources;  // one per id, in id order
};

// Plans a lookup of `ids` (global rows; repeats allowed). Each shard is asked
// once, for each of its rows once.
StatusOr<LookupPlan> plan_lookup(const VariableLayout& layout, const RowIds& ids);

// Only the gathers of plan_lookup (no per-id sources): the distinct rows of
// `ids` each touched shard holds, for callers that cut by shard but never
// reassemble (a timing-only gradient).
StatusOr<std::vector<ShardGather>> shard_gathers(const VariableLayout& layout, const RowIds& ids);

// Builds the [ids.size() x cols] result from gathered[i] = the rows of
// plan.gathers[i], in that order. INVALID_ARGUMENT on a count or shape mismatch.
// It reads the plan's sources and each gather's shard, never the gathers' row
// lists, so a caller may move those into its requests.
StatusOr<Matrix> assemble(const LookupPlan& plan, const std::vector<Matrix>& gathered);

// plan_lookup + one call of `gather` per touched shard + assemble, for callers
// that can gather synchronously (tests, a coordinator reading locally).
using GatherFn = std::function<StatusOr<Matrix>(const ShardGather&)>;
StatusOr<Matrix> embedding_lookup(const VariableLayout& layout, const RowIds& ids, const GatherFn& gather);

// The rows `rows` of `m`, in that order; INVALID_ARGUMENT for a row outside m.
StatusOr<Matrix> gather_rows(const Matrix& m, const RowIds& rows);

// --- Sparse updates ----------------------------------------------------------

struct ShardUpdate {
  std::size_t shard = 0;  // index into layout.shards
  SparseRows update;      // local rows, distinct and ascending
};

// Splits a sparse gradient (values.row(i) belongs to global row rows[i]) into
// per-shard updates. Repeated rows are summed, in input order, as TensorFlow
// deduplicates IndexedSlices before a sparse apply. Shards without rows are
// left out; the rest come in shard order.
StatusOr<std::vector<ShardUpdate>> split_sparse(const VariableLayout& layout, const RowIds& rows,
                                                const Matrix& values);

// --- Dense values ------------------------------------------------------------

// The row block of `full` that each shard holds, in shard order.
StatusOr<std::vector<Matrix>> split_dense(const VariableLayout& layout, const Matrix& full);
// The same from a value the caller gives up: a variable of one shard gets
// `full` itself, moved rather than copied.
StatusOr<std::vector<Matrix>> split_dense(const VariableLayout& layout, Matrix&& full);
// The full [rows x cols] value from every shard's block, in shard order.
StatusOr<Matrix> concat_shards(const VariableLayout& layout, const std::vector<Matrix>& shards);
// The same from blocks the caller gives up: a variable of one shard is its
// block, moved rather than copied (a 32 MiB variable's pull saves a 32 MiB
// copy, about 3 ms here).
StatusOr<Matrix> concat_shards(const VariableLayout& layout, std::vector<Matrix>&& shards);

// Local rows [begin, end) of one shard.
struct ShardSlice {
  std::size_t shard = 0;  // index into layout.shards
  std::int64_t begin = 0;
  std::int64_t end = 0;
  bool operator==(const ShardSlice&) const = default;
};

// The per-shard pieces of global rows [begin, end) (TensorFlow's sv[begin:end]),
// in row order; only shards that hold some of the rows appear. Requires
// 0 <= begin <= end <= rows: out-of-range bounds are an error, not clamped.
StatusOr<std::vector<ShardSlice>> plan_row_slice(const VariableLayout& layout, std::int64_t begin,
                                                 std::int64_t end);
// Stacks pieces[i] (the rows of slices[i]) into the [end - begin x cols] result.
StatusOr<Matrix> assemble_row_slice(const VariableLayout& layout, const std::vector<ShardSlice>& slices,
                                    const std::vector<Matrix>& pieces);

}  // namespace twinps
