#pragma once
// Keras's StringLookup: strings to integer ids. Out-of-vocabulary strings map
// to index 0 (num_oov_indices = 1), then the vocabulary in order. With a mask
// token (TensorFlow 2.4's default, used by the older seed), the mask takes
// index 0 and OOV moves to 1.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/runtime/status.h"

namespace twinps {

class StringLookup {
 public:
  static StatusOr<StringLookup> create(std::vector<std::string> vocabulary, int num_oov_indices = 1,
                                       std::optional<std::string> mask_token = std::nullopt);
  std::int64_t lookup(std::string_view token) const;
  // Size of the id space (mask + OOV + vocabulary): the embedding's input_dim.
  std::int64_t vocabulary_size() const { return static_cast<std::int64_t>(vocabulary_.size()) + offset_; }
  const std::vector<std::string>& vocabulary() const { return vocabulary_; }

 private:
  std::vector<std::string> vocabulary_;
  std::map<std::string, std::int64_t, std::less<>> index_;
  std::int64_t offset_ = 0;    // ids before the vocabulary (mask, OOV)
  std::int64_t oov_id_ = 0;
  bool has_oov_ = true;
};

}  // namespace twinps
