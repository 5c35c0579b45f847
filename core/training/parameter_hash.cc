#include "core/training/parameter_hash.h"

#include <algorithm>
#include <cstring>

namespace twinps::training {

namespace {

void fold(std::uint64_t& h, const void* data, std::size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
}

}  // namespace

std::uint64_t parameter_hash(const std::vector<ShardState>& shards) {
  std::vector<const ShardState*> trainable;
  for (const auto& s : shards)
    if (s.spec.kind == VariableKind::kTrainable) trainable.push_back(&s);
  std::sort(trainable.begin(), trainable.end(),
            [](const ShardState* a, const ShardState* b) { return a->spec.name < b->spec.name; });
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const ShardState* s : trainable) {
    fold(h, s->spec.name.data(), s->spec.name.size());
    const std::int64_t shape[2] = {static_cast<std::int64_t>(s->value.rows()), static_cast<std::int64_t>(s->value.cols())};
    fold(h, shape, sizeof shape);
    fold(h, s->value.data(), static_cast<std::size_t>(s->value.size()) * sizeof(float));
  }
  return h;
}

}  // namespace twinps::training
