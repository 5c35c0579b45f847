#include "core/coordinator/epoch_splits.h"

#include <algorithm>

namespace twinps {

EpochSplits::EpochSplits(std::int64_t examples, std::int64_t split_size)
    : examples_(std::max<std::int64_t>(1, examples)), split_size_(std::max<std::int64_t>(1, split_size)) {}

Split EpochSplits::next() {
  const std::int64_t per_epoch = splits_per_epoch();
  Split s;
  s.epoch = handed_out_ / per_epoch;
  s.index = handed_out_ % per_epoch;
  s.begin = s.index * split_size_;
  s.end = std::min(examples_, s.begin + split_size_);
  ++handed_out_;
  return s;
}

}  // namespace twinps
