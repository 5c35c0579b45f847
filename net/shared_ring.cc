#include "net/shared_ring.h"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

namespace twinps::net {

namespace {

// The released counter has the front cache line to itself.
constexpr std::size_t kHeaderBytes = 64;

std::string errno_text() { return std::strerror(errno); }

std::uint64_t load_released(std::uint64_t* at) {
  return std::atomic_ref<std::uint64_t>(*at).load(std::memory_order_acquire);
}

StatusOr<std::unique_ptr<SharedMapping>> map_shared(int fd, std::size_t bytes) {
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    const std::string why = errno_text();
    ::close(fd);
    return absl::UnavailableError("cannot map a shared ring: " + why);
  }
  return std::make_unique<SharedMapping>(fd, static_cast<char*>(base), bytes);
}

}  // namespace

SharedMapping::~SharedMapping() {
  ::munmap(base_, bytes_);
  ::close(fd_);
}

// ---------------------------------------------------------------- writer

RingWriter::RingWriter(std::unique_ptr<SharedMapping> map, std::size_t capacity)
    : map_(std::move(map)),
      released_(reinterpret_cast<std::uint64_t*>(map_->base())),
      data_(map_->base() + kHeaderBytes),
      capacity_(capacity) {}

StatusOr<std::unique_ptr<RingWriter>> RingWriter::create(std::size_t capacity) {
  // Offsets travel as 32 bits (net/data_frame.h).
  if (capacity == 0 || capacity > UINT32_MAX) return absl::InvalidArgumentError("a shared ring of 1 byte to 4 GiB");
  const int fd = ::memfd_create("twinps-data-ring", MFD_CLOEXEC);
  if (fd < 0) return absl::UnavailableError("cannot create a shared ring: " + errno_text());
  if (::ftruncate(fd, static_cast<off_t>(kHeaderBytes + capacity)) != 0) {
    const std::string why = errno_text();
    ::close(fd);
    return absl::UnavailableError("cannot size a shared ring: " + why);
  }
  auto map = map_shared(fd, kHeaderBytes + capacity);
  if (!map.ok()) return map.status();
  return std::unique_ptr<RingWriter>(new RingWriter(std::move(*map), capacity));
}

std::optional<std::uint32_t> RingWriter::reserve(std::size_t bytes) {
  if (bytes == 0 || bytes > capacity_) return std::nullopt;
  // The receiver releases regions in order: what lies before `released` is
  // free, and everything is once it has released all.
  const std::uint64_t released = load_released(released_);
  const bool all_free = released == head_;
  std::uint64_t start = head_;
  // To the ring's front when the region would run past its end, and when
  // nothing is in flight: a ring then only ever touches as many pages as are
  // in flight at once (one message's, between a worker and a ps taking turns),
  // and those stay in cache.
  if ((all_free || start % capacity_ + bytes > capacity_) && start % capacity_ != 0)
    start += capacity_ - start % capacity_;
  if (!all_free && start + bytes - released > capacity_) return std::nullopt;
  head_ = start + bytes;
  return static_cast<std::uint32_t>(start % capacity_);
}

// ---------------------------------------------------------------- reader

RingReader::RingReader(std::unique_ptr<SharedMapping> map, std::size_t capacity)
    : map_(std::move(map)),
      released_(reinterpret_cast<std::uint64_t*>(map_->base())),
      data_(map_->base() + kHeaderBytes),
      capacity_(capacity) {}

StatusOr<std::unique_ptr<RingReader>> RingReader::open(pid_t pid, int fd, std::uint64_t capacity) {
  if (pid <= 0 || fd < 0 || capacity == 0 || capacity > UINT32_MAX)
    return absl::InvalidArgumentError("a shared ring offer without a peer, a file or a size");
  const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  const int mine = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (mine < 0) return absl::UnavailableError("cannot open the peer's shared ring " + path + ": " + errno_text());
  struct stat st{};
  if (::fstat(mine, &st) != 0 || static_cast<std::uint64_t>(st.st_size) != kHeaderBytes + capacity) {
    ::close(mine);
    return absl::InvalidArgumentError("the peer's shared ring " + path + " is not of the size it offered");
  }
  auto map = map_shared(mine, static_cast<std::size_t>(kHeaderBytes + capacity));
  if (!map.ok()) return map.status();
  return std::unique_ptr<RingReader>(new RingReader(std::move(*map), static_cast<std::size_t>(capacity)));
}

const char* RingReader::next(std::uint32_t offset, std::uint64_t bytes) {
  if (bytes == 0 || bytes > capacity_ || offset > capacity_ - bytes) return nullptr;
  std::uint64_t start = consumed_;
  if (start % capacity_ != offset) {
    // A region that does not follow the last one is at the ring's front.
    if (offset != 0) return nullptr;
    start += capacity_ - start % capacity_;
  }
  pending_end_ = start + bytes;
  return data_ + offset;
}

void RingReader::release() {
  consumed_ = pending_end_;
  std::atomic_ref<std::uint64_t>(*released_).store(consumed_, std::memory_order_release);
}

pid_t unix_socket_peer_pid(int socket_fd) {
  struct ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(socket_fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return 0;
  return cred.pid;
}

}  // namespace twinps::net
