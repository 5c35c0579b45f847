#pragma once
// Exactly-once visitation for the trainer (issue 13, point 3;
// docs/semantics.md "Exactly-once data"): every training record is trained
// on exactly once per epoch, whatever workers die meanwhile.
//
// As for the simulator's synthetic model (core/coordinator/epoch_splits.h),
// the coordinator owns the data, not the workers. Each epoch it orders the
// training records (a permutation drawn from the data seed and the epoch,
// or file order) and cuts the order into splits, one per train closure
// (steps_per_execution batches). The closure carries its split's record ids
// as arguments, so the split shares its fate: put back with it after a
// worker failure and run again elsewhere, never run again once it completed.
// It also carries the split's key, which its pushes carry, so a ps applies a
// split's pushes once even when a closure runs twice (a worker killed after
// its push was applied, before its reply arrived).
//
// A worker needs the records by id for that. kRecordTableFunction reads the
// whole training data once, in order, into memory on every worker (again
// after a restart), from the data source's own dataset: a record's id is its
// position in file order. The price is the decoded data in each worker's
// memory (Fashion-MNIST's 60,000 training images: 188 MB as floats); data
// larger than that trains at least once, streamed from the files.
//
// Every step adds 1 to the rows of its examples in CompiledModel::kVisits in
// the same push as its gradients, so the counts the trainer reports are what
// the parameter servers applied, not what the coordinator believes.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/data/record_dataset.h"
#include "core/messages/value.h"
#include "core/runtime/random.h"
#include "core/runtime/status.h"
#include "core/coordinator/cluster_coordinator.h"
#include "core/worker/function_registry.h"

namespace twinps::training {

// [expected records]; parent: a record dataset of one pass over the whole
// training data, in order.
inline constexpr char kRecordTableFunction[] = "training/record_table";
// [model, record table, ids (pack_ids), split key]: ceil(ids / batch size)
// training steps on those records, in that order; returns a StepReport.
inline constexpr char kTrainSplitStep[] = "training/train_split";

// Every record of the training data, decoded, on one worker.
class RecordTable final : public Resource {
 public:
  // Reads `dataset` to its end. FAILED_PRECONDITION when it yields another
  // number of records than `expected` (bad records skipped, files changed
  // since they were counted): ids would not name the same records.
  static StatusOr<std::unique_ptr<RecordTable>> read(const data::RecordDatasetResource& dataset, RandomStream random,
                                                     std::int64_t expected);

  const data::Schema& schema() const { return schema_; }
  const data::RecordBatch& records() const { return records_; }
  std::int64_t size() const { return records_.size; }

 private:
  data::Schema schema_;
  data::RecordBatch records_;
};

// The order epoch `epoch` visits `records` records in: a permutation drawn
// from (seed, epoch) when `shuffle`, else file order.
std::vector<std::int64_t> epoch_order(std::int64_t records, std::uint64_t seed, std::int64_t epoch, bool shuffle);

// Record ids on the wire: little-endian int64s in a string (a split of one
// 64-record batch is 512 bytes).
std::string pack_ids(std::span<const std::int64_t> ids);
// INVALID_ARGUMENT when `bytes` is not a whole number of ids.
StatusOr<std::vector<std::int64_t>> unpack_ids(const std::string& bytes);

// The visits the parameter servers counted per example
// (CompiledModel::kVisits; the simulator's synthetic model keeps them under
// the same name): empty when the cluster has no such variable.
Task<StatusOr<std::vector<std::int64_t>>> read_visit_counts(ClusterCoordinator& coordinator);

// Registers kRecordTableFunction and kTrainSplitStep.
void register_exactly_once_functions(FunctionRegistry& registry);

}  // namespace twinps::training
