#pragma once
// One number for a model's parameters, to tell whether two runs ended with
// bitwise the same values (the simulator's numeric mode against the
// in-memory cluster, the same seed twice): every trainable shard's name,
// shape and value bits, in shard-name order, folded FNV-1a style. Optimizer
// slots, counters and metric accumulators are left out.
#include <cstdint>
#include <vector>

#include "core/messages/messages.h"

namespace twinps::training {

std::uint64_t parameter_hash(const std::vector<ShardState>& shards);

}  // namespace twinps::training
