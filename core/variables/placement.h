#pragma once
// VariablePlacer plays the role of TensorFlow's strategy scope: every variable
// the coordinator creates goes through it, and it decides which parameter
// server holds each variable (or each shard of a sharded one).
//
// Placement is round-robin with ONE counter for the whole model, consumed by
// every variable and by every shard (spec V1): with 3 ps, a scalar goes to
// ps0, a 2-shard variable after it to ps1 and ps2, and the next variable to
// ps0 again. Placement therefore depends on creation order, exactly as in
// TensorFlow, so a model built in the same order lands the same way.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/runtime/status.h"
#include "core/variables/layout.h"
#include "core/variables/partitioner.h"

namespace twinps {

class VariablePlacer {
 public:
  // A variable may have at most this many shards: every shard costs a
  // request per dense read, so more would only come from a mistaken
  // partitioner argument.
  static constexpr std::int64_t kMaxShardsPerVariable = 1 << 16;

  // `partitioner` may be null (nothing is sharded). create() fails while
  // num_ps < 1.
  explicit VariablePlacer(int num_ps, PartitionerPtr partitioner = nullptr);

  // Creates variable `name`, sharded along axis 0 if the partitioner says so
  // (rank >= 1 only), each shard placed round-robin. Shards are named
  // "{name}/part_{i}" and get model-wide sequential ShardIds. element_bytes is
  // the element size the partitioner sizes by (kStringElementBytes for
  // strings). INVALID_ARGUMENT for an empty or taken name, a negative
  // dimension, or a partitioner result that is not [n >= 1, 1, 1, ...]
  // (spec V3).
  StatusOr<VariableLayout> create(const std::string& name, const Shape& shape,
                                  VariableKind kind = VariableKind::kTrainable, std::int64_t element_bytes = 4);

  // Creates `name` on the parameter server that holds `existing` (a variable
  // name, or a shard name such as "emb/part_1"), unpartitioned and without
  // advancing the round-robin counter (spec V2). A sharded variable has no
  // single ps, so `existing` must then name one of its shards.
  StatusOr<VariableLayout> colocate_with(std::string_view existing, const std::string& name, const Shape& shape,
                                         VariableKind kind = VariableKind::kTrainable);

  // Creates `name` split into shards of `shard_rows` rows (in row order),
  // shard i on parameter server shard_ps[i]: a plan made for the whole model
  // (variables/auto_placement.h) instead of round-robin, whose counter does
  // not move. INVALID_ARGUMENT when the rows do not sum to the variable's, a
  // shard is empty, the two lists differ in length or a ps index is out of range.
  StatusOr<VariableLayout> create_placed(const std::string& name, const Shape& shape, VariableKind kind,
                                         const std::vector<std::int64_t>& shard_rows,
                                         const std::vector<int>& shard_ps);

  // Every variable in creation order.
  const std::vector<VariableLayout>& variables() const { return variables_; }
  // The variable called `name`, or null. Valid until the next create call.
  const VariableLayout* find(std::string_view name) const;

  int num_ps() const { return num_ps_; }
  const PartitionerPtr& partitioner() const { return partitioner_; }
  // Replaces the partitioner for the variables created from now on (a layer
  // with a partitioner of its own); placement carries on round-robin.
  void set_partitioner(PartitionerPtr partitioner) { partitioner_ = std::move(partitioner); }
  // The ps the next round-robin placement will use.
  int next_ps() const { return num_ps_ > 0 ? static_cast<int>(round_robin_ % num_ps_) : 0; }
  // Shards created so far (= the next ShardId).
  std::uint32_t num_shards() const { return next_shard_id_; }

 private:
  Status check_new(const std::string& name, const Shape& shape, std::int64_t shards) const;
  // Empty `shard_ps`: round-robin.
  VariableLayout add(const std::string& name, const Shape& shape, VariableKind kind,
                     const std::vector<std::int64_t>& shard_rows, const std::vector<int>& shard_ps);

  int num_ps_;
  PartitionerPtr partitioner_;
  std::int64_t round_robin_ = 0;
  ShardId next_shard_id_ = 0;
  std::vector<VariableLayout> variables_;
  // Every variable name and every shard name in use, so that a variable called
  // "emb/part_0" cannot shadow a shard of "emb" (or the reverse). `shard` is
  // -1 for the name of a sharded variable as a whole.
  struct NameUse {
    std::size_t variable;
    std::int64_t shard;
  };
  std::map<std::string, NameUse, std::less<>> names_;
};

}  // namespace twinps
