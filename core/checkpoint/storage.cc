#include "core/checkpoint/storage.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

namespace twinps {
namespace {

// An errno as a status whose code says what the caller can do about it.
Status errno_status(int err, const std::string& what) {
  std::string message = what + ": " + std::strerror(err);
  switch (err) {
    case ENOENT: return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
    case EROFS: return absl::PermissionDeniedError(message);
    case ENOTDIR:
    case EISDIR:
    case EEXIST: return absl::FailedPreconditionError(message);
    case ENOSPC:
    case EDQUOT: return absl::ResourceExhaustedError(message);
    default: return absl::UnavailableError(message);
  }
}

class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }
  // Closes now, reporting the error close() can return (NFS reports late write errors there).
  int close() {
    int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }

 private:
  int fd_;
};

}  // namespace

Status validate_storage_name(const std::string& name) {
  if (name.empty()) return absl::InvalidArgumentError("checkpoint name is empty");
  if (name.find('/') != std::string::npos || name.find('\0') != std::string::npos)
    return absl::InvalidArgumentError("checkpoint name '" + name + "' contains '/' or a NUL byte");
  if (name[0] == '.')
    return absl::InvalidArgumentError("checkpoint name '" + name + "' starts with '.', which is reserved for temporary files");
  return absl::OkStatus();
}

// ---------------------------------------------------------------- LocalDiskStorage

LocalDiskStorage::LocalDiskStorage(std::string directory) : directory_(std::move(directory)) {
  while (directory_.size() > 1 && directory_.back() == '/') directory_.pop_back();
}

StatusOr<std::unique_ptr<LocalDiskStorage>> LocalDiskStorage::open(const std::string& directory, bool create) {
  if (directory.empty()) return absl::InvalidArgumentError("checkpoint directory is empty");
  if (create) {
    std::error_code ec;
    std::filesystem::create_directories(directory, ec);
    if (ec) return errno_status(ec.value(), "cannot create checkpoint directory '" + directory + "'");
  }
  auto storage = std::make_unique<LocalDiskStorage>(directory);
  TWINPS_RETURN_IF_ERROR(storage->check_directory());
  if (::access(storage->directory_.c_str(), W_OK) != 0)
    return errno_status(errno, "checkpoint directory '" + storage->directory_ + "' is not writable");
  return storage;
}

std::string LocalDiskStorage::path(const std::string& name) const { return directory_ + "/" + name; }

std::string LocalDiskStorage::describe(const std::string& name) const { return path(name); }

Status LocalDiskStorage::check_directory() const {
  struct stat st {};
  if (::stat(directory_.c_str(), &st) != 0)
    return errno_status(errno, "checkpoint directory '" + directory_ + "' is not usable");
  if (!S_ISDIR(st.st_mode))
    return absl::FailedPreconditionError("checkpoint directory '" + directory_ + "' is not a directory");
  return absl::OkStatus();
}

