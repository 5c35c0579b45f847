#include "core/variables/partitioner.h"

#include <algorithm>
#include <limits>
#include <utility>

namespace twinps {
namespace {

constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();

// Byte counts of huge shapes saturate instead of overflowing; the shard count
// computed from a saturated total is capped by shape[0] anyway.
std::int64_t saturating_mul(std::int64_t a, std::int64_t b) {
  if (a == 0 || b == 0) return 0;
  if (a > kInt64Max / b) return kInt64Max;
  return a * b;
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

std::int64_t element_size(std::int64_t element_bytes, std::int64_t bytes_per_string) {
  return element_bytes == kStringElementBytes ? bytes_per_string : element_bytes;
}

// Bytes of one row along axis 0 (the product of the other dimensions).
std::int64_t row_bytes(const Shape& shape, std::int64_t element_bytes) {
  std::int64_t n = element_bytes;
  for (std::size_t i = 1; i < shape.size(); ++i) n = saturating_mul(n, std::max<std::int64_t>(shape[i], 0));
  return n;
}

std::vector<std::int64_t> axis0(const Shape& shape, std::int64_t shards) {
  if (shape.empty()) return {};
  std::vector<std::int64_t> out(shape.size(), 1);
  out[0] = shards;
  return out;
}

Status require_positive(const char* partitioner, const char* arg, std::int64_t value) {
  if (value >= 1) return absl::OkStatus();
  return absl::InvalidArgumentError(std::string(partitioner) + ": " + arg + " must be >= 1, got " +
                                     std::to_string(value));
}

class FunctionPartitioner final : public Partitioner {
 public:
  FunctionPartitioner(PartitionFn fn, std::string description)
      : fn_(std::move(fn)), description_(std::move(description)) {}
  std::vector<std::int64_t> partition(const Shape& shape, std::int64_t element_bytes) const override {
    return fn_ ? fn_(shape, element_bytes) : std::vector<std::int64_t>{};
  }
  std::string describe() const override { return description_; }

 private:
  PartitionFn fn_;
  std::string description_;
};

}  // namespace

StatusOr<std::shared_ptr<const FixedShardsPartitioner>> FixedShardsPartitioner::create(std::int64_t num_shards) {
  TWINPS_RETURN_IF_ERROR(require_positive("FixedShardsPartitioner", "num_shards", num_shards));
  return std::shared_ptr<const FixedShardsPartitioner>(new FixedShardsPartitioner(num_shards));
}

std::vector<std::int64_t> FixedShardsPartitioner::partition(const Shape& shape, std::int64_t) const {
  if (shape.empty()) return {};
  return axis0(shape, std::min(num_shards_, shape[0]));
}

std::string FixedShardsPartitioner::describe() const {
  return "FixedShardsPartitioner(num_shards=" + std::to_string(num_shards_) + ")";
}

StatusOr<std::shared_ptr<const MinSizePartitioner>> MinSizePartitioner::create(std::int64_t min_shard_bytes,
                                                                                 std::int64_t max_shards,
                                                                                 std::int64_t bytes_per_string) {
  TWINPS_RETURN_IF_ERROR(require_positive("MinSizePartitioner", "min_shard_bytes", min_shard_bytes));
  TWINPS_RETURN_IF_ERROR(require_positive("MinSizePartitioner", "max_shards", max_shards));
  TWINPS_RETURN_IF_ERROR(require_positive("MinSizePartitioner", "bytes_per_string", bytes_per_string));
  return std::shared_ptr<const MinSizePartitioner>(
      new MinSizePartitioner(min_shard_bytes, max_shards, bytes_per_string));
}

std::vector<std::int64_t> MinSizePartitioner::partition(const Shape& shape, std::int64_t element_bytes) const {
  if (shape.empty()) return {};
  std::int64_t rows = std::max<std::int64_t>(shape[0], 0);
  std::int64_t total = saturating_mul(row_bytes(shape, element_size(element_bytes, bytes_per_string_)), rows);
  std::int64_t by_size = ceil_div(total, min_shard_bytes_);
  return axis0(shape, std::max<std::int64_t>(1, std::min({rows, max_shards_, by_size})));
}

std::string MinSizePartitioner::describe() const {
  return "MinSizePartitioner(min_shard_bytes=" + std::to_string(min_shard_bytes_) +
         ", max_shards=" + std::to_string(max_shards_) + ", bytes_per_string=" + std::to_string(bytes_per_string_) +
         ")";
}

StatusOr<std::shared_ptr<const MaxSizePartitioner>> MaxSizePartitioner::create(
    std::int64_t max_shard_bytes, std::optional<std::int64_t> max_shards, std::int64_t bytes_per_string) {
  TWINPS_RETURN_IF_ERROR(require_positive("MaxSizePartitioner", "max_shard_bytes", max_shard_bytes));
  if (max_shards) TWINPS_RETURN_IF_ERROR(require_positive("MaxSizePartitioner", "max_shards", *max_shards));
  TWINPS_RETURN_IF_ERROR(require_positive("MaxSizePartitioner", "bytes_per_string", bytes_per_string));
  return std::shared_ptr<const MaxSizePartitioner>(
      new MaxSizePartitioner(max_shard_bytes, max_shards, bytes_per_string));
}

std::vector<std::int64_t> MaxSizePartitioner::partition(const Shape& shape, std::int64_t element_bytes) const {
  if (shape.empty()) return {};
  std::int64_t rows = shape[0];
  std::int64_t slice_bytes = row_bytes(shape, element_size(element_bytes, bytes_per_string_));
  // TensorFlow divides by zero here (no rows, or empty rows); there is nothing
  // to split, so one shard.
  if (rows <= 0 || slice_bytes == 0) return axis0(shape, 1);
  std::int64_t rows_per_shard = std::max<std::int64_t>(1, max_shard_bytes_ / slice_bytes);
  std::int64_t shards = ceil_div(rows, rows_per_shard);
  if (max_shards_) shards = std::min(*max_shards_, shards);
  return axis0(shape, shards);
}

std::string MaxSizePartitioner::describe() const {
  return "MaxSizePartitioner(max_shard_bytes=" + std::to_string(max_shard_bytes_) +
         ", max_shards=" + (max_shards_ ? std::to_string(*max_shards_) : std::string("none")) +
         ", bytes_per_string=" + std::to_string(bytes_per_string_) + ")";
}

PartitionerPtr make_function_partitioner(PartitionFn fn, std::string description) {
  return std::make_shared<const FunctionPartitioner>(std::move(fn), std::move(description));
}

std::vector<std::int64_t> div_split(std::int64_t rows, std::int64_t requested_shards) {
  if (rows < 0 || requested_shards < 1) return {};
  if (rows == 0) return {0};
  std::int64_t k = std::min(requested_shards, rows);
  std::int64_t base = rows / k;
  std::int64_t extra = rows % k;
  std::vector<std::int64_t> sizes(static_cast<std::size_t>(k), base);
  for (std::int64_t i = 0; i < extra; ++i) sizes[static_cast<std::size_t>(i)] += 1;
  return sizes;
}

}  // namespace twinps
