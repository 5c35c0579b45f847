#include "core/ps/staleness.h"

#include <algorithm>
#include <cstdio>

namespace twinps {

void StalenessHistogram::record(std::int64_t staleness) {
  // A shard restored from an older checkpoint after the read can be behind
  // the version read; nothing came in between, so that counts as 0.
  staleness = std::max<std::int64_t>(staleness, 0);
  std::size_t i = 0;
  while (i < kBounds.size() && staleness > kBounds[i]) ++i;
  ++counts[i];
  ++total;
  sum += static_cast<std::uint64_t>(staleness);
  max = std::max(max, staleness);
}

void StalenessHistogram::merge(const StalenessHistogram& other) {
  for (std::size_t i = 0; i < counts.size(); ++i) counts[i] += other.counts[i];
  total += other.total;
  sum += other.sum;
  max = std::max(max, other.max);
  unmeasured += other.unmeasured;
  dropped += other.dropped;
}

std::string StalenessHistogram::describe() const {
  const std::string late = dropped ? " (" + std::to_string(dropped) + " dropped as late)" : "";
  if (total == 0)
    return "none measured" + (unmeasured ? " (" + std::to_string(unmeasured) + " unmeasured)" : "") + late;
  char head[96];
  std::snprintf(head, sizeof head, "max %lld, mean %.2f over %llu gradients;", static_cast<long long>(max), mean(),
                static_cast<unsigned long long>(total));
  std::string out = head;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] == 0) continue;
    std::string range;
    if (i == kBounds.size()) {
      range = ">" + std::to_string(kBounds.back());
    } else {
      const std::int64_t lo = i == 0 ? 0 : kBounds[i - 1] + 1;
      range = lo == kBounds[i] ? std::to_string(lo) : std::to_string(lo) + "-" + std::to_string(kBounds[i]);
    }
    out += " " + range + ":" + std::to_string(counts[i]);
  }
  if (unmeasured) out += " (" + std::to_string(unmeasured) + " unmeasured)";
  return out + late;
}

}  // namespace twinps