Status LocalDiskStorage::write_atomic(const std::string& name, std::string_view bytes) {
  TWINPS_RETURN_IF_ERROR(validate_storage_name(name));
  TWINPS_RETURN_IF_ERROR(check_directory());
  const std::string final_path = path(name);
  const std::string temp_path = path("." + name + ".tmp");
  std::optional<std::size_t> fail_after = std::exchange(fail_after_, std::nullopt);

  auto fail = [&](int err, const std::string& what) {
    ::unlink(temp_path.c_str());
    return errno_status(err, what);
  };

  FileDescriptor fd(::open(temp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd.get() < 0) return errno_status(errno, "cannot create '" + temp_path + "' to write checkpoint '" + final_path + "'");
  std::size_t written = 0;
  while (written < bytes.size()) {
    std::size_t chunk = bytes.size() - written;
    if (fail_after) {
      if (written >= *fail_after) {
        // Leave the partial temporary file behind, as a crash would.
        return errno_status(EIO, "cannot write '" + temp_path + "' (injected failure after " +
                                     std::to_string(*fail_after) + " bytes)");
      }
      chunk = std::min(chunk, *fail_after - written);
    }
    ssize_t n = ::write(fd.get(), bytes.data() + written, chunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(errno, "cannot write '" + temp_path + "'");
    }
    written += static_cast<std::size_t>(n);
  }
  if (::fsync(fd.get()) != 0) return fail(errno, "cannot flush '" + temp_path + "' to disk");
  if (fd.close() != 0) return fail(errno, "cannot close '" + temp_path + "'");
  if (::rename(temp_path.c_str(), final_path.c_str()) != 0)
    return fail(errno, "cannot rename '" + temp_path + "' to '" + final_path + "'");
  // Make the rename itself durable.
  FileDescriptor dir(::open(directory_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() >= 0 && ::fsync(dir.get()) != 0 && errno != EINVAL)
    return errno_status(errno, "cannot flush directory '" + directory_ + "' after writing '" + final_path + "'");
  return absl::OkStatus();
}

StatusOr<std::string> LocalDiskStorage::read(const std::string& name) const {
  TWINPS_RETURN_IF_ERROR(validate_storage_name(name));
  const std::string file = path(name);
  FileDescriptor fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return errno_status(errno, "cannot open checkpoint file '" + file + "'");
  std::string out;
  char buffer[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_status(errno, "cannot read checkpoint file '" + file + "'");
    }
    if (n == 0) break;
    out.append(buffer, static_cast<std::size_t>(n));
  }
  return out;
}

StatusOr<std::vector<std::string>> LocalDiskStorage::list() const {
  TWINPS_RETURN_IF_ERROR(check_directory());
  std::vector<std::string> names;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(directory_, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    std::error_code type_ec;
    if (!name.empty() && name[0] != '.' && it->is_regular_file(type_ec)) names.push_back(std::move(name));
  }
  if (ec) return errno_status(ec.value(), "cannot list checkpoint directory '" + directory_ + "'");
  std::sort(names.begin(), names.end());
  return names;
}

Status LocalDiskStorage::remove(const std::string& name) {
  TWINPS_RETURN_IF_ERROR(validate_storage_name(name));
  const std::string file = path(name);
  if (::unlink(file.c_str()) != 0) return errno_status(errno, "cannot remove checkpoint file '" + file + "'");
  return absl::OkStatus();
}

// ---------------------------------------------------------------- InMemoryStorage

Status InMemoryStorage::write_atomic(const std::string& name, std::string_view bytes) {
  TWINPS_RETURN_IF_ERROR(validate_storage_name(name));
  if (injected_count_ > 0) {
    --injected_count_;
    return injected_;
  }
  objects_[name] = std::string(bytes);
  bytes_written_ += bytes.size();
  return absl::OkStatus();
}

StatusOr<std::string> InMemoryStorage::read(const std::string& name) const {
  TWINPS_RETURN_IF_ERROR(validate_storage_name(name));
  auto it = objects_.find(name);
  if (it == objects_.end()) return absl::NotFoundError("checkpoint '" + describe(name) + "' does not exist");
  return it->second;
}

StatusOr<std::vector<std::string>> InMemoryStorage::list() const {
  std::vector<std::string> names;
  for (const auto& [name, bytes] : objects_) names.push_back(name);
  return names;
}

Status InMemoryStorage::remove(const std::string& name) {
  TWINPS_RETURN_IF_ERROR(validate_storage_name(name));
  if (objects_.erase(name) == 0) return absl::NotFoundError("checkpoint '" + describe(name) + "' does not exist");
  return absl::OkStatus();
}

std::string* InMemoryStorage::mutable_bytes(const std::string& name) {
  auto it = objects_.find(name);
  return it == objects_.end() ? nullptr : &it->second;
}

void InMemoryStorage::fail_next_writes(Status status, int count) {
  injected_ = std::move(status);
  injected_count_ = count;
}

}  // namespace twinps
