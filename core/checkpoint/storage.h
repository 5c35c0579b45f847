#pragma once
// Where checkpoints are kept: a flat namespace of named byte strings.
// CheckpointManager writes through this interface so the same code saves to a
// directory in real mode and to memory in tests and in the simulator (whose
// storage outlives a simulated coordinator crash, as a disk would).
//
// Names are plain file names: non-empty, without '/', and not starting with
// '.', which is reserved for temporary files (INVALID_ARGUMENT otherwise).
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/runtime/status.h"

namespace twinps {

class CheckpointStorage {
 public:
  virtual ~CheckpointStorage() = default;
  // Replaces `name` with `bytes` as one step: a reader sees the old content or
  // the new, never a mixture or a prefix, even if the writer dies midway.
  virtual Status write_atomic(const std::string& name, std::string_view bytes) = 0;
  // NOT_FOUND if there is no such object.
  virtual StatusOr<std::string> read(const std::string& name) const = 0;
  // Every name, sorted.
  virtual StatusOr<std::vector<std::string>> list() const = 0;
  // NOT_FOUND if there is no such object.
  virtual Status remove(const std::string& name) = 0;
  // How errors should name the object: its path for files.
  virtual std::string describe(const std::string& name) const = 0;
};

// INVALID_ARGUMENT unless `name` is a valid storage name (see above).
Status validate_storage_name(const std::string& name);

// Files in one directory. write_atomic writes ".<name>.tmp", fsyncs it, renames
// it over <name> and fsyncs the directory, so a crash leaves either the old
// file or the new one (and perhaps a stale temporary file, which list()
// ignores and the next write of that name replaces). Errors name the path:
// NOT_FOUND for a missing directory or file, PERMISSION_DENIED for one that
// cannot be written, FAILED_PRECONDITION for a path that is not a directory.
class LocalDiskStorage final : public CheckpointStorage {
 public:
  explicit LocalDiskStorage(std::string directory);

  // Checks that `directory` is a writable directory, creating it (and its
  // parents) first if `create` is set.
  static StatusOr<std::unique_ptr<LocalDiskStorage>> open(const std::string& directory, bool create = true);

  Status write_atomic(const std::string& name, std::string_view bytes) override;
  StatusOr<std::string> read(const std::string& name) const override;
  StatusOr<std::vector<std::string>> list() const override;
  Status remove(const std::string& name) override;
  std::string describe(const std::string& name) const override;

  const std::string& directory() const { return directory_; }

  // Test hook: the next write stops with an I/O error after this many bytes,
  // as a full disk or a crash would stop it.
  void fail_next_write_after_for_testing(std::size_t bytes) { fail_after_ = bytes; }

 private:
  std::string path(const std::string& name) const;
  Status check_directory() const;

  std::string directory_;
  std::optional<std::size_t> fail_after_;
};

// Objects in memory. Keep it outside the node that writes (the coordinator) so
// the checkpoints survive that node's simulated crash.
class InMemoryStorage final : public CheckpointStorage {
 public:
  Status write_atomic(const std::string& name, std::string_view bytes) override;
  StatusOr<std::string> read(const std::string& name) const override;
  StatusOr<std::vector<std::string>> list() const override;
  Status remove(const std::string& name) override;
  std::string describe(const std::string& name) const override { return "memory:" + name; }

  // Test hooks: change stored bytes in place (bypassing write_atomic), or make
  // the next `count` writes fail with `status` and store nothing.
  std::string* mutable_bytes(const std::string& name);
  void fail_next_writes(Status status, int count = 1);

  std::uint64_t bytes_written() const { return bytes_written_; }

 private:
  std::map<std::string, std::string> objects_;
  Status injected_;
  int injected_count_ = 0;
  std::uint64_t bytes_written_ = 0;
};

}  // namespace twinps
