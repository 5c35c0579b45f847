#pragma once
// Exactly-once visitation (issue 13, point 3; docs/semantics.md "Exactly-once
// data"): the coordinator, not the workers, decides which examples each
// closure trains on.
//
// TensorFlow's way (spec L1, R10) gives every worker its own dataset
// iterator: a closure takes whatever that worker's iterator yields next, a
// worker that dies loses its position (a restarted one starts its data
// again) and a closure put back after a worker failure reads the next
// elements of another worker's iterator. Examples are skipped or seen twice.
//
// Here the data of one epoch is cut into splits (record ranges of
// `split_size` examples, the last one shorter). The coordinator gives each
// closure the next split as arguments, so the split travels with the
// closure and the closure queue's own guarantees carry over to the data:
//   * a closure whose worker died is put back and runs again elsewhere with
//     the same split (a split whose results were not applied is handed out
//     again);
//   * a closure completes once, after its pushes were answered, and is
//     never put back then (a split whose results were applied is not handed
//     out again).
// The split is bound when the closure is scheduled, not when it is
// dispatched: which worker runs it does not matter, and a retried closure
// keeps it.
//
// Completion is not quite "applied": a worker killed after a ps applied its
// push but before the closure's reply reached the coordinator, or a worker
// given up on while hung that resumes later, would apply the split's
// results a second time when the closure runs again. So the closure also
// carries a split key that its pushes carry (PushRequest::split_key): a ps
// applies one push per key, from whichever worker, and acknowledges the
// other as a duplicate (within its dedup window, core/ps/parameter_store.h).
// The visits a scenario counts are what the ps applied, so a split trained
// twice or never is caught (Expectation.visits_per_example).
#include <cstdint>

namespace twinps {

struct Split {
  std::int64_t epoch = 0;  // 0-based
  std::int64_t index = 0;  // within the epoch
  std::int64_t begin = 0;  // example ids [begin, end)
  std::int64_t end = 0;
};

class EpochSplits {
 public:
  // `examples` >= 1 examples per epoch, cut into splits of `split_size` >= 1.
  EpochSplits(std::int64_t examples, std::int64_t split_size);

  std::int64_t splits_per_epoch() const { return (examples_ + split_size_ - 1) / split_size_; }

  // The next split: the epoch's splits in order, then the next epoch's.
  Split next();

  // Splits handed out so far, over every epoch.
  std::int64_t handed_out() const { return handed_out_; }

 private:
  std::int64_t examples_;
  std::int64_t split_size_;
  std::int64_t handed_out_ = 0;
};

}  // namespace twinps
