#include "core/variables/placement.h"

#include <algorithm>
#include <limits>
#include <utility>

namespace twinps {
namespace {

Status invalid(const std::string& variable, const std::string& message) {
  return absl::InvalidArgumentError("variable \"" + variable + "\": " + message);
}

std::string list_string(const std::vector<std::int64_t>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

Status check_shape(const std::string& name, const Shape& shape) {
  std::int64_t elements = 1;
  for (std::int64_t d : shape) {
    if (d < 0) return invalid(name, "shape " + shape_string(shape) + " has a negative dimension");
    if (d != 0 && elements > std::numeric_limits<std::int64_t>::max() / d)
      return invalid(name, "shape " + shape_string(shape) + " has too many elements to address");
    elements *= d;
  }
  return absl::OkStatus();
}

}  // namespace

VariablePlacer::VariablePlacer(int num_ps, PartitionerPtr partitioner)
    : num_ps_(num_ps), partitioner_(std::move(partitioner)) {}

const VariableLayout* VariablePlacer::find(std::string_view name) const {
  auto it = names_.find(name);
  if (it == names_.end()) return nullptr;
  const VariableLayout& v = variables_[it->second.variable];
  return v.name == name ? &v : nullptr;  // a shard name is not a variable
}

Status VariablePlacer::check_new(const std::string& name, const Shape& shape, std::int64_t shards) const {
  if (num_ps_ < 1)
    return absl::InvalidArgumentError("cannot place variable \"" + name + "\": there are " +
                                      std::to_string(num_ps_) + " parameter servers; at least one is needed");
  if (name.empty()) return absl::InvalidArgumentError("a variable needs a non-empty name");
  TWINPS_RETURN_IF_ERROR(check_shape(name, shape));

  auto clash = [&](const std::string& wanted, const NameUse& use) {
    const VariableLayout& other = variables_[use.variable];
    std::string owner = other.name == wanted ? "variable \"" + other.name + "\""
                                             : "shard " + std::to_string(use.shard) + " of variable \"" +
                                                   other.name + "\"";
    if (wanted == name) return invalid(name, "the name is already used by " + owner);
    return invalid(name, "its shard name \"" + wanted + "\" is already used by " + owner);
  };
  VariableLayout probe{name, shape, VariableKind::kTrainable, std::vector<ShardPlacement>(static_cast<std::size_t>(shards))};
  if (auto it = names_.find(name); it != names_.end()) return clash(name, it->second);
  for (std::size_t i = 0; shards > 1 && i < probe.shards.size(); ++i) {
    std::string shard = probe.shard_name(i);
    if (auto it = names_.find(shard); it != names_.end()) return clash(shard, it->second);
  }
  if (static_cast<std::uint64_t>(next_shard_id_) + static_cast<std::uint64_t>(shards) >
      std::numeric_limits<ShardId>::max())
    return invalid(name, "the model would have more shards than a ShardId can number");
  return absl::OkStatus();
}

StatusOr<VariableLayout> VariablePlacer::create(const std::string& name, const Shape& shape, VariableKind kind,
                                                std::int64_t element_bytes) {
  if (element_bytes < 0)
    return invalid(name, "element_bytes is " + std::to_string(element_bytes) + "; it must be >= 0 (0 for strings)");
  TWINPS_RETURN_IF_ERROR(check_new(name, shape, 1));  // before asking the partitioner

  std::int64_t requested = 1;
  // A scalar has no axis to split, and a variable with no rows has nothing to
  // split (TensorFlow would reject or divide by zero there).
  if (partitioner_ && !shape.empty() && shape[0] > 0) {
    std::vector<std::int64_t> parts = partitioner_->partition(shape, element_bytes);
    bool valid = !parts.empty() && parts[0] >= 1 &&
                 std::all_of(parts.begin() + 1, parts.end(), [](std::int64_t p) { return p == 1; });
    if (!valid)
      return invalid(name, partitioner_->describe() + " returned " + list_string(parts) + " for shape " +
                               shape_string(shape) + "; a partitioner must return [n, 1, ...] with n >= 1 " +
                               "(only axis 0 is split)");
    if (std::min(parts[0], shape[0]) > kMaxShardsPerVariable)
      return invalid(name, partitioner_->describe() + " asked for " + std::to_string(parts[0]) +
                               " shards; at most " + std::to_string(kMaxShardsPerVariable) + " are supported");
    requested = parts[0];
  }
  std::vector<std::int64_t> rows = div_split(storage_rows(shape), requested);
  TWINPS_RETURN_IF_ERROR(check_new(name, shape, static_cast<std::int64_t>(rows.size())));
  return add(name, shape, kind, rows, {});
}

StatusOr<VariableLayout> VariablePlacer::create_placed(const std::string& name, const Shape& shape, VariableKind kind,
                                                       const std::vector<std::int64_t>& shard_rows,
                                                       const std::vector<int>& shard_ps) {
  TWINPS_RETURN_IF_ERROR(check_new(name, shape, std::max<std::int64_t>(1, static_cast<std::int64_t>(shard_rows.size()))));
  if (shard_rows.empty() || shard_rows.size() != shard_ps.size())
    return invalid(name, "a placement plan needs one ps per shard and at least one shard (got " +
                             std::to_string(shard_rows.size()) + " shards, " + std::to_string(shard_ps.size()) + " ps)");
  std::int64_t sum = 0;
  for (std::size_t i = 0; i < shard_rows.size(); ++i) {
    if (shard_rows[i] < 1 && shard_rows.size() > 1) return invalid(name, "shard " + std::to_string(i) + " of the plan is empty");
    if (shard_ps[i] < 0 || shard_ps[i] >= num_ps_)
      return invalid(name, "the plan puts shard " + std::to_string(i) + " on ps " + std::to_string(shard_ps[i]) +
                               "; there are " + std::to_string(num_ps_));
    sum += shard_rows[i];
  }
  if (sum != storage_rows(shape))
    return invalid(name, "the plan's shards hold " + std::to_string(sum) + " rows; the variable has " +
                             std::to_string(storage_rows(shape)));
  return add(name, shape, kind, shard_rows, shard_ps);
}

StatusOr<VariableLayout> VariablePlacer::colocate_with(std::string_view existing, const std::string& name,
                                                       const Shape& shape, VariableKind kind) {
  auto it = names_.find(existing);
  if (it == names_.end())
    return invalid(name, "cannot colocate with \"" + std::string(existing) + "\": no such variable or shard");
  const VariableLayout& target = variables_[it->second.variable];
  if (it->second.shard < 0)
    return invalid(name, "cannot colocate with \"" + target.name + "\": it is sharded over " +
                             std::to_string(target.shards.size()) + " shards; name one of them, e.g. \"" +
                             target.shard_name(0) + "\"");
  int ps = target.shards[static_cast<std::size_t>(it->second.shard)].ps;
  TWINPS_RETURN_IF_ERROR(check_new(name, shape, 1));
  return add(name, shape, kind, {storage_rows(shape)}, {ps});
}

VariableLayout VariablePlacer::add(const std::string& name, const Shape& shape, VariableKind kind,
                                   const std::vector<std::int64_t>& shard_rows, const std::vector<int>& shard_ps) {
  VariableLayout layout{name, shape, kind, {}};
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < shard_rows.size(); ++i) {
    const std::int64_t rows = shard_rows[i];
    const int ps = shard_ps.empty() ? static_cast<int>(round_robin_++ % num_ps_) : shard_ps[i];
    layout.shards.push_back(ShardPlacement{next_shard_id_++, ps, offset, rows});
    offset += rows;
  }
  const std::size_t index = variables_.size();
  const bool sharded = layout.shards.size() > 1;
  names_.emplace(name, NameUse{index, sharded ? -1 : 0});
  if (sharded)
    for (std::size_t i = 0; i < layout.shards.size(); ++i)
      names_.emplace(layout.shard_name(i), NameUse{index, static_cast<std::int64_t>(i)});
  variables_.push_back(layout);
  return layout;
}

}  // namespace twinps
