#pragma once
// Saving and restoring the parameter servers' state (spec P6, P7, P9).
//
// A checkpoint holds every variable as the slices of one full variable (each
// slice = one shard at save time, with its row offset), the optimizer slots
// sliced the same way, and each shard's update count. Restoring cuts those
// slices along the *target* layout's shard boundaries, so a run can resume
// with a different number of shards or parameter servers, optimizer slots
// included (TensorFlow cannot reshard slots: spec L9).
//
// Files are "<prefix>-<step>", framed and checksummed (checkpoint_file.h) and
// written atomically. A damaged file is refused as a whole, never half loaded.
// The step inside a verified file is the truth: a file whose name disagrees
// with it (renamed or copied) is refused with DATA_LOSS naming both, and is
// never counted, or removed, by keep-N.
// A checkpoint must fit in one protobuf message (2 GiB).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/checkpoint/storage.h"
#include "core/messages/messages.h"
#include "core/ps/optimizer_config.h"
#include "core/runtime/status.h"
#include "core/variables/layout.h"

namespace twinps {

struct CheckpointInfo {
  std::string name;  // "<prefix>-<step>"
  std::int64_t step = 0;
};

struct RefusedCheckpoint {
  std::string name;
  Status reason;
};

struct RestoredCheckpoint {
  std::string name;
  std::int64_t step = 0;
  std::map<std::string, std::string> metadata;
  // One state per target shard, in layout order then shard order, ready for
  // CreateShardsRequest (with replace_existing). A shard assembled from several
  // saved slices takes the largest of their update counts.
  std::vector<ShardState> shards;
  // Newer checkpoints that were skipped because they could not be read or
  // verified, newest first, each with the reason.
  std::vector<RefusedCheckpoint> refused;
  // Variables in the checkpoint that no target asked for (ignored).
  std::vector<std::string> unused_variables;
};

class CheckpointManager {
 public:
  // Keeps the `max_to_keep` newest checkpoints (all of them if max_to_keep <= 0).
  CheckpointManager(CheckpointStorage& storage, int max_to_keep, std::string prefix = "ckpt");

  // Writes "<prefix>-<step>" (replacing one of the same step) and then removes
  // the oldest checkpoints beyond max_to_keep — oldest by the step recorded in
  // each verified file; files that do not verify are left alone — and returns
  // the name written. Each save reads the kept checkpoints to verify them.
  // `shards` must hold the state of every shard of every layout (from
  // ExportShards), trainable ones with their optimizer's slots (the layout's
  // own optimizer, else `optimizer`): INVALID_ARGUMENT naming the variable
  // otherwise, with nothing written. A variable with its own optimizer is
  // saved with that optimizer's name and slot names.
  StatusOr<std::string> save(std::int64_t step, const std::vector<VariableLayout>& layouts,
                             const std::vector<ShardState>& shards, const OptimizerConfig& optimizer,
                             const std::map<std::string, std::string>& metadata = {});

  // The newest checkpoint that reads and verifies, cut into `targets`.
  //  * NOT_FOUND if there is no checkpoint.
  //  * A checkpoint that is damaged (DATA_LOSS), whose name disagrees with the
  //    step recorded inside it (DATA_LOSS), or that cannot be read is refused
  //    and the next older one tried; the refusals are returned with the result.
  //    So the checkpoint restored is the one with the highest recorded step
  //    among those that verify.
  //    If every checkpoint is refused: DATA_LOSS listing each reason.
  //  * A checkpoint that verifies but does not fit the targets (a variable
  //    missing, another full shape or kind, another optimizer's slots: each
  //    target's own optimizer, else `optimizer`, against the optimizer it was
  //    saved with) is
  //    FAILED_PRECONDITION naming the variable. Older checkpoints are not tried:
  //    the program changed, and silently resuming from further back would hide it.
  StatusOr<RestoredCheckpoint> restore_latest(const std::vector<VariableLayout>& targets,
                                              const OptimizerConfig& optimizer) const;

  // One checkpoint by name, with the same checks and no fallback.
  StatusOr<RestoredCheckpoint> restore(const std::string& name, const std::vector<VariableLayout>& targets,
                                       const OptimizerConfig& optimizer) const;

  // The checkpoints of this prefix, oldest (lowest step) first, by name: the
  // files are not read, so a step here is only what the name claims (restore
  // checks it). Other names in the storage are ignored.
  StatusOr<std::vector<CheckpointInfo>> list() const;

  // Reads and verifies one checkpoint file: the step recorded inside it, or
  // why it cannot be trusted (damaged, unreadable, or named for another step).
  StatusOr<std::int64_t> verified_step(const std::string& name) const;

  const std::string& prefix() const { return prefix_; }
  int max_to_keep() const { return max_to_keep_; }

 private:
  CheckpointStorage& storage_;
  int max_to_keep_;
  std::string prefix_;
};

}  // namespace twinps
