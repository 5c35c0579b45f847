#pragma once
// Partitioners decide how many shards a variable is split into, with
// TensorFlow's arithmetic (spec V5), so that a model sharded by TensorFlow is
// sharded the same way here. Only axis 0 is ever split: a result is
// [shards, 1, 1, ...] with one entry per dimension of the shape.
//
// The concrete partitioners are built through create() functions that reject
// bad arguments with INVALID_ARGUMENT instead of producing nonsense later.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/runtime/status.h"
#include "core/tensor/tensor.h"

namespace twinps {

// Pass as `element_bytes` for a string variable: size-based partitioners then
// count each element as their `bytes_per_string`, as TensorFlow does.
inline constexpr std::int64_t kStringElementBytes = 0;

class Partitioner {
 public:
  virtual ~Partitioner() = default;
  // Shards per axis for a variable of `shape` whose elements take
  // `element_bytes` bytes each. A scalar has no axis to split: {}.
  virtual std::vector<std::int64_t> partition(const Shape& shape, std::int64_t element_bytes) const = 0;
  // "FixedShardsPartitioner(num_shards=2)", for error messages.
  virtual std::string describe() const = 0;
};
using PartitionerPtr = std::shared_ptr<const Partitioner>;

// [min(num_shards, shape[0]), 1, ...].
class FixedShardsPartitioner final : public Partitioner {
 public:
  static StatusOr<std::shared_ptr<const FixedShardsPartitioner>> create(std::int64_t num_shards);
  std::vector<std::int64_t> partition(const Shape& shape, std::int64_t element_bytes) const override;
  std::string describe() const override;
  std::int64_t num_shards() const { return num_shards_; }

 private:
  explicit FixedShardsPartitioner(std::int64_t n) : num_shards_(n) {}
  std::int64_t num_shards_;
};

// As many shards as keep each at least `min_shard_bytes`, capped by
// `max_shards` and by shape[0]: max(1, min(shape[0], max_shards,
// ceil(total_bytes / min_shard_bytes))).
class MinSizePartitioner final : public Partitioner {
 public:
  static StatusOr<std::shared_ptr<const MinSizePartitioner>> create(std::int64_t min_shard_bytes = 256 << 10,
                                                                    std::int64_t max_shards = 1,
                                                                    std::int64_t bytes_per_string = 16);
  std::vector<std::int64_t> partition(const Shape& shape, std::int64_t element_bytes) const override;
  std::string describe() const override;

 private:
  MinSizePartitioner(std::int64_t min_shard_bytes, std::int64_t max_shards, std::int64_t bytes_per_string)
      : min_shard_bytes_(min_shard_bytes), max_shards_(max_shards), bytes_per_string_(bytes_per_string) {}
  std::int64_t min_shard_bytes_, max_shards_, bytes_per_string_;
};

// As few shards as keep each at most `max_shard_bytes` (whole rows only, so a
// single row larger than that still gets a shard of its own), optionally
// capped by `max_shards`.
class MaxSizePartitioner final : public Partitioner {
 public:
  static StatusOr<std::shared_ptr<const MaxSizePartitioner>> create(
      std::int64_t max_shard_bytes, std::optional<std::int64_t> max_shards = std::nullopt,
      std::int64_t bytes_per_string = 16);
  std::vector<std::int64_t> partition(const Shape& shape, std::int64_t element_bytes) const override;
  std::string describe() const override;

 private:
  MaxSizePartitioner(std::int64_t max_shard_bytes, std::optional<std::int64_t> max_shards,
                     std::int64_t bytes_per_string)
      : max_shard_bytes_(max_shard_bytes), max_shards_(max_shards), bytes_per_string_(bytes_per_string) {}
  std::int64_t max_shard_bytes_;
  std::optional<std::int64_t> max_shards_;
  std::int64_t bytes_per_string_;
};

// Any callable as a partitioner (TensorFlow accepts any callable too). Its
// results are checked by VariablePlacer like every other partitioner's.
using PartitionFn = std::function<std::vector<std::int64_t>(const Shape&, std::int64_t element_bytes)>;
PartitionerPtr make_function_partitioner(PartitionFn fn, std::string description);

// Rows per shard when `rows` rows are split into `requested_shards` ("div"
// layout, spec V4): k = min(requested_shards, rows) shards; the first rows % k
// get one row more than the others. A variable with no rows keeps one empty
// shard: {0}. Returns {} when rows < 0 or requested_shards < 1. The result
// has k entries, so callers bound requested_shards (VariablePlacer does).
std::vector<std::int64_t> div_split(std::int64_t rows, std::int64_t requested_shards);

}  // namespace twinps
