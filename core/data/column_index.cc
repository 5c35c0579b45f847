#include "core/data/column_index.h"

#include <cstring>

namespace twinps::data {
namespace {

// A multiply and two shifts: every input bit reaches the high bits, and the
// shifts bring them down to the low bits the table's mask keeps.
std::uint64_t mix(std::uint64_t x) {
  x ^= x >> 32;
  x *= 0x9e3779b97f4a7c15ull;
  x ^= x >> 29;
  return x;
}

// Positions remembered per record; an Example of a million features does
// not keep them all.
constexpr std::size_t kMaxPositions = 4096;

}  // namespace

std::uint64_t ColumnIndex::fingerprint(std::string_view name, const NameKey& key) {
  std::uint64_t a = key.a;
  for (std::size_t i = 8; i + 8 < name.size(); i += 8) a = mix(a ^ load(name.data() + i, 8));  // beyond 16 bytes
  return mix(a ^ mix(key.b ^ (key.size * 0xff51afd7ed558ccdull)));
}

ColumnIndex::ColumnIndex(const std::vector<std::string>& names) : names_(names) {
  std::size_t size = 8;
  while (size < 4 * names.size()) size *= 2;
  slots_.resize(size);
  mask_ = size - 1;
  for (std::size_t c = 0; c < names.size(); ++c) {
    if (find(names[c]) != kNotAColumn) continue;  // a repeated name keeps its first column
    const std::uint64_t f = fingerprint(names[c], key_of(names[c]));
    std::size_t i = f & mask_;
    while (slots_[i].column != kNotAColumn) i = (i + 1) & mask_;
    slots_[i] = {f, c};
  }
}

std::size_t ColumnIndex::find(std::string_view name, const NameKey& key) const {
  const std::uint64_t f = fingerprint(name, key);
  for (std::size_t i = f & mask_;; i = (i + 1) & mask_) {
    const Slot& s = slots_[i];
    if (s.column == kNotAColumn) return kNotAColumn;  // the table is never full
    if (s.fingerprint == f && names_[s.column] == name) return s.column;
  }
}

std::size_t ColumnIndex::find(std::string_view name) const { return find(name, key_of(name)); }

std::size_t ColumnIndex::find_and_remember(std::string_view name, const NameKey& key, std::size_t position) {
  const std::size_t column = find(name, key);
  if (!key.exact()) return column;
  if (position < last_record_.size()) {
    last_record_[position] = {key, column};
  } else if (position == last_record_.size() && position < kMaxPositions) {
    last_record_.push_back({key, column});
  }
  return column;
}

}  // namespace twinps::data
