#pragma once
// Where every variable lives: the coordinator decides placement and sharding
// (variables/placement.h) and sends this directory to workers, which route
// pulls and pushes with it. Shards split axis 0 ("div" layout).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/ps/optimizer_config.h"
#include "core/tensor/tensor.h"

namespace twinps {

using ShardId = std::uint32_t;

enum class VariableKind : std::uint8_t {
  kTrainable,    // updated by the optimizer from gradients
  kAccumulator,  // updated by add/assign only (metric totals and counts)
  kCounter,      // an int64 scalar updated by add (optimizer iterations)
};

struct ShardPlacement {
  ShardId id = 0;
  int ps = 0;                   // index of the ps task holding it
  std::int64_t row_offset = 0;  // first row of the full variable it holds
  std::int64_t rows = 0;
};

struct VariableLayout {
  std::string name;
  Shape shape;
  VariableKind kind = VariableKind::kTrainable;
  std::vector<ShardPlacement> shards;  // in row order
  // Trainable variables only: the variable's own update rule (a model spec's
  // optimizer group); unset, the cluster's optimizer (coordinator.start's).
  // Its shards carry it to their ps (ShardSpec::optimizer) and checkpoints
  // save and check its slots per variable.
  std::optional<OptimizerConfig> optimizer = std::nullopt;

  std::int64_t rows() const { return storage_rows(shape); }
  std::int64_t cols() const { return storage_cols(shape); }
  // "embedding/part_1" when sharded, else the variable's own name (TensorFlow's naming).
  std::string shard_name(std::size_t i) const {
    return shards.size() > 1 ? name + "/part_" + std::to_string(i) : name;
  }
};

}  // namespace twinps
