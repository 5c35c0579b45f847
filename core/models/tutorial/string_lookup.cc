#include "core/models/tutorial/string_lookup.h"

namespace twinps {

StatusOr<StringLookup> StringLookup::create(std::vector<std::string> vocabulary, int num_oov_indices,
                                            std::optional<std::string> mask_token) {
  if (num_oov_indices < 0 || num_oov_indices > 1)
    return absl::InvalidArgumentError("num_oov_indices must be 0 or 1");
  StringLookup s;
  const std::int64_t mask = mask_token ? 1 : 0;
  s.offset_ = mask + num_oov_indices;
  s.oov_id_ = mask;
  s.has_oov_ = num_oov_indices == 1;
  for (std::size_t i = 0; i < vocabulary.size(); ++i) {
    if (mask_token && vocabulary[i] == *mask_token)
      return absl::InvalidArgumentError("the vocabulary contains the mask token");
    if (!s.index_.emplace(vocabulary[i], s.offset_ + static_cast<std::int64_t>(i)).second)
      return absl::InvalidArgumentError("the vocabulary repeats \"" + vocabulary[i] + "\"");
  }
  s.vocabulary_ = std::move(vocabulary);
  return s;
}

std::int64_t StringLookup::lookup(std::string_view token) const {
  auto it = index_.find(token);
  if (it != index_.end()) return it->second;
  return has_oov_ ? oov_id_ : -1;
}

}  // namespace twinps
