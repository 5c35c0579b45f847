#include "core/data/column_index.h"

namespace twinps::data {
namespace {

// Positions remembered per record; an Example of a million features does
// not keep them all.
constexpr std::size_t kMaxPositions = 4096;

}  // namespace

ColumnIndex::ColumnIndex(const std::vector<std::string>& names) {
  for (std::size_t c = 0; c < names.size(); ++c) column_of_.emplace(names[c], c);  // a repeat keeps its first column
}

std::size_t ColumnIndex::find(std::string_view name) const {
  auto it = column_of_.find(name);
  return it == column_of_.end() ? kNotAColumn : it->second;
}

std::size_t ColumnIndex::find_and_remember(std::string_view name, const NameKey& key, std::size_t position) {
  const std::size_t column = find(name);
  if (!key.exact()) return column;
  if (position < last_record_.size()) {
    last_record_[position] = {key, column};
  } else if (position == last_record_.size() && position < kMaxPositions) {
    last_record_.push_back({key, column});
  }
  return column;
}

}  // namespace twinps::data
